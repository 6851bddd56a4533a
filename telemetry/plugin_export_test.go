package telemetry_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// A plugin whose exports fail says so as the host does: a WARN record,
// which the host logs again at WARN tagged with the plugin, not a plain
// stderr line from OpenTelemetry's global error handler, which the host
// would log at INFO.
func TestAPluginsFailedExportsReachTheHostAsWarnings(t *testing.T) {
	ctx := testContext(t)
	var recs testkit.Records
	log := slog.New(recs.Handler(slog.NewTextHandler(brokertest.LogWriter(t, "log"), nil)))
	cfg := telemetry.Config{Endpoint: otlptest.Unreachable(t), Sampler: "always_on", Timeout: 200 * time.Millisecond}
	tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	h, err := streamrun.New(ctx, streamrun.Options{Pool: pool.Options{ServiceURL: c.ServiceURL()}, Logger: log,
		TracerProvider: tp, PluginEnv: cfg.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- h.Run(rctx, pipelines.Pipeline{
			Name:    "away",
			Source:  pipelines.Source{Topics: []string{in}, Subscription: "away-sub", InitialPosition: pipelines.Earliest},
			Handler: selfHandler(out),
			Outputs: []string{out},
		})
	}()
	cl := client(t, c)
	cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{out}, Subscription: "check",
		InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	// Stopping the host closes the plugin, whose flush at exit fails.
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec := recs.Wait(t, 10*time.Second, "traces not exported", map[string]string{"pipeline": "away"})
	if rec.Level != slog.LevelWarn || rec.Attrs["plugin"] == "" || !strings.Contains(rec.Attrs["error"], "connection refused") {
		t.Errorf("the plugin's report: %v %s", rec.Level, rec)
	}
	t.Logf("%v %s", rec.Level, rec)
	if n := recs.Count("traces export:", "stream=stderr"); n != 0 {
		t.Errorf("%d plain stderr lines about exports; have:\n%s", n, &recs)
	}
	if _, ok := recs.Find(func(r testkit.Record) bool {
		return r.Level < slog.LevelWarn && strings.Contains(r.String(), "traces export")
	}); ok {
		t.Errorf("an export failure below WARN; have:\n%s", &recs)
	}
}
