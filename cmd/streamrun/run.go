package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/runtime"
)

// runConfig is what `streamrun run`'s flags say: most of it goes
// straight into the fields of streamrun.Options (o) that document it;
// the rest is the command's own or becomes an option once checked.
type runConfig struct {
	o streamrun.Options

	// The embedded broker's addresses: into o.Broker only when given,
	// so that a default that is taken falls back to free ports.
	listen, httpAddr string

	logs     logFlags
	logLevel string

	// input is a file (or "-": stdin) whose lines are published to
	// inputTopic (o.Input); keySep splits a key off each line.
	input, inputTopic, keySep string
	// print writes the messages reaching the final output topics to
	// stdout (o.FinalOutputs).
	print bool
	// telemetryAddr is o.TelemetryAddr.
	telemetryAddr string
	// controlAddr is where the control API and console are served ("":
	// the files' control.http, else not served); controlReadOnly refuses
	// changes through it.
	controlAddr     string
	controlReadOnly bool
}

// defaultStatusInterval is how often the status lines come on a terminal.
const defaultStatusInterval = 10 * time.Second

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("run", stdout, stderr)
	var c runConfig
	fs := newRunFlags(&c)
	if code, done := cmd.parse(fs, args, helpText("run")); done {
		return code
	}
	c.o.Files = fs.Args()
	switch {
	case len(c.o.Files) == 0:
		return cmd.fail(usagef("no pipeline file given"))
	case c.o.Broker.Memory && c.o.Broker.DataDir != "":
		return cmd.fail(usagef("--memory and --data exclude each other"))
	case c.o.StatusInterval < 0:
		return cmd.fail(usagef("--status-interval must not be negative"))
	case c.o.ShutdownTimeout <= 0:
		return cmd.fail(usagef("--shutdown-timeout must be positive"))
	case c.o.UntilDrained && c.input == "":
		return cmd.fail(usagef("--until-drained needs --input: it stops once that input is processed"))
	case c.inputTopic != "" && c.input == "":
		return cmd.fail(usagef("--input-topic needs --input"))
	}
	if !fs.Changed("status-interval") && !isTerminal(stderr) {
		c.o.StatusInterval = 0
	}
	if !fs.Changed("print") {
		c.print = c.o.UntilDrained
	}
	if fs.Changed("broker-listen") {
		c.o.Broker.Listen = c.listen
	}
	if fs.Changed("broker-http") {
		c.o.Broker.HTTP = c.httpAddr
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return cmd.fail(usagef("--log-level %q: want debug, info, warn or error", c.logLevel))
	}
	if c.logs.verbose && !fs.Changed("log-level") {
		level = slog.LevelDebug
	}
	log, err := c.logs.logger(stderr, level)
	if err != nil {
		return cmd.fail(err)
	}
	return runFiles(ctx, c, cmd, log, stdout, stderr)
}

// newRunFlags is `streamrun run`'s flag set, writing into c.
func newRunFlags(c *runConfig) *pflag.FlagSet {
	fs := pflag.NewFlagSet("streamrun run", pflag.ContinueOnError)
	fs.BoolVar(&c.o.Broker.Memory, "memory", false, "embedded broker: keep everything in memory (nothing survives the run)")
	fs.StringVar(&c.o.Broker.DataDir, "data", "", "embedded broker: data directory (default "+streamrun.DefaultDataDir+"); when given, keyed state's spill files go under it, in "+streamrun.StateSpillDir+", whichever broker runs (else the system's temporary directory)")
	fs.StringVar(&c.o.ServiceURL, "url", "", "service URL of the cluster, instead of the files' service_url (their TLS, auth and retry settings still apply)")
	fs.StringVar(&c.listen, "broker-listen", streamrun.DefaultBrokerListen, "embedded broker: address of its Pulsar port (a free port when the default one is taken; port 0: always a free one)")
	fs.StringVar(&c.httpAddr, "broker-http", streamrun.DefaultBrokerHTTP, `embedded broker: address of its admin API (a free port when the default one is taken; "-": off)`)
	c.logs.register(fs, "log at debug level (as --log-level debug)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.o.StatusInterval, "status-interval", defaultStatusInterval, "log a status line per pipeline this often (0: never; unset: only when stderr is a terminal)")
	fs.DurationVar(&c.o.ShutdownTimeout, "shutdown-timeout", runtime.DefaultShutdownTimeout, "on SIGINT or SIGTERM, finish the work in hand within this; what is left goes back to the broker unacknowledged")
	fs.StringVar(&c.o.HandlerCache, "handler-cache", "", "where handlers given as a Go package are built and cached (default "+runtime.DefaultHandlerCacheDir()+")")
	fs.StringVar(&c.input, "input", "", `publish each line of this file ("-": stdin) to --input-topic once the pipelines run`)
	fs.StringVar(&c.inputTopic, "input-topic", "", "topic --input goes to (default: the source topic of the first pipeline)")
	fs.StringVar(&c.keySep, "input-key-separator", "", `split each input line at the first of these: key, then payload (default "": no key)`)
	fs.BoolVar(&c.o.UntilDrained, "until-drained", false, "with --input: stop once every line is processed and every output has its receipt")
	fs.StringVar(&c.controlAddr, "control", "", `serve the control API and web console here (":9470" is loopback; default: the files' control.http, else off)`)
	fs.BoolVar(&c.controlReadOnly, "control-read-only", false, "refuse changes through the control API (reload, pause, resume)")
	fs.StringVar(&c.telemetryAddr, "telemetry-addr", "", `serve /metrics, /healthz and /readyz here (":9464" is loopback; default: the files' telemetry.http, else off)`)
	fs.BoolVar(&c.print, "print", false, "print the messages that reach the pipelines' final outputs to stdout (default: on with --until-drained)")
	fs.BoolVar(&c.o.Watch, "watch", false, "re-read the files when they change, or a handler's binary or Go package source does (as SIGHUP does)")
	fs.DurationVar(&c.o.WatchInterval, "watch-interval", streamrun.DefaultWatchInterval, "how often --watch looks for changes")
	return fs
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
