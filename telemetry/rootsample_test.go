package telemetry

import (
	"context"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The root decision made before the SDK is asked is the SDK's sampler's,
// for every sampler streamrun configures and any trace ID.
func TestRootDecisionIsTheSDKSamplers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ratio float64
	}{
		{"always_off", 1}, {"parentbased_always_off", 1},
		{"traceidratio", 0}, {"traceidratio", 0.01}, {"traceidratio", 0.5}, {"traceidratio", 0.999},
		{"parentbased_traceidratio", 0.01}, {"parentbased_traceidratio", 0.3},
	} {
		rule, sampler := newRootRule(tc.name, tc.ratio), newSampler(tc.name, tc.ratio)
		if rule == nil {
			t.Fatalf("%s %g: no root rule", tc.name, tc.ratio)
		}
		sampled := 0
		for range 20000 {
			id := newTraceID()
			sdk := sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id,
				Name: "x"}).Decision == sdktrace.RecordAndSample
			if rule(id) != sdk {
				t.Fatalf("%s %g: trace %s: rule %v, SDK %v", tc.name, tc.ratio, id, rule(id), sdk)
			}
			if sdk {
				sampled++
			}
		}
		t.Logf("%s %g: %d of 20000 sampled", tc.name, tc.ratio, sampled)
	}
	for _, name := range []string{"always_on", "parentbased_always_on", "traceidratio"} {
		if newRootRule(name, 1) != nil {
			t.Errorf("%s: a root rule where every root is sampled", name)
		}
	}
}

// Through the tracer, a sampled root keeps the trace ID the decision was
// made on (so the ratio holds: were the SDK to draw another, only the
// ratio's square would be sampled), an unsampled one is a non-recording
// span with a valid unsampled context, and a child goes to the SDK.
func TestRootTracerKeepsTheRatio(t *testing.T) {
	ctx := context.Background()
	tr, err := NewTracing(ctx, Config{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolHTTP, Sampler: "traceidratio",
		SamplerArg: "0.3"}, TracingOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(ctx)
	tracer := tr.Tracer("test")
	if _, ok := tracer.(*rootTracer); !ok {
		t.Fatalf("tracer %T, want a rootTracer", tracer)
	}
	const n = 20000
	sampled := 0
	for range n {
		sctx, span := tracer.Start(ctx, "root")
		sc := span.SpanContext()
		if !sc.IsValid() || trace.SpanFromContext(sctx) != span || sc.IsSampled() != span.IsRecording() {
			t.Fatalf("root span %v: context %v, recording %v", span, sc, span.IsRecording())
		}
		if sc.IsSampled() {
			sampled++
			if !newRootRule("traceidratio", 0.3)(sc.TraceID()) {
				t.Fatalf("sampled root with trace %s, which the rule does not sample", sc.TraceID())
			}
		}
		_, child := tracer.Start(sctx, "child")
		if child.SpanContext().TraceID() != sc.TraceID() || child.SpanContext().IsSampled() != sc.IsSampled() {
			t.Fatalf("child %v of %v", child.SpanContext(), sc)
		}
		child.End()
		span.End()
	}
	// 0.3 of 20000 is 6000, give or take 65 (one standard deviation).
	if sampled < 5600 || sampled > 6400 {
		t.Errorf("%d of %d roots sampled at 0.3", sampled, n)
	}
}
