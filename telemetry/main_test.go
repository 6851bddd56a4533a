package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// The test binary is also the handler plugin of its pipelines when
// roleEnv says so.
const roleEnv = "STREAMRUN_TELEMETRY_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "handler" {
		plugin.Serve(plugin.Configure(newTestHandler))
		return
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

type testConfig struct {
	Output string `json:"output"`
	// Plain: outputs each payload as it is, with no span of its own (the
	// benchmark's handler).
	Plain bool `json:"plain"`
}

// newTestHandler uppercases each payload to Output, under a span of its
// own made with OpenTelemetry's global API (as a handler author would),
// except: "poison" is dead-lettered, "retry" retried, and "crash" panics.
func newTestHandler(_ context.Context, cfg testConfig) (plugin.Handler, error) {
	if cfg.Plain {
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			return []plugin.Output{{Topic: cfg.Output, Payload: m.Payload}}, nil
		}), nil
	}
	return plugin.MessageFunc(func(ctx context.Context, m *plugin.Message) ([]plugin.Output, error) {
		_, span := otel.Tracer("telemetry-test").Start(ctx, "uppercase")
		defer span.End()
		switch string(m.Payload) {
		case "poison":
			return nil, plugin.DeadLetter(errors.New("poison"))
		case "retry":
			return nil, errors.New("try again")
		case "crash":
			panic("crash on purpose")
		}
		return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: bytes.ToUpper(m.Payload)}}, nil
	}), nil
}

// selfHandler is the handler of a pipeline whose plugin is this binary.
func selfHandler(output string) pipelines.Handler {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return pipelines.Handler{Plugin: exe, Env: map[string]string{roleEnv: "handler"},
		Config: map[string]any{"output": output}}
}

const testTimeout = 90 * time.Second

func testContext(t testing.TB) context.Context { return brokertest.Context(t, testTimeout) }

func cluster(t testing.TB) *broker.Cluster {
	return brokertest.Start(t, func(o *broker.Options) { o.Logger = testLogger(t, slog.LevelWarn) })
}

func topic(t testing.TB, what string) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("persistent://public/default/%s-%s", name, what)
}

func client(t testing.TB, c *broker.Cluster) *pool.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := pool.New(ctx, pool.Options{ServiceURL: c.ServiceURL()})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.Close(ctx)
	})
	return cl
}

// runHost runs ps on a host with opts until cleanup, failing t if Run
// fails.
func runHost(t testing.TB, c *broker.Cluster, opts streamrun.Options, ps ...pipelines.Pipeline) *streamrun.Host {
	t.Helper()
	opts.Pool.ServiceURL = c.ServiceURL()
	if opts.Logger == nil {
		opts.Logger = testLogger(t, slog.LevelWarn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := streamrun.New(ctx, opts)
	if err != nil {
		t.Fatalf("runtime.New: %v", err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(rctx, ps...) }()
	t.Cleanup(func() {
		rcancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// waitReady waits until every pipeline of h is healthy.
func waitReady(t testing.TB, ctx context.Context, h *streamrun.Host) {
	t.Helper()
	for {
		if h.Ready() == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not ready: %v", h.Ready())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// testLogger logs at level and above into a log kept with the test and
// shown if it fails (brokertest.LogWriter); writing after the test ended
// is harmless.
func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(brokertest.LogWriter(t, "log"), &slog.HandlerOptions{Level: level}))
}
