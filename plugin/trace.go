package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// A traced batch carries the trace context of the host's "process" span.
// The SDK starts the span of the handler's work as its child and hands
// the handler a context holding it, so that a handler using OpenTelemetry
// nests its own spans under it; every output without a trace context of
// its own gets the handler span's, which the host's "send" span for it
// nests under.
//
// The plugin exports its spans itself, by OTLP, as the OTEL_* environment
// the host passes down says (the host's own settings, from its
// environment and its pipeline file). The alternative, returning span
// data to the host with each answer, would tie a span's life to the
// batch's and cover only the SDK's span: a handler's own spans (in
// goroutines, ending after the answer, in libraries it calls) could not
// follow, and the answer on the hot path would grow. The price is one
// exporter per plugin process, and that the spans of a plugin killed
// from outside may be lost; a crash flushes them first (briefly), and the
// host's span records the crash either way.

// handlerSpanName is the name of the span of the handler's work.
func handlerSpanName(pipeline string) string {
	if pipeline == "" {
		return "handle"
	}
	return "handle " + pipeline
}

// pluginTracing is the plugin's tracer provider, set up from the
// environment; nil when it exports nothing.
type pluginTracing struct {
	tp *telemetry.Tracing
	tr trace.Tracer
}

// setupTracing makes the plugin export as OTEL_* say, and makes that the
// process's global provider and propagator: a handler that uses
// OpenTelemetry's global API exports through it. Failed exports are
// logged through slog's default logger, which the host reads as records
// of their own level (a WARN, then at most one a minute: see
// telemetry.TracingOptions).
func setupTracing() *pluginTracing {
	cfg, err := telemetry.FromEnv(telemetry.Config{}, os.Getenv)
	if err != nil {
		slog.Warn("telemetry settings ignored", "err", err)
		return nil
	}
	tp, err := telemetry.NewTracing(context.Background(), cfg, telemetry.TracingOptions{Logger: slog.Default()})
	if err != nil {
		slog.Warn("traces not exported", "err", err)
		return nil
	}
	if tp == nil {
		return nil
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &pluginTracing{tp: tp, tr: tp.Tracer(msgtrace.ScopeName)}
}

// flush exports the spans ended so far, within d.
func (t *pluginTracing) flush(d time.Duration) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = t.tp.ForceFlush(ctx)
}

// shutdownGrace bounds the plugin's flush at exit, whatever the OTEL_*
// timeouts say: the host gives a closing plugin 2 s to exit, less a
// margin.
const shutdownGrace = 1500 * time.Millisecond

// shutdown exports what is left and stops the exporter, within the
// configured flush timeout and shutdownGrace.
func (t *pluginTracing) shutdown() {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), shutdownGrace,
		fmt.Errorf("not done within %s at the plugin's exit", shutdownGrace))
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		slog.Warn("stopping the trace exporter", "error", err)
	}
}

// startHandlerSpan starts the span of the handler's work on a batch of n
// messages, a child of parent, with tr; it returns ctx unchanged and a
// nil span when parent is invalid (the batch is not traced) or tr is nil.
func startHandlerSpan(ctx context.Context, tr trace.Tracer, parent trace.SpanContext, info *Info, n int) (context.Context, trace.Span) {
	if tr == nil || !parent.IsValid() {
		return ctx, nil
	}
	if !parent.IsSampled() {
		// Nothing of this trace is recorded: no span, but the handler's
		// own spans and the outputs stay in the trace, unsampled.
		return trace.ContextWithRemoteSpanContext(ctx, parent), nil
	}
	attrs := []attribute.KeyValue{msgtrace.SystemPulsar, msgtrace.KeyBatchCount.Int(n)}
	name := handlerSpanName("")
	if info != nil {
		name = handlerSpanName(info.Pipeline)
		attrs = append(attrs, msgtrace.KeyPipeline.String(info.Pipeline), msgtrace.KeyInstance.String(info.InstanceID))
	}
	return tr.Start(trace.ContextWithRemoteSpanContext(ctx, parent), name, trace.WithAttributes(attrs...))
}

// endHandlerSpan ends span after the handler's answer for batch:
// outputs without a context of their own get its context when their
// input is in its trace (see ownsOutputs), and a failure or panic is
// recorded.
func endHandlerSpan(span trace.Span, batch []*Message, res []Result, herr error, p *pb.Panic) {
	if span == nil {
		return
	}
	defer span.End()
	switch {
	case p != nil:
		span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "panic"),
			attribute.String("exception.message", p.Value), attribute.String("exception.stacktrace", p.Stack)))
		span.SetAttributes(msgtrace.KeyErrorType.String("panic"))
		span.SetStatus(codes.Error, "handler panicked: "+p.Value)
		return
	case herr != nil:
		span.RecordError(herr)
		span.SetAttributes(msgtrace.KeyErrorType.String(fmt.Sprintf("%T", herr)))
		span.SetStatus(codes.Error, herr.Error())
		return
	}
	tp, ts := msgtrace.Format(span.SpanContext())
	root := rootBatch(batch)
	for i := range res {
		if i < len(batch) && !root && !sameTrace(batch[i].TraceParent, tp) {
			continue
		}
		for k := range res[i].Outputs {
			if o := &res[i].Outputs[k]; o.TraceParent == "" {
				o.TraceParent, o.TraceState = tp, ts
			}
		}
	}
}

// An output follows its own input's trace (docs/telemetry.md, "Into the
// plugin and out"). The handler's span is in the trace of the batch's
// parent, one message's creation context (or a trace begun at the host
// when no message carried one: the root batch, whose outputs are all
// its). So only the outputs of inputs in that trace, or of a root batch,
// get the span's context; the host gives the others their input's own
// context, or a root decision of their own for inputs without one. Were
// every output given the span's context, as before, one sampled message
// would trace every output of its batch: at a ratio of 0.01 and batches
// of 100, most outputs; and an output with a context is not sent in a
// compact answer.

// rootBatch reports whether no message of batch carries a context.
func rootBatch(batch []*Message) bool {
	for _, m := range batch {
		if msgtrace.Parse(m.TraceParent, "").IsValid() {
			return false
		}
	}
	return true
}

// sameTrace reports whether two traceparents name the same trace.
func sameTrace(a, b string) bool {
	return len(a) >= 35 && len(b) >= 35 && a[3:35] == b[3:35]
}
