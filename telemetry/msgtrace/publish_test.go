package msgtrace_test

import (
	"context"
	"errors"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

type id string

func (i id) String() string { return string(i) }

// A program's publish is a child of the context its properties carry and
// ends with the receipt's id or error; what it publishes carries the
// span's context, which the receiving program's span follows and links.
// A root not sampled records nothing and has nothing to end.
func TestAPublishAndAReceiveFollowTheMessage(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	always := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	t.Cleanup(func() { _ = always.Shutdown(context.Background()); _ = never.Shutdown(context.Background()) })

	parent := msgtrace.Parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	props, end := msgtrace.StartPublish(always.Tracer("t"), "in", msgtrace.Inject(nil, parent))
	if end == nil {
		t.Fatal("a sampled send: no end")
	}
	end(id("1:2:-1:-1"), nil)
	sent := msgtrace.Extract(props)
	_, end2 := msgtrace.StartPublish(always.Tracer("t"), "in", nil)
	end2(nil, errors.New("refused"))
	msgtrace.StartReceived(always.Tracer("t"), "in", "sub", "1:2:-1:-1", props).End()

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	send, failed, recv := spans[0], spans[1], spans[2]
	if send.Parent().SpanID() != parent.SpanID() || send.SpanContext().SpanID() != sent.SpanID() || send.SpanKind() != trace.SpanKindProducer {
		t.Errorf("send: parent %v, id %v, kind %v; want under %v, the id the message carries %v", send.Parent().SpanID(), send.SpanContext().SpanID(), send.SpanKind(), parent.SpanID(), sent.SpanID())
	}
	if !hasAttr(send, "messaging.message.id", "1:2:-1:-1") {
		t.Errorf("send: attributes %v, want the message id", send.Attributes())
	}
	if failed.Parent().IsValid() || !hasAttr(failed, "error.type", "publish") {
		t.Errorf("failed send: parent %v, attributes %v, want a root with error.type publish", failed.Parent(), failed.Attributes())
	}
	if recv.Parent().SpanID() != sent.SpanID() || len(recv.Links()) != 1 || recv.Links()[0].SpanContext.SpanID() != sent.SpanID() ||
		recv.Name() != msgtrace.ProcessName("in") || !hasAttr(recv, "messaging.consumer.group.name", "sub") {
		t.Errorf("receive: %s under %v, links %v, attributes %v; want under and linked to %v", recv.Name(), recv.Parent().SpanID(), recv.Links(), recv.Attributes(), sent.SpanID())
	}

	if props, end := msgtrace.StartPublish(never.Tracer("t"), "in", map[string]string{"k": "v"}); end != nil || len(props) != 1 {
		t.Errorf("a root not sampled: properties %v, end %v; want them as given and no end", props, end != nil)
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, key, value string) bool {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key && kv.Value.AsString() == value {
			return true
		}
	}
	return false
}
