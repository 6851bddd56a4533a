package telemetry_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"testing"

	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// A message produced with a trace context goes through a pipeline with a
// plugin: the receiver gets, in that message's trace, the producer's
// "send", the host's "process" (linked to the message), the plugin's
// "handle" with the handler's own span under it, and the output's "send";
// and the output carries a traceparent of that trace. Over OTLP gRPC and
// HTTP; the plugin exports its own spans with the settings the host hands
// down.
func TestTraceThroughPipeline(t *testing.T) {
	for _, protocol := range []string{telemetry.ProtocolGRPC, telemetry.ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) { testTraceThroughPipeline(t, protocol) })
	}
}

func testTraceThroughPipeline(t *testing.T, protocol string) {
	ctx := testContext(t)
	rcv := otlptest.Start(t, protocol)
	cfg, err := telemetry.FromEnv(telemetry.Config{Endpoint: rcv.URL, Protocol: protocol, ServiceName: "trace-test"},
		func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{})
	if err != nil || tp == nil {
		t.Fatalf("NewTracing: %v, %v", tp, err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	p := pipelines.Pipeline{
		Name:    "upper",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "upper-sub", InitialPosition: pipelines.Earliest},
		Handler: selfHandler(out),
		Outputs: []string{out},
	}
	h := runHost(t, c, streamrun.Options{TracerProvider: tp, PluginEnv: cfg.Environ()}, p)
	waitReady(t, ctx, h)

	// Upstream of the producer, a context as another service would pass
	// it on (an HTTP request's traceparent, say).
	upstream := msgtrace.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=1")
	if !upstream.IsValid() {
		t.Fatal("upstream context does not parse")
	}
	traceID := upstream.TraceID().String()
	cl := client(t, c)
	span, props := msgtrace.StartSend(trace.ContextWithRemoteSpanContext(ctx, upstream), tp.Tracer("producer"), in, nil)
	if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte("hello"), Properties: props}); err != nil {
		t.Fatal(err)
	}
	span.End()
	outCtx := receiveTracedOutput(ctx, t, cl, out, traceID)

	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	sendIn, process, handle, user, sendOut := msgtrace.SendName(in), msgtrace.ProcessName(in), "handle upper", "uppercase", msgtrace.SendName(out)
	got, err := rcv.WaitFor(ctx, traceID, sendIn, process, handle, user, sendOut)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range got {
		t.Logf("%s: %v", name, s)
	}
	checkSpanTree(t, got, upstream, []spanWant{
		{sendIn, tracepb.Span_SPAN_KIND_PRODUCER, ""},
		{process, tracepb.Span_SPAN_KIND_CONSUMER, sendIn},
		{handle, tracepb.Span_SPAN_KIND_INTERNAL, process},
		{user, tracepb.Span_SPAN_KIND_INTERNAL, handle},
		{sendOut, tracepb.Span_SPAN_KIND_PRODUCER, handle},
	})
	// The plugin's spans come from the plugin process, exported with the
	// settings the host passed down.
	if got[handle].Service != "trace-test" || got[user].Service != "trace-test" {
		t.Errorf("plugin spans' service.name: %q, %q", got[handle].Service, got[user].Service)
	}
	// The output's traceparent is its send span's.
	if outCtx.SpanID().String() != hex.EncodeToString(got[sendOut].SpanId) {
		t.Errorf("output's span %s, its send span %x", outCtx.SpanID(), got[sendOut].SpanId)
	}
	checkProcessSpan(t, got[process], got[sendIn], in, traceID)
	checkSendSpans(t, got, sendIn, sendOut, out)
	if g := got[handle].Attr("streamrun.pipeline"); g != "upper" {
		t.Errorf("handle span: streamrun.pipeline %q", g)
	}
}

// receiveTracedOutput receives the pipeline's output from topic out: the
// message upper-cased, carrying a traceparent of trace traceID, whose
// context it returns.
func receiveTracedOutput(ctx context.Context, t *testing.T, cl *pool.Client, out, traceID string) trace.SpanContext {
	cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{out}, Subscription: "check",
		InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	m, err := cons.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Payload, []byte("HELLO")) {
		t.Fatalf("output %q", m.Payload)
	}
	outCtx := msgtrace.Extract(m.Properties)
	if outCtx.TraceID().String() != traceID {
		t.Fatalf("output's traceparent %q is not of trace %s", m.Properties[msgtrace.PropertyTraceParent], traceID)
	}
	return outCtx
}

// spanWant is a span's expected kind and parent ("": the upstream
// context).
type spanWant struct {
	name   string
	kind   tracepb.Span_SpanKind
	parent string
}

// checkSpanTree checks each wanted span's kind and parent.
func checkSpanTree(t *testing.T, got map[string]otlptest.Span, upstream trace.SpanContext, want []spanWant) {
	for _, w := range want {
		s := got[w.name]
		if s.Kind != w.kind {
			t.Errorf("%s: kind %v, want %v", w.name, s.Kind, w.kind)
		}
		parent := upstream.SpanID().String()
		if w.parent != "" {
			parent = hex.EncodeToString(got[w.parent].SpanId)
		}
		if hex.EncodeToString(s.ParentSpanId) != parent {
			t.Errorf("%s: parent %x, want %s (%s)", w.name, s.ParentSpanId, parent, w.parent)
		}
	}
}

// checkProcessSpan checks the host's process span: its messaging and
// streamrun attributes, and one link to the message's send span with
// the message's id.
func checkProcessSpan(t *testing.T, ps, sendIn otlptest.Span, in, traceID string) {
	for k, v := range map[string]string{
		"messaging.system":              "pulsar",
		"messaging.operation.type":      "process",
		"messaging.destination.name":    in,
		"messaging.consumer.group.name": "upper-sub",
		"messaging.batch.message_count": "1",
		"streamrun.pipeline":            "upper",
		"streamrun.handler.instance":    "0",
	} {
		if g := ps.Attr(k); g != v {
			t.Errorf("process span: %s = %q, want %q", k, g, v)
		}
	}
	if len(ps.Links) != 1 || hex.EncodeToString(ps.Links[0].SpanId) != hex.EncodeToString(sendIn.SpanId) ||
		hex.EncodeToString(ps.Links[0].TraceId) != traceID {
		t.Errorf("process span's links %v, want the message's send span", ps.Links)
	} else if id := otlptest.AttrOf(ps.Links[0].Attributes, "messaging.message.id"); id == "" {
		t.Errorf("process span's link has no messaging.message.id")
	}
}

// checkSendSpans checks both send spans are Pulsar sends, and the
// output's names its topic and the message's id.
func checkSendSpans(t *testing.T, got map[string]otlptest.Span, sendIn, sendOut, out string) {
	for _, name := range []string{sendIn, sendOut} {
		s := got[name]
		if s.Attr("messaging.system") != "pulsar" || s.Attr("messaging.operation.type") != "send" {
			t.Errorf("%s: attributes %v", name, s.Attributes)
		}
	}
	if d := got[sendOut].Attr("messaging.destination.name"); d != out {
		t.Errorf("output send span: destination %q", d)
	}
	if id := got[sendOut].Attr("messaging.message.id"); id == "" {
		t.Errorf("output send span has no messaging.message.id")
	}
}
