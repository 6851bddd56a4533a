package msgtrace

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of streamrun's spans.
const ScopeName = "github.com/streamrun/streamrun"

// SendName is the name of the span that publishes to topic.
func SendName(topic string) string { return "send " + topic }

// ProcessName is the name of the span that processes a batch from topic.
func ProcessName(topic string) string { return "process " + topic }

// producerKind starts a "send" span: one slice for every call, not one
// made (and escaping to the heap) per message.
var producerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// StartSend starts the PRODUCER span of a message published to topic, a
// child of ctx's span, and returns properties with the span's context in
// them (a copy: properties is not changed), the message's creation
// context for whoever reads it. attrs are added to the span. The
// attributes are set only on a span that records: a message whose trace
// is not sampled pays for its context and little else. Under a parent
// that is not sampled no span is made at all (a parent-based sampler, the
// default, would make one that records nothing): the message carries the
// parent's context, so its trace goes on, unsampled, and span is a
// non-recording one holding that context. Without a parent, a root the
// sampler does not sample gives the message no context (properties are
// returned as they are): there is no trace to join, and whoever reads
// the message makes its own root decision.
func StartSend(ctx context.Context, tr trace.Tracer, topic string, properties map[string]string, attrs ...attribute.KeyValue) (trace.Span, map[string]string) {
	if parent := trace.SpanContextFromContext(ctx); parent.IsValid() && !parent.IsSampled() {
		return trace.SpanFromContext(ctx), Inject(properties, parent)
	}
	_, span := tr.Start(ctx, SendName(topic), producerKind...)
	if !span.SpanContext().IsSampled() && !trace.SpanContextFromContext(ctx).IsValid() {
		return span, properties
	}
	if span.IsRecording() {
		span.SetAttributes(SystemPulsar, KeyOperationName.String("send"), KeyOperationType.String("send"),
			KeyDestination.String(topic))
		span.SetAttributes(attrs...)
	}
	return span, Inject(properties, span.SpanContext())
}
