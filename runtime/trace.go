package runtime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/steps"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// tracing makes a pipeline's spans (docs/telemetry.md). A pipeline without
// Options.TracerProvider has none (nil), and every method of a nil
// *tracing does nothing: off costs a nil check.
type tracing struct {
	tr    trace.Tracer
	attrs []attribute.KeyValue // on every span of the pipeline
	// processOpts start every "process" span: made once, as a batch
	// whose root is not sampled pays for little more than the decision.
	processOpts []trace.SpanStartOption
	names       sync.Map // topic -> its "process" span's name
	dests       sync.Map // topic as given -> its full name, for span names
	// unsampled holds the properties of the last unsampled context an
	// output without properties of its own was published under: the
	// outputs of a batch share one (pool only reads a message's map).
	unsampled atomic.Pointer[sharedProps]
}

type sharedProps struct {
	sc    trace.SpanContext
	props map[string]string
}

func newTracing(tp trace.TracerProvider, pipeline, subscription string) *tracing {
	if tp == nil {
		return nil
	}
	t := &tracing{
		tr: tp.Tracer(msgtrace.ScopeName),
		attrs: []attribute.KeyValue{msgtrace.SystemPulsar, msgtrace.KeyPipeline.String(pipeline),
			msgtrace.KeyConsumerGroup.String(subscription)},
	}
	t.processOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(t.attrs...),
		trace.WithAttributes(msgtrace.KeyOperationName.String("process"), msgtrace.KeyOperationType.String("process"))}
	return t
}

// processName is the name of the "process" span of a batch from topic.
func (t *tracing) processName(topic string) string {
	if n, ok := t.names.Load(topic); ok {
		return n.(string)
	}
	n := msgtrace.ProcessName(topic)
	t.names.Store(topic, n)
	return n
}

// startProcess starts the CONSUMER span of b, handed to instance slot.
// Its parent is the creation context of the batch's first message whose
// context is sampled, else of its first message that has one, so that
// the journey of a message (of every message, in a batch of one) is one
// trace; it links to every message's creation context, as far as the
// SDK's link limit (OTEL_SPAN_LINK_COUNT_LIMIT, default 128) allows:
// links beyond it are dropped and counted in the span's
// dropped_links_count. A batch without any context is a root; when the
// sampler does not sample it, it is marked untraced and keeps no span:
// there is no trace to carry on, and its outputs go out without a
// context. In a batch that continues a trace, the messages without a
// context get a root decision of their own, one for them all as a batch
// of only such messages would (b.loose), so that their outputs are traced
// at the sampler's ratio and not because another message of the batch
// was.
func (t *tracing) startProcess(b *batch, slot int) {
	if t == nil || b.span != nil || b.untraced {
		return
	}
	topic := b.items[0].m.Topic
	var parent trace.SpanContext
	loose := false // a message without a context
	for _, it := range b.items {
		if it.m.Topic != topic {
			topic = "" // several topics: named after the subscription below
		}
		if loose && parent.IsSampled() {
			continue
		}
		sc := msgtrace.Extract(it.m.Properties)
		switch {
		case !sc.IsValid():
			loose = true
		case !parent.IsValid() || sc.IsSampled() && !parent.IsSampled():
			parent = sc
		}
	}
	name := topic
	if name == "" {
		name = t.attrs[2].Value.AsString()
	}
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	// The batch's own attributes are set once the span is known to
	// record (the samplers streamrun configures do not look at them).
	_, span := t.tr.Start(ctx, t.processName(name), t.processOpts...)
	if !parent.IsValid() {
		b.root = true
		if !span.SpanContext().IsSampled() {
			// A root not sampled: nothing is recorded (the span is a
			// non-recording one, which needs no End).
			b.untraced = true
			return
		}
	}
	if span.IsRecording() {
		t.setBatchAttrs(span, b, name, slot)
		if parent.IsValid() {
			for _, it := range b.items {
				if sc := msgtrace.Extract(it.m.Properties); sc.IsValid() {
					span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{msgtrace.KeyMessageID.String(it.id())}})
				}
			}
		}
	}
	b.span = span
	if loose && parent.IsValid() {
		if _, ls := t.tr.Start(context.Background(), t.processName(name), t.processOpts...); ls.SpanContext().IsSampled() {
			if ls.IsRecording() {
				t.setBatchAttrs(ls, b, name, slot)
			}
			b.loose = ls
		}
	}
}

// setBatchAttrs sets the attributes of b's "process" span.
func (t *tracing) setBatchAttrs(span trace.Span, b *batch, name string, slot int) {
	span.SetAttributes(msgtrace.KeyDestination.String(name), msgtrace.KeyBatchCount.Int(len(b.items)),
		msgtrace.KeyInstance.Int(slot))
}

// processCtx is ctx with b's span, which Instance.Process hands on to
// the plugin as the parent of the handler's span.
func (t *tracing) processCtx(ctx context.Context, b *batch) context.Context {
	if t == nil || b.span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, b.span)
}

// handlerFailed records on b's span that the handler failed on it.
func (t *tracing) handlerFailed(b *batch, slot int, err error) {
	if t == nil || b.span == nil || !b.span.IsRecording() {
		return
	}
	kind := errorType(err)
	b.span.AddEvent(msgtrace.EventCrash, trace.WithAttributes(msgtrace.KeyErrorType.String(kind),
		msgtrace.KeyInstance.Int(slot)))
	b.span.RecordError(err)
	b.span.SetAttributes(msgtrace.KeyErrorType.String(kind))
	b.span.SetStatus(codes.Error, err.Error())
}

// errorType classifies a handler failure for error.type.
func errorType(err error) string {
	switch {
	case errors.Is(err, host.ErrCrashed):
		return "crash"
	case errors.Is(err, errHung):
		return "timeout"
	case errors.Is(err, host.ErrBadResponse):
		return "bad_response"
	case errors.Is(err, host.ErrClosed):
		return "instance_closed" // killed under it after another batch's failure
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// event records what became of it on its batch's span.
func (t *tracing) event(it *item, name string, attrs ...attribute.KeyValue) {
	if t == nil || it.b == nil || it.b.span == nil || !it.b.span.IsRecording() {
		return
	}
	it.b.span.AddEvent(name, trace.WithAttributes(append(attrs, msgtrace.KeyMessageID.String(it.id()))...))
}

func (t *tracing) retried(it *item, reason string, delayMs int64) {
	t.event(it, msgtrace.EventRetry, msgtrace.KeyReason.String(reason), msgtrace.KeyDelay.Int64(delayMs))
}

func (t *tracing) deadLettered(it *item, reason string) {
	t.event(it, msgtrace.EventDeadLetter, msgtrace.KeyReason.String(reason))
}

// stepsRan adds to b's span an event for each step of c: what it did
// with the batch's messages (or their outputs).
func (t *tracing) stepsRan(b *batch, slot int, c *steps.Chain, counts []steps.Counts) {
	if t == nil {
		return
	}
	t.startProcess(b, slot)
	if b.span == nil || !b.span.IsRecording() {
		return
	}
	for i, s := range c.Steps() {
		n := counts[i]
		b.span.AddEvent(msgtrace.EventStep, trace.WithAttributes(msgtrace.KeyStep.String(s.Name),
			msgtrace.KeyStepKind.String(s.Kind.String()), msgtrace.KeyStepIn.Int64(n.In), msgtrace.KeyStepOut.Int64(n.Out),
			msgtrace.KeyStepFiltered.Int64(n.Filtered), msgtrace.KeyStepDeadLettered.Int64(n.DeadLettered),
			msgtrace.KeyStepErrors.Int64(n.Errors)))
	}
}

// endBatch ends b's spans once every message of b is settled.
func (t *tracing) endBatch(b *batch) {
	if t == nil || b.span == nil {
		return
	}
	b.span.End()
	if b.loose != nil {
		b.loose.End()
	}
}

// parentOf is the context an output o of it is published under: the
// one the plugin gave it (the handler's span, or a span of the handler's
// own), else one its properties carry other than its input's (which an
// echoed output keeps), else its input's (inputContext). traced is false
// when the output is published without span or context: tracing is off,
// or the root decision for its input said no.
func (t *tracing) parentOf(it *item, o *plugin.Output) (sc trace.SpanContext, traced bool) {
	if t == nil {
		return trace.SpanContext{}, false
	}
	if sc := msgtrace.Parse(o.TraceParent, o.TraceState); sc.IsValid() {
		return sc, true
	}
	if tp := o.Properties[msgtrace.PropertyTraceParent]; tp != "" && tp != it.m.Properties[msgtrace.PropertyTraceParent] {
		if sc := msgtrace.Extract(o.Properties); sc.IsValid() {
			return sc, true
		}
	}
	return t.inputContext(it)
}

// inputContext is the context an output of it follows when nothing else
// gives it one: its input's own. An input with a context: the batch's
// span when the batch continues that trace, else the input's creation
// context, sampled or not as it says. An input without one: the root
// decision made for it, that is the batch's span in a root batch, the
// loose span in a batch that continues another trace, or nothing (not
// traced) when that decision said no. An output thus follows its own
// input's sampling and never another message's of the same batch.
func (t *tracing) inputContext(it *item) (sc trace.SpanContext, traced bool) {
	in := msgtrace.Extract(it.m.Properties)
	b := it.b
	if in.IsValid() {
		if b != nil && b.span != nil && b.span.SpanContext().TraceID() == in.TraceID() {
			return b.span.SpanContext(), true
		}
		return in, true
	}
	switch {
	case b == nil:
		return trace.SpanContext{}, true // a root decision at its send
	case b.root && b.span != nil:
		return b.span.SpanContext(), true
	case b.loose != nil:
		return b.loose.SpanContext(), true
	}
	return trace.SpanContext{}, false
}

// batchContext is the context of it's batch span, else its creation
// context: a dead letter's parent (its batch's span has the event saying
// why); traced as parentOf's.
func (t *tracing) batchContext(it *item) (sc trace.SpanContext, traced bool) {
	if t == nil {
		return trace.SpanContext{}, false
	}
	if it.b != nil {
		if it.b.span != nil {
			return it.b.span.SpanContext(), true
		}
		if it.b.untraced {
			return trace.SpanContext{}, false
		}
	}
	return msgtrace.Extract(it.m.Properties), true
}

// publish publishes m to topic as p.client.PublishAsync does; traced, it
// does so under a PRODUCER span, a child of parent, whose context goes
// into m's properties and which ends with the receipt.
func (p *pipeline) publish(parent trace.SpanContext, traced bool, topic string, m pool.Message, done func(pulsarwire.MessageID, error)) {
	if p.met != nil {
		inner := done
		done = func(id pulsarwire.MessageID, err error) {
			p.met.sent(topic, err)
			inner(id, err)
		}
	}
	t := p.tr
	if t == nil || !traced {
		p.client.PublishAsync(p.hard, topic, m, done)
		return
	}
	if parent.IsValid() && !parent.IsSampled() && len(m.Properties) == 0 {
		// Nothing of this trace is recorded: no span, only its context
		// carried on (see msgtrace.StartSend), and the batch's outputs
		// share the one map that says it.
		m.Properties = t.unsampledProps(parent)
		p.client.PublishAsync(p.hard, topic, m, done)
		return
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)
	span, props := msgtrace.StartSend(ctx, t.tr, t.dest(topic), m.Properties, t.attrs...)
	m.Properties = props
	if !span.IsRecording() {
		// Nothing to end with the receipt (a root not sampled, say).
		p.client.PublishAsync(p.hard, topic, m, done)
		return
	}
	p.client.PublishAsync(p.hard, topic, m, func(id pulsarwire.MessageID, err error) {
		endSend(span, id, err)
		done(id, err)
	})
}

// unsampledProps returns properties that carry only sc, shared: nobody
// may change them.
func (t *tracing) unsampledProps(sc trace.SpanContext) map[string]string {
	if sp := t.unsampled.Load(); sp != nil && sp.sc.Equal(sc) {
		return sp.props
	}
	sp := &sharedProps{sc: sc, props: msgtrace.Inject(nil, sc)}
	t.unsampled.Store(sp)
	return sp.props
}

// dest is topic's full name, as the consumers' spans name it.
func (t *tracing) dest(topic string) string {
	if d, ok := t.dests.Load(topic); ok {
		return d.(string)
	}
	d := topic
	if tn, err := pulsarwire.ParseTopic(topic); err == nil {
		d = tn.String()
	}
	t.dests.Store(topic, d)
	return d
}

// endSend ends a PRODUCER span with its receipt.
func endSend(span trace.Span, id pulsarwire.MessageID, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetAttributes(msgtrace.KeyErrorType.String(sendErrorType(err)))
		span.SetStatus(codes.Error, err.Error())
	} else if span.IsRecording() {
		span.SetAttributes(msgtrace.KeyMessageID.String(id.String()))
	}
	span.End()
}

func sendErrorType(err error) string {
	if code, ok := pulsarwire.ServerCode(err); ok {
		return code.String()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled"
	}
	return "_OTHER"
}
