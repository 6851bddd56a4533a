package msgtrace_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// StartSend gives a message the context of its trace: a new root's when
// the sampler samples it, none when it does not (and the properties are
// not copied), and an incoming context as it is, sampled or not.
func TestStartSendRootDecision(t *testing.T) {
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	always := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = never.Shutdown(context.Background()); _ = always.Shutdown(context.Background()) })
	props := map[string]string{"k": "v"}

	span, got := msgtrace.StartSend(context.Background(), never.Tracer("t"), "topic", props)
	span.End()
	if _, ok := got[msgtrace.PropertyTraceParent]; ok || len(got) != 1 || got["k"] != "v" {
		t.Errorf("root not sampled: properties %v, want %v", got, props)
	}

	span, got = msgtrace.StartSend(context.Background(), always.Tracer("t"), "topic", props)
	span.End()
	if sc := msgtrace.Extract(got); !sc.IsValid() || !sc.IsSampled() || got["k"] != "v" {
		t.Errorf("root sampled: properties %v, want a sampled traceparent and k=v", got)
	}
	if _, ok := props[msgtrace.PropertyTraceParent]; ok {
		t.Errorf("StartSend changed the caller's properties: %v", props)
	}

	for _, in := range []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		parent := msgtrace.Parse(in, "")
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
		span, got = msgtrace.StartSend(ctx, never.Tracer("t"), "topic", nil)
		span.End()
		sc := msgtrace.Extract(got)
		if sc.TraceID() != parent.TraceID() || sc.IsSampled() != parent.IsSampled() {
			t.Errorf("under %s: traceparent %q, want one of that trace, sampled %v", in, got[msgtrace.PropertyTraceParent], parent.IsSampled())
		}
	}
}
