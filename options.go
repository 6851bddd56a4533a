package streamrun

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// Options configure a run. Files (or Pipelines) is required; every other
// field has the default its comment states, which is what `streamrun
// run` does without flags.
type Options struct {
	// Files are the pipeline files to run, read with Load: pipeline names
	// unique across them, the same connection settings in every file that
	// sets them. They are read again at every reload.
	Files []string
	// Pipelines are pipeline files made in Go, run beside Files with the
	// same checks (pipelines.File.Validate, not the checks on disk).
	// Default none.
	Pipelines []pipelines.File
	// LookupEnv supplies ${VAR} in the files and the OTEL_* settings of
	// traces. Default os.LookupEnv.
	LookupEnv func(string) (string, bool)

	// ServiceURL replaces the files' service URL (their TLS, auth and
	// retry settings still apply). Default "": the files', and when they
	// name none the embedded broker started in this process.
	ServiceURL string
	// Client is the connection pool to run on instead of one made from
	// the files' connection settings (which, and ServiceURL and Broker,
	// are then not used). It stays the caller's: the run does not close
	// it. When a pipeline reads KeyShared its producers must batch by key
	// (pool.BatchingOptions.ByKey): Start refuses one that does not.
	// Default nil: the run makes its own.
	Client *pool.Client
	// Broker configures that embedded broker.
	Broker BrokerOptions
	// Notices receives the one-line notices meant for the person who
	// started the run: the embedded broker's service and admin URLs.
	// Default nil: they are logged at info level.
	Notices io.Writer

	// Logger receives the run's logs, tagged component=runtime, pool,
	// broker, telemetry. Default slog.Default().
	Logger *slog.Logger
	// ShutdownTimeout bounds the graceful stop (runtime.Options).
	// Default runtime.DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// HandlerCache is where handlers given as a Go package are built and
	// cached. Default runtime.DefaultHandlerCacheDir().
	HandlerCache string
	// TelemetryAddr is where /metrics, /healthz and /readyz are served
	// (":9464" is loopback), from before the run connects: /readyz is 503
	// until every pipeline consumes, and while the broker cannot be
	// reached (unless Client is given, whose retries the run does not
	// see). Default "": the files' telemetry.http, else not served.
	TelemetryAddr string
	// StatusInterval is how often a status line per pipeline is logged
	// (one saying the run starts, before the pipelines run); the lines
	// are warnings saying so while the broker cannot be reached. Default
	// 0: never.
	StatusInterval time.Duration
	// LocalHandlers run handlers in this process instead of their
	// plugins, by pipeline name, as runtime.Options.LocalHandlers: for
	// tests and for measuring what the process boundary costs. Default
	// none.
	LocalHandlers map[string]func() plugin.Handler
	// Hooks are told what the host does, as runtime.Options.Hooks.
	// Default none.
	Hooks runtime.Hooks
	// Intercept stands in for every call of a batch to a handler
	// instance, as runtime.Options.Intercept: for tests that crash, hang
	// or garble a handler (`streamrun test`). Default nil.
	Intercept runtime.Interceptor

	// Input is published once every pipeline runs. Default nil: none.
	Input *Input
	// UntilDrained ends the run once Input is published and processed:
	// every pipeline has settled what was published to its topics during
	// the run, every output has its receipt, and FinalOutputs, if set,
	// has been called for every final output. Only with Input. Default
	// false: the run goes on until ctx ends or Stop.
	UntilDrained bool
	// FinalOutputs is called, one message at a time, for each message
	// that reaches the run's final outputs (declared outputs no pipeline
	// of the run reads), read through a subscription of the run's own
	// made before the first input and removed at the end; the message is
	// acknowledged when it returns. Default nil: not read.
	FinalOutputs func(topic string, m *subscribe.Message)

	// ReloadOnSIGHUP reloads the files on SIGHUP (and keeps SIGHUP from
	// ending the process while the run lasts). Default false.
	ReloadOnSIGHUP bool
	// Watch reloads the files when they, or a handler's binary or Go
	// package source, change; WatchInterval is how often it looks.
	// Default false, and DefaultWatchInterval.
	Watch         bool
	WatchInterval time.Duration
}

// DefaultWatchInterval is Options.WatchInterval's default.
const DefaultWatchInterval = time.Second

func (o Options) withDefaults() Options {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = runtime.DefaultShutdownTimeout
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = DefaultWatchInterval
	}
	return o
}

// check reports what is wrong with the options themselves.
func (o *Options) check() error {
	switch {
	case len(o.Files) == 0 && len(o.Pipelines) == 0:
		return &OptionError{"Files", fmt.Errorf("no pipeline file given")}
	case o.Broker.Memory && o.Broker.DataDir != "":
		return &OptionError{"Broker.Memory", fmt.Errorf("excludes DataDir: a broker in memory keeps nothing on disk")}
	case o.UntilDrained && o.Input == nil:
		return &OptionError{"UntilDrained", fmt.Errorf("needs Input: it stops once that input is processed")}
	case o.StatusInterval < 0:
		return &OptionError{"StatusInterval", fmt.Errorf("must not be negative")}
	}
	return nil
}

// An OptionError is a bad option, found before anything started.
type OptionError struct {
	// Field names the option, as "Input.Topic".
	Field string
	Err   error
}

func (e *OptionError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// A FilesError is what is wrong with the files, found before anything
// started: each problem on a line of its own, FILE:LINE:COL: field: what
// is wrong where the loader knows the place.
type FilesError struct{ Err error }

func (e *FilesError) Error() string { return e.Err.Error() }
func (e *FilesError) Unwrap() error { return e.Err }
