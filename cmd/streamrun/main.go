// Command streamrun runs stream-processing pipelines on Apache Pulsar's
// protocol, and an embedded broker to run them against.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// command is one subcommand. run returns the exit status: 0 ok, 1 failed,
// 2 bad usage (see cli.go for the conventions every command follows).
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands; each lives in a file of its own named
// after it (broker.go, ...). Add yours here.
func commands() []command {
	return []command{
		{"run", "run the pipelines of YAML files", runRun},
		{"broker", "run the embedded Pulsar broker", runBroker},
		{"produce", "publish messages to a topic", runProduce},
		{"consume", "receive messages from topics or a pattern", runConsume},
		{"bench", "measure throughput and latency: produce, consume, pipeline", runBench},
		{"health", "check an HTTP health endpoint (container health checks)", runHealth},
		{"topics", "administer topics over the admin REST API", runTopics},
		{"validate", "check pipeline files without a broker", runValidate},
		{"test", "run test files: inputs, faults and expected outputs against real handlers", runTest},
		{"ctl", "act on a running host through its control API", runCtl},
		{"new", "write a ready handler project: streamrun new handler NAME --lang go|python", runNew},
		{"state", "look inside a pipeline's keyed state: keys, get, dump", runState},
		{"version", "print the version, commit and Go version", runVersion},
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
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help":
		usage(stdout)
		return 0
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		// streamrun help CMD: the command's own --help.
		if c, ok := lookup(args[1]); ok && len(args) == 2 {
			return c.run(ctx, []string{"--help"}, stdout, stderr)
		}
		fmt.Fprintf(stderr, "streamrun help: unknown command %q\nRun 'streamrun --help' for the commands.\n", strings.Join(args[1:], " "))
		return exitUsage
	case "--version":
		return runVersion(ctx, nil, stdout, stderr)
	}
	if c, ok := lookup(args[0]); ok {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "streamrun: unknown command %q\nRun 'streamrun --help' for the commands.\n", args[0])
	return exitUsage
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: streamrun <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'streamrun help <command>' or 'streamrun <command> --help' for a command's flags.\n"+
		"Exit status: 0 done, 1 failed, 2 bad usage.\n")
}
