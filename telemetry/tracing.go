package telemetry

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is service.name when Config.ServiceName is empty.
const DefaultServiceName = "streamrun"

// NewTracerProvider returns an SDK tracer provider that exports as c
// says, in batches, or nil when c exports nothing. The caller shuts it
// down (Shutdown flushes what is queued). Nothing connects before the
// first export, so a collector that is down costs only failed exports.
func NewTracerProvider(ctx context.Context, c Config) (*sdktrace.TracerProvider, error) {
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
	name, ratio, _ := c.sampler()
	return sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(newSampler(name, ratio)),
	), nil
}

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
