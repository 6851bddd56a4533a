package telemetry_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// tracedHost runs p on a host that exports to a gRPC receiver, always
// sampling.
func tracedHost(t *testing.T, opts streamrun.Options, p pipelines.Pipeline) (*otlptest.Receiver, *broker.Cluster, func()) {
	t.Helper()
	ctx := testContext(t)
	rcv := otlptest.Start(t, telemetry.ProtocolGRPC)
	cfg := telemetry.Config{Endpoint: rcv.URL, Sampler: "always_on"}
	tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts.TracerProvider, opts.PluginEnv = tp, cfg.Environ()
	c := cluster(t)
	h := runHost(t, c, opts, p)
	waitReady(t, ctx, h)
	flush := func() {
		if err := tp.ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return rcv, c, flush
}

// hasEvent returns the span's first event called name whose attributes
// include want ("key=value" pairs), nil when there is none.
func hasEvent(s otlptest.Span, name string, want ...string) *tracepb.Span_Event {
	for _, e := range s.Events {
		if e.Name != name {
			continue
		}
		ok := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && otlptest.AttrOf(e.Attributes, k) == v
		}
		if ok {
			return e
		}
	}
	return nil
}

// A message whose traceparent another client wrote (the W3C property, as
// pulsar-client-go with OpenTelemetry's propagator or the Java client's
// OpenTelemetry interceptor writes it) is processed in that trace; a
// dead letter's "send" nests under the "process" span that has the event
// saying why; a retry is an event on its "process" span.
func TestTraceEvents(t *testing.T) {
	ctx := testContext(t)
	p := pipelines.Pipeline{
		Name:   "events",
		Source: pipelines.Source{Topics: nil, Subscription: "events-sub", InitialPosition: pipelines.Earliest},
		ErrorPolicy: pipelines.ErrorPolicy{MaxRetries: 1,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond}},
	}
	in, out := topic(t, "in"), topic(t, "out")
	p.Source.Topics, p.Handler, p.Outputs = []string{in}, selfHandler(out), []string{out}
	p.Handler.BatchSize = 1 // a process span per message, in its trace
	p.ErrorPolicy.MaxCrashes = 1
	rcv, c, flush := tracedHost(t, streamrun.Options{}, p)

	// Written by hand as the other clients write it: no send span of ours.
	const (
		poisonTrace = "0af7651916cd43dd8448eb211c80319c"
		retryTrace  = "1af7651916cd43dd8448eb211c80319c"
		crashTrace  = "2af7651916cd43dd8448eb211c80319c"
		parentSpan  = "b7ad6b7169203331"
	)
	cl := client(t, c)
	for _, m := range []struct{ payload, trace string }{{"poison", poisonTrace}, {"retry", retryTrace}, {"crash", crashTrace}} {
		props := map[string]string{msgtrace.PropertyTraceParent: "00-" + m.trace + "-" + parentSpan + "-01",
			msgtrace.PropertyTraceState: "rojo=00f067aa0ba902b7"}
		if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte(m.payload), Properties: props}); err != nil {
			t.Fatal(err)
		}
	}
	dlq := in + "-events-sub-DLQ"
	checkPoisonTrace(t, waitForTrace(ctx, t, rcv, flush, poisonTrace, msgtrace.ProcessName(in), msgtrace.SendName(dlq), "handle events"),
		msgtrace.ProcessName(in), msgtrace.SendName(dlq), parentSpan)
	waitForRetryEvents(ctx, t, rcv, flush, retryTrace, msgtrace.ProcessName(in))

	// The crash: an event and the error on its process span, which
	// dead-letters it (MaxCrashes 1).
	got := waitForTrace(ctx, t, rcv, flush, crashTrace, msgtrace.ProcessName(in), msgtrace.SendName(dlq))
	ps := got[msgtrace.ProcessName(in)]
	e := hasEvent(ps, msgtrace.EventCrash, "error.type=crash")
	if e == nil || ps.Attr("error.type") != "crash" ||
		ps.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || hasEvent(ps, msgtrace.EventDeadLetter) == nil {
		t.Errorf("crash's process span: status %v, attributes %v, events %v", ps.Status, ps.Attributes, ps.Events)
	}
}

// waitForTrace flushes and waits, 2s at a time until ctx ends, for the
// spans called names in trace.
func waitForTrace(ctx context.Context, t *testing.T, rcv *otlptest.Receiver, flush func(), trace string, names ...string) map[string]otlptest.Span {
	for {
		flush()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		got, err := rcv.WaitFor(wctx, trace, names...)
		cancel()
		if err == nil {
			return got
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
	}
}

// checkPoisonTrace checks the dead-lettered message's trace: its process
// span is the other client's span's child and links to it, has the
// dead-letter event with the reason, and is the parent of the dead
// letter's send span.
func checkPoisonTrace(t *testing.T, got map[string]otlptest.Span, process, sendDLQ, parentSpan string) {
	ps := got[process]
	if hex.EncodeToString(ps.ParentSpanId) != parentSpan {
		t.Errorf("process span's parent %x, want the other client's %s", ps.ParentSpanId, parentSpan)
	}
	if len(ps.Links) != 1 || hex.EncodeToString(ps.Links[0].SpanId) != parentSpan {
		t.Errorf("process span's links %v", ps.Links)
	}
	if e := hasEvent(ps, msgtrace.EventDeadLetter); e == nil || otlptest.AttrOf(e.Attributes, "streamrun.reason") != "poison" {
		t.Errorf("process span has no dead-letter event with the reason: %v", ps.Events)
	}
	if s := got[sendDLQ]; hex.EncodeToString(s.ParentSpanId) != hex.EncodeToString(ps.SpanId) ||
		s.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
		t.Errorf("dead letter's send span %v is not a PRODUCER child of %v", s, ps)
	}
}

// waitForRetryEvents waits until the retried message's process spans in
// trace show the retry event (its first) and the dead letter (its last,
// MaxRetries 1), failing when ctx ends.
func waitForRetryEvents(ctx context.Context, t *testing.T, rcv *otlptest.Receiver, flush func(), trace, process string) {
	for {
		flush()
		var retried, dead bool
		for _, s := range rcv.Spans() {
			if hex.EncodeToString(s.TraceId) == trace && s.Name == process {
				retried = retried || hasEvent(s, msgtrace.EventRetry) != nil
				dead = dead || hasEvent(s, msgtrace.EventDeadLetter) != nil
			}
		}
		if retried && dead {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("retry events never came: retry %v, dead letter %v", retried, dead)
		case <-rcv.Changed():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
