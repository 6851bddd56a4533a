package msgtrace

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The spans of a message published or received outside a handler: the
// input a run publishes, `streamrun produce` and `streamrun consume`.

// StartPublish starts the "send" span of a message published to topic
// with properties by a program, not a handler: a child of the trace
// context properties carry (a message passed on, a traceparent given by
// hand), else a root (see StartSend). It returns the properties to
// publish, carrying the span's context, and end, which ends the span with
// the receipt: the message id, or the error that failed the publish. end
// is nil when the span records nothing (a root not sampled, say).
func StartPublish(tr trace.Tracer, topic string, properties map[string]string) (map[string]string, func(id fmt.Stringer, err error)) {
	ctx := context.Background()
	if sc := Extract(properties); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	span, props := StartSend(ctx, tr, topic, properties)
	if !span.IsRecording() {
		return props, nil
	}
	return props, func(id fmt.Stringer, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetAttributes(KeyErrorType.String("publish"))
		} else {
			span.SetAttributes(KeyMessageID.String(id.String()))
		}
		span.End()
	}
}

// StartReceived starts the CONSUMER "process" span of one message with
// id, received from topic on subscription by a program, not a handler: a
// child of, and linked to, the creation context properties carry, else a
// root. The caller ends it.
func StartReceived(tr trace.Tracer, topic, subscription, id string, properties map[string]string) trace.Span {
	ctx := context.Background()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(SystemPulsar, KeyOperationName.String("process"),
			KeyOperationType.String("process"), KeyDestination.String(topic),
			KeyConsumerGroup.String(subscription), KeyMessageID.String(id))}
	if sc := Extract(properties); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
			Attributes: []attribute.KeyValue{KeyMessageID.String(id)}}))
	}
	_, span := tr.Start(ctx, ProcessName(topic), opts...)
	return span
}
