package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// DefaultServiceName is service.name when Config.ServiceName is empty.
const DefaultServiceName = "streamrun"

// TracingOptions are how a program's traces are looked after.
type TracingOptions struct {
	// Logger is told when exports fail, in the program's own format: a
	// WARN at the first failure, then at most one each ReportEvery with
	// how many failed since, and an INFO once exports work again.
	// Default slog.Default().
	Logger *slog.Logger
	// ReportEvery is the least time between two WARN records about
	// failed exports. Default 1 minute.
	ReportEvery time.Duration
}

// DefaultReportEvery is TracingOptions.ReportEvery's default.
const DefaultReportEvery = time.Minute

// Tracing is a tracer provider that exports as a Config says, in
// batches, with the rules streamrun's programs follow when the collector
// is slow or away: failed exports are reported on the program's log
// (TracingOptions), never on OpenTelemetry's global error handler (plain
// lines from the log package, whatever the program's log format), and
// the flush at exit is bounded (Config.FlushTimeout). It is a
// trace.TracerProvider.
type Tracing struct {
	embedded.TracerProvider
	tp    *sdktrace.TracerProvider
	exp   *guardedExporter
	flush time.Duration
	root  rootRule // nil: every root is sampled (see rootTracer)
}

// NewTracing returns the tracing c configures, or nil when c exports
// nothing. The caller shuts it down (Shutdown flushes what is queued).
// Nothing connects before the first export, so a collector that is down
// costs only failed exports, reported as o says.
func NewTracing(ctx context.Context, c Config, o TracingOptions) (*Tracing, error) {
	if !c.Enabled() {
		return nil, nil
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, c)
	if err != nil {
		return nil, err
	}
	res, err := NewResource(c)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReportEvery <= 0 {
		o.ReportEvery = DefaultReportEvery
	}
	g := newGuardedExporter(exp, newFailureReport(o.Logger, o.ReportEvery, c.endpointForLog()))
	var bsp []sdktrace.BatchSpanProcessorOption
	if c.ProcessorTimeout > 0 {
		bsp = append(bsp, sdktrace.WithExportTimeout(c.ProcessorTimeout))
	}
	name, ratio, _ := c.sampler()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(g, bsp...),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(newSampler(name, ratio)),
		sdktrace.WithIDGenerator(drawnIDs{}),
	)
	return &Tracing{tp: tp, exp: g, flush: c.FlushTimeout(), root: newRootRule(name, ratio)}, nil
}

// Tracer returns a tracer of the provider. A root span it starts that the
// sampler does not sample costs little more than the decision (see
// rootTracer).
func (t *Tracing) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	tr := t.tp.Tracer(name, opts...)
	if t.root == nil {
		return tr
	}
	return &rootTracer{sdk: tr, rule: t.root, tp: t}
}

// ForceFlush exports the spans ended so far, within ctx. A failed export
// is reported on the log, not returned.
func (t *Tracing) ForceFlush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }

// Shutdown exports what is left and stops, within FlushTimeout (or ctx,
// if it ends first): at that bound the exports in flight are cut, the
// spans they held are reported lost, and Shutdown returns once the
// exporter has stopped. Failed exports are reported on the log; the
// error is the exporter's failure to stop.
func (t *Tracing) Shutdown(ctx context.Context) error {
	bound := t.flush
	cut := time.AfterFunc(bound, func() {
		t.exp.cut(fmt.Errorf("not done within %s at exit (OTEL_EXPORTER_OTLP_TIMEOUT sets the bound)", bound))
	})
	defer cut.Stop()
	stop := context.AfterFunc(ctx, func() { t.exp.cut(context.Cause(ctx)) })
	defer stop()
	// The cut makes the export give up, so the processor's shutdown
	// returns soon after the bound; the margin only guards against an
	// exporter that ignores its context.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound+time.Second)
	defer cancel()
	err := t.tp.Shutdown(sctx)
	t.exp.report.close()
	return err
}

// FlushTimeout is the bound on Shutdown (Config.FlushTimeout).
func (t *Tracing) FlushTimeout() time.Duration { return t.flush }

func newExporter(ctx context.Context, c Config) (*otlptrace.Exporter, error) {
	var (
		exp *otlptrace.Exporter
		err error
	)
	if c.Protocol == ProtocolHTTP {
		u := c.TracesEndpoint
		if u == "" {
			u = strings.TrimSuffix(c.Endpoint, "/") + "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u)}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(maps.Clone(c.Headers)))
		}
		if c.Timeout > 0 {
			opts = append(opts, otlptracehttp.WithTimeout(c.Timeout))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	} else {
		u := c.TracesEndpoint
		if u == "" {
			u = c.Endpoint
		}
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(u)}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(maps.Clone(c.Headers)))
		}
		if c.Timeout > 0 {
			opts = append(opts, otlptracegrpc.WithTimeout(c.Timeout))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	return exp, nil
}

// NewResource is the resource of c's traces and metrics: service.name and
// the resource attributes over the SDK's own.
func NewResource(c Config) (*resource.Resource, error) {
	attrs := make([]attribute.KeyValue, 0, len(c.ResourceAttributes)+1)
	for k, v := range c.ResourceAttributes {
		attrs = append(attrs, attribute.String(k, v))
	}
	name := c.ServiceName
	if name == "" {
		name = c.ResourceAttributes["service.name"]
	}
	if name == "" {
		name = DefaultServiceName
	}
	attrs = append(attrs, attribute.String("service.name", name))
	// resource.Default adds the SDK's own attributes (telemetry.sdk.*).
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func newSampler(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}
