package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// A root span (one without a parent) is where the sampler decides, and
// streamrun starts one for every message it publishes without a context
// (`streamrun produce`, `run --input`: each line its own trace) and for
// every batch none of whose messages has one. At a ratio of 0.01, 99 in
// 100 of those are not sampled, and through the SDK each still costs a
// span start: its options, IDs, the sampler, a non-recording span and a
// context, most of a microsecond, as much as a tenth of what the message
// costs the whole host. rootTracer makes the same decision before the
// SDK is asked: it draws the trace ID, applies the configured sampler's
// rule for a root to it, and only for a sampled root goes on to the SDK,
// handing it the drawn ID (drawnIDs) so that the SDK's sampler decides
// again on the same ID, the same way. A root not sampled is a
// non-recording span with a valid, unsampled context, as the SDK's would
// be.

// rootRule is a sampler's decision for a root span with a trace ID.
type rootRule func(trace.TraceID) bool

// newRootRule returns the root decision of the sampler called name with
// ratio, as the SDK's samplers make it, or nil when every root is
// sampled (nothing to save).
func newRootRule(name string, ratio float64) rootRule {
	switch name {
	case "always_off", "parentbased_always_off":
		return func(trace.TraceID) bool { return false }
	case "traceidratio", "parentbased_traceidratio":
		if ratio >= 1 {
			return nil
		}
		if ratio <= 0 {
			return func(trace.TraceID) bool { return false }
		}
		// The SDK's rule (TraceIDRatioBased): the trace ID's last 8
		// bytes, big-endian, halved, below the ratio of 2^63.
		bound := uint64(ratio * (1 << 63))
		return func(id trace.TraceID) bool { return binary.BigEndian.Uint64(id[8:16])>>1 < bound }
	}
	return nil
}

// drawnTraceID is the context key under which rootTracer hands the SDK
// the trace ID it drew.
type drawnTraceID struct{}

// drawnIDs is the SDK's ID generator: random IDs, as the SDK's own, except
// a root's trace ID that rootTracer drew.
type drawnIDs struct{}

func (drawnIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := ctx.Value(drawnTraceID{}).(trace.TraceID); ok {
		return id, newSpanID()
	}
	return newTraceID(), newSpanID()
}

func (drawnIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.NativeEndian.PutUint64(id[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.NativeEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// rootTracer is a tracer of the SDK's that decides unsampled roots itself.
type rootTracer struct {
	embedded.Tracer
	sdk  trace.Tracer
	rule rootRule
	tp   trace.TracerProvider
}

func (r *rootTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if ctx == nil {
		ctx = context.Background()
	}
	if trace.SpanContextFromContext(ctx).TraceID().IsValid() {
		return r.sdk.Start(ctx, name, opts...) // a child: the SDK's sampler looks at the parent
	}
	id := newTraceID()
	if r.rule(id) {
		return r.sdk.Start(context.WithValue(ctx, drawnTraceID{}, id), name, opts...)
	}
	s := &unsampledSpan{sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: id, SpanID: newSpanID()}), tp: r.tp}
	return trace.ContextWithSpan(ctx, s), s
}

// unsampledSpan is a root the sampler did not sample: it records nothing
// and carries its context, unsampled, for its children.
type unsampledSpan struct {
	embedded.Span
	sc trace.SpanContext
	tp trace.TracerProvider
}

func (s *unsampledSpan) End(...trace.SpanEndOption)              {}
func (s *unsampledSpan) AddEvent(string, ...trace.EventOption)   {}
func (s *unsampledSpan) AddLink(trace.Link)                      {}
func (s *unsampledSpan) IsRecording() bool                       { return false }
func (s *unsampledSpan) RecordError(error, ...trace.EventOption) {}
func (s *unsampledSpan) SpanContext() trace.SpanContext          { return s.sc }
func (s *unsampledSpan) SetStatus(codes.Code, string)            {}
func (s *unsampledSpan) SetName(string)                          {}
func (s *unsampledSpan) SetAttributes(...attribute.KeyValue)     {}
func (s *unsampledSpan) TracerProvider() trace.TracerProvider    { return s.tp }
