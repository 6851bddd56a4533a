package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/runtime"
)

// runConfig is what `streamrun run`'s flags say.
type runConfig struct {
	files []string

	// The embedded broker, when no file names a service URL.
	memory   bool
	dataDir  string
	listen   string
	httpAddr string

	logFormat string
	logLevel  string
	// status is how often a status line per pipeline is logged; 0: never.
	status time.Duration

	shutdownTimeout time.Duration
	handlerCache    string

	// input is a file (or "-": stdin) whose lines are published to
	// inputTopic; keySep splits a key off each line.
	input      string
	inputTopic string
	keySep     string
	// untilDrained stops the run once every input line is processed and
	// every output has its receipt.
	untilDrained bool
	// print writes the messages reaching the final output topics to
	// stdout.
	print bool

	// reload: SIGHUP and --watch (reload.go).
	reload reloadConfig
}

// defaultRunDataDir is where the embedded broker of `streamrun run` keeps
// its data unless --memory or --data says otherwise.
const defaultRunDataDir = ".streamrun/data"

// defaultStatusInterval is how often the status lines come on a terminal.
const defaultStatusInterval = 10 * time.Second

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c runConfig
	fs := newRunFlags(&c)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: streamrun run [flags] FILE...

Runs the pipelines of the files until SIGINT or SIGTERM, then drains: the
batches in hand are finished, their outputs published and their inputs
acknowledged within --shutdown-timeout; what is left goes back to the broker.
Pipeline names must be unique across the files, and files that name a
service URL must name the same one.

On SIGHUP (and with --watch, when a file, a handler binary or a Go
package handler's source changes) the files are read again and applied
without a restart: unchanged pipelines go on untouched, changed ones are
changed in place (a new handler rolled out one instance at a time),
removed ones drain and stop, new ones start; the broker connections stay.
A file that does not load is refused, its errors logged, and the run goes
on unchanged (docs/reload.md).

Without a service_url in the files, the embedded broker starts in this
process (data in %s unless --memory or --data), and one line
on stdout gives its service and admin URLs.

Exit status: 0 stopped cleanly, 1 a runtime failure, 2 bad usage or a bad
file (nothing started).

Flags:
`, defaultRunDataDir)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "streamrun run: %v\n", err)
		fs.Usage()
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamrun run: "+format+"\n", a...)
		return 2
	}
	c.files = fs.Args()
	switch {
	case len(c.files) == 0:
		fs.Usage()
		return bad("no pipeline file given")
	case c.memory && c.dataDir != "":
		return bad("--memory and --data exclude each other")
	case c.status < 0:
		return bad("--status-interval must not be negative")
	case c.shutdownTimeout <= 0:
		return bad("--shutdown-timeout must be positive")
	case c.untilDrained && c.input == "":
		return bad("--until-drained needs --input: it stops once that input is processed")
	case c.inputTopic != "" && c.input == "":
		return bad("--input-topic needs --input")
	}
	if !fs.Changed("status-interval") && !isTerminal(stderr) {
		c.status = 0
	}
	if !fs.Changed("print") {
		c.print = c.untilDrained
	}
	if !c.memory && c.dataDir == "" {
		c.dataDir = defaultRunDataDir
	}
	log, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return bad("%v", err)
	}
	r := &runner{cfg: c, log: log, stdout: stdout, stderr: stderr, lookupEnv: os.LookupEnv}
	return r.run(ctx)
}

// newRunFlags is `streamrun run`'s flag set, writing into c.
func newRunFlags(c *runConfig) *pflag.FlagSet {
	fs := pflag.NewFlagSet("streamrun run", pflag.ContinueOnError)
	fs.BoolVar(&c.memory, "memory", false, "embedded broker: keep everything in memory (nothing survives the run)")
	fs.StringVar(&c.dataDir, "data", "", "embedded broker: data directory (default "+defaultRunDataDir+")")
	fs.StringVar(&c.listen, "broker-listen", "127.0.0.1:0", "embedded broker: address of its Pulsar port (port 0: a free one)")
	fs.StringVar(&c.httpAddr, "broker-http", "127.0.0.1:0", `embedded broker: address of its admin API ("-": off)`)
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.status, "status-interval", defaultStatusInterval, "log a status line per pipeline this often (0: never; default: on when stderr is a terminal)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", runtime.DefaultShutdownTimeout, "on SIGINT or SIGTERM, finish the work in hand within this; what is left goes back to the broker unacknowledged")
	fs.StringVar(&c.handlerCache, "handler-cache", "", "where handlers given as a Go package are built and cached (default "+runtime.DefaultHandlerCacheDir()+")")
	fs.StringVar(&c.input, "input", "", `publish each line of this file ("-": stdin) to --input-topic once the pipelines run`)
	fs.StringVar(&c.inputTopic, "input-topic", "", "topic --input goes to (default: the source topic of the first pipeline)")
	fs.StringVar(&c.keySep, "input-key-separator", "", `split each input line at the first of these: key, then payload (default "": no key)`)
	fs.BoolVar(&c.untilDrained, "until-drained", false, "with --input: stop once every line is processed and every output has its receipt")
	fs.BoolVar(&c.print, "print", false, "print the messages that reach the pipelines' final outputs to stdout (default: on with --until-drained)")
	addReloadFlags(fs, &c.reload)
	return fs
}

// newLogger is the slog logger --log-format and --log-level ask for.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
