// Command streamrun runs stream-processing pipelines on Apache Pulsar's
// protocol, and an embedded broker to run them against.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// command is one subcommand. run returns the exit status: 0 ok, 1 failed,
// 2 bad usage.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands; each lives in a file of its own named
// after it (broker.go, ...). Add yours here.
func commands() []command {
	return []command{
		{"broker", "run the embedded Pulsar broker", runBroker},
		{"produce", "publish messages to a topic", runProduce},
		{"consume", "receive messages from topics or a pattern", runConsume},
		{"validate", "check pipeline files without a broker", runValidate},
		{"version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "--version":
		return runVersion(ctx, nil, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "streamrun: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: streamrun <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'streamrun <command> --help' for a command's flags.\n")
}

// version is the module version, or the VCS revision of a development
// build.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if (v == "" || v == "(devel)") && rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		return "devel-" + rev + dirty
	}
	if v == "" || v == "(devel)" {
		return "devel"
	}
	return v
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "streamrun version: takes no arguments")
		return 2
	}
	fmt.Fprintf(stdout, "streamrun %s\n", version())
	return 0
}
