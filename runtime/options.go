package runtime

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// Options configure a Host. The zero value connects to
// pulsar://127.0.0.1:6650 with every default below.
type Options struct {
	// Client is the connection pool the host's consumers and producers
	// use. It stays the caller's: the host flushes it when it stops but
	// does not close it. Default nil: the host opens its own with Pool,
	// and closes it when Run returns (or at Close).
	Client *pool.Client
	// Pool configures the client the host opens when Client is nil
	// (service URL, TLS, token, OperationRetries, producer batching).
	Pool pool.Options

	// Logger receives the host's logs and, tagged plugin=... and
	// instance=..., its plugins'. Default slog.Default().
	Logger *slog.Logger

	// ShutdownTimeout bounds the graceful stop once Run's ctx ends:
	// finishing the batches in flight, publishing their outputs,
	// acknowledging, closing the plugins. What is not done by then is
	// handed back to the broker unacknowledged (it is delivered again).
	// Default 20 s, inside Kubernetes' default grace period of 30 s.
	ShutdownTimeout time.Duration

	// Restart says how plugin processes are restarted after a crash.
	Restart RestartPolicy

	// PluginStartTimeout bounds starting one plugin process (process,
	// handshake, connection). Default 30 s.
	PluginStartTimeout time.Duration

	// LocalHandlers run handlers in the host's process instead of as
	// plugin processes, by pipeline name: the pipeline of that name calls
	// the handler a factory makes for each of its instances (Init and
	// Close too, when it has them) instead of starting its plugin. It is
	// for tests and for measuring what the process boundary costs; a
	// local handler that panics is restarted like a plugin, one that
	// hangs stalls its instance. Default none.
	LocalHandlers map[string]func() plugin.Handler

	// Build says where handlers given as a Go package are built and
	// cached (see BuildHandler). Default: BuildOptions' defaults.
	Build BuildOptions

	// Hooks are told what the host does, for metrics.
	Hooks Hooks

	// StateDir is where keyed state keeps the values its cache leaves out
	// (pipelines.State.CacheBytes), one file a pipeline, removed when the
	// pipeline stops (and, left by a host that died, when the next file
	// is made there). Default: DefaultStateDir().
	StateDir string

	// Intercept, when set, is called in place of every call of a batch to
	// a handler instance, with the call itself as next: it may act on the
	// instance's process before or after the call, or answer in the
	// call's stead. Its answer is the call's: an error is the call's
	// failure (the instance is stopped and the batch retried, as for a
	// crash, a hang past Handler.Timeout or a wrong answer). `streamrun
	// test` crashes, hangs and garbles handlers with it (docs/testing.md).
	// Default nil: the call alone.
	Intercept Interceptor

	// TracerProvider records the host's spans (see docs/telemetry.md):
	// "process" per batch, "send" per output and dead letter, the trace
	// context handed to the plugins. Default nil: no spans, at no cost.
	TracerProvider trace.TracerProvider
	// MeterProvider records the host's metrics (see docs/telemetry.md).
	// Default nil: none, at no cost.
	MeterProvider metric.MeterProvider
	// PluginEnv is added to every plugin's environment ("KEY=value"),
	// before the pipeline's own handler env: the OTEL_* settings that
	// have the plugins export their spans as the host does. Default none.
	PluginEnv []string
}

// RestartPolicy governs restarts of a pipeline's plugin instances. Each
// instance slot restarts on its own.
//
// The backoff is for crash loops: a handler that fails again and again
// without answering a batch in between. One that answers batches between
// its crashes (a panic on one message in thousands, a kill from outside)
// makes progress, and waits only Initial before each restart: a stream
// with a few poison messages in its backlog is not slowed to one message
// per Max. Health reports both kinds (see DegradedAfter).
type RestartPolicy struct {
	// Initial is the wait before restarting a crashed instance; each
	// further crash without a batch answered in between doubles it.
	// Default 100 ms.
	Initial time.Duration
	// Max is the longest wait. Default 30 s.
	Max time.Duration
	// DegradedAfter crashes of an instance within DegradedWindow, or in a
	// row without a batch answered, make its pipeline degraded in Health
	// until that is no longer so. Default 3.
	DegradedAfter int
	// DegradedWindow: see DegradedAfter. Default 1 min.
	DegradedWindow time.Duration
}

// Defaults, as documented on the fields.
const (
	DefaultShutdownTimeout    = 20 * time.Second
	DefaultRestartInitial     = 100 * time.Millisecond
	DefaultRestartMax         = 30 * time.Second
	DefaultDegradedWindow     = time.Minute
	DefaultDegradedAfter      = 3
	DefaultPluginStartTimeout = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	r := &o.Restart
	if r.Initial <= 0 {
		r.Initial = DefaultRestartInitial
	}
	if r.Max <= 0 {
		r.Max = DefaultRestartMax
	}
	if r.Max < r.Initial {
		r.Max = r.Initial
	}
	if r.DegradedWindow <= 0 {
		r.DegradedWindow = DefaultDegradedWindow
	}
	if r.DegradedAfter <= 0 {
		r.DegradedAfter = DefaultDegradedAfter
	}
	if o.PluginStartTimeout <= 0 {
		o.PluginStartTimeout = DefaultPluginStartTimeout
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	return o
}

// DefaultStateDir is Options.StateDir's default: streamrun-state in the
// system's directory for temporary files.
func DefaultStateDir() string { return filepath.Join(os.TempDir(), "streamrun-state") }

// delay is the wait before restart number n in a row (n >= 1).
func (r RestartPolicy) delay(n int) time.Duration {
	d := r.Initial
	for i := 1; i < n && d < r.Max; i++ {
		d *= 2
	}
	return min(d, r.Max)
}

// Outcome is what became of a message, as Hooks.Settled and Stats count
// it.
type Outcome int

const (
	// Acked: acknowledged after its outputs were receipted.
	Acked Outcome = iota + 1
	// Retried: handed back to the broker to be delivered again later.
	Retried
	// DeadLettered: published to the dead-letter topic, then
	// acknowledged.
	DeadLettered
	// Dropped: acknowledged without output, as the handler asked (or a
	// step whose expression failed, where it says drop).
	Dropped
	// Filtered: acknowledged without output, kept out by a filter step.
	Filtered
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case DeadLettered:
		return "dead-lettered"
	case Dropped:
		return "dropped"
	case Filtered:
		return "filtered"
	}
	return "unknown"
}

// An Interceptor stands in for a call of a batch to a handler instance
// (Options.Intercept). next makes the call; ctx carries the batch's
// deadline (Handler.Timeout).
type Interceptor func(ctx context.Context, c Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error)

// Call is a call of a batch to a handler instance, as an Interceptor
// sees it.
type Call struct {
	// Pipeline names the pipeline; Instance is the instance's slot.
	Pipeline string
	Instance int
	// Pid is the instance's plugin process, 0 for a handler in the host's
	// process (Options.LocalHandlers, or a pipeline of steps alone).
	Pid int
	// Messages are the batch's messages as received (their IDs name
	// them); the interceptor must neither change nor keep them.
	Messages []*subscribe.Message
}

// Hooks are called as the host works, for metrics (package runtime keeps
// counters of its own too: see Host.Stats). Each may be nil. They run on
// the host's hot paths, some on connection goroutines, concurrently:
// they must be quick and must not block.
type Hooks struct {
	// Received: n messages were taken from pipeline's subscription.
	Received func(pipeline string, n int)
	// Handled: an instance answered a batch of size messages after took
	// (err == nil), or failed it (crash, hang, wrong answer).
	Handled func(pipeline string, instance, size int, took time.Duration, err error)
	// Settled: a message came to outcome o.
	Settled func(pipeline string, o Outcome)
	// Message: message m came to outcome o, for reason (the handler's,
	// a step's or the host's; "" for an ack): Settled with the message,
	// for a caller that follows messages one by one. m must not be kept.
	Message func(pipeline string, m *subscribe.Message, o Outcome, reason string)
	// BatchDone: every message of a batch of size messages was settled,
	// took after the batch was formed.
	BatchDone func(pipeline string, size int, took time.Duration)
	// Restarted: an instance's plugin was restarted after cause.
	Restarted func(pipeline string, instance int, cause error)
	// Output: an output the handler asked for was published to topic (as
	// the handler named it) and has its receipt (err == nil), or failed.
	// It is called before the input it came from is acknowledged.
	Output func(pipeline, topic string, err error)
}
