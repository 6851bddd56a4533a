package telemetry

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// A collector that is away costs one WARN on the program's own log, then
// at most one each ReportEvery saying how many exports failed since, an
// INFO once it is back, and a last WARN at exit for what was not reported
// yet; nothing reaches OpenTelemetry's global error handler, which would
// print a plain line per failure whatever the program's log format.
func TestFailedExportsAreReportedOnceThenAtMostEveryInterval(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var global atomic.Int64
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) { global.Add(1) }))
	defer otel.SetErrorHandler(prev)

	var recs testkit.Records
	url := otlptest.Unreachable(t)
	tr, err := NewTracing(ctx, Config{Endpoint: url, Protocol: ProtocolHTTP, Timeout: 100 * time.Millisecond},
		TracingOptions{Logger: slog.New(recs.Handler(nil)), ReportEvery: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64 // minutes after the start, as the report sees time
	start := time.Now()
	tr.exp.report.mu.Lock()
	tr.exp.report.now = func() time.Time { return start.Add(time.Duration(clock.Load()) * time.Minute) }
	tr.exp.report.mu.Unlock()
	export := func() {
		t.Helper()
		_, span := tr.Tracer("test").Start(ctx, "work")
		span.End()
		if err := tr.ForceFlush(ctx); err != nil {
			t.Fatalf("ForceFlush: %v", err)
		}
	}
	warns := func() int { return recs.Count("traces not exported") }

	export()
	if warns() != 1 {
		t.Fatalf("after a failed export, want 1 WARN; have:\n%s", &recs)
	}
	first, _ := recs.Find(func(r testkit.Record) bool { return r.Msg == "traces not exported" })
	if first.Level != slog.LevelWarn || first.Attrs["endpoint"] != url || first.Attrs["spans_lost"] != "1" ||
		!strings.Contains(first.Attrs["error"], "connection refused") {
		t.Errorf("first report: %v %s", first.Level, first)
	}
	export()
	export()
	if warns() != 1 {
		t.Fatalf("two more failures within the minute: want still 1 WARN; have:\n%s", &recs)
	}
	clock.Store(1)
	export()
	if warns() != 2 || recs.Count("traces not exported", "failed_exports=3", "spans_lost=3") != 1 {
		t.Fatalf("a minute later: want a second WARN counting the 3 failures since the first; have:\n%s", &recs)
	}

	// The collector comes back: one INFO.
	otlptest.StartAt(t, ProtocolHTTP, url)
	clock.Store(2)
	export()
	if recs.Count("traces exported again") != 1 {
		t.Fatalf("want an INFO once exports work again; have:\n%s", &recs)
	}
	export()
	if recs.Count("traces exported again") != 1 || warns() != 2 {
		t.Fatalf("exports that keep working say nothing more; have:\n%s", &recs)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := global.Load(); n != 0 {
		t.Errorf("the global error handler was called %d times", n)
	}
}

// At exit, failures not reported yet are: the last WARN says what was
// lost since the one before.
func TestFailuresNotReportedYetAreReportedAtExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs testkit.Records
	tr, err := NewTracing(ctx, Config{Endpoint: otlptest.Unreachable(t), Protocol: ProtocolHTTP, Timeout: 100 * time.Millisecond},
		TracingOptions{Logger: slog.New(recs.Handler(nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, span := tr.Tracer("test").Start(ctx, "work")
		span.End()
		_ = tr.ForceFlush(ctx)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if recs.Count("traces not exported") != 2 || recs.Count("traces not exported", "spans_lost=1") != 2 {
		t.Fatalf("want the first failure and, at exit, the second; have:\n%s", &recs)
	}
}

// The flush at exit ends at its bound when the collector does not answer,
// however long the exporter would go on trying (10 s by default), and the
// WARN says so; the exporter's goroutines are gone when Shutdown returns
// (TestMain checks for leaks). Over gRPC, a refused connection is tried
// again until the export's deadline; over HTTP it fails at once (the
// command ends at once too), so a collector that takes the connection and
// never answers stands for the slow case there.
func TestFlushAtExitIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, protocol string
		url            func(testing.TB) string
	}{
		{"grpc/refused", ProtocolGRPC, otlptest.Unreachable},
		{"grpc/silent", ProtocolGRPC, otlptest.Silent},
		{"http/silent", ProtocolHTTP, otlptest.Silent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var recs testkit.Records
			tr, err := NewTracing(ctx, Config{Endpoint: tc.url(t), Protocol: tc.protocol},
				TracingOptions{Logger: slog.New(recs.Handler(nil))})
			if err != nil {
				t.Fatal(err)
			}
			if tr.FlushTimeout() != DefaultFlushTimeout {
				t.Fatalf("FlushTimeout %s, want the default %s", tr.FlushTimeout(), DefaultFlushTimeout)
			}
			_, span := tr.Tracer("test").Start(ctx, "work")
			span.End()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if recs.Count("traces not exported", "not done within 2s at exit", "spans_lost=1") != 1 {
				t.Fatalf("want one WARN saying the flush at exit stopped at 2s; have:\n%s", &recs)
			}
		})
	}
}
