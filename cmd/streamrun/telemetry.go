package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/scrape"
)

// commandTracing traces what a command publishes and receives, as the
// OTEL_* environment says (docs/telemetry.md). A nil *commandTracing is
// off and every method does nothing.
type commandTracing struct {
	tp *sdktrace.TracerProvider
	tr trace.Tracer
}

// startTracing sets up tracing from the environment over base (a
// pipeline file's settings); nil when nothing is configured.
func startTracing(ctx context.Context, base telemetry.Config) (*commandTracing, telemetry.Config, error) {
	cfg, err := telemetry.FromEnv(base, os.Getenv)
	if err != nil {
		return nil, cfg, err
	}
	tp, err := telemetry.NewTracerProvider(ctx, cfg)
	if err != nil || tp == nil {
		return nil, cfg, err
	}
	return &commandTracing{tp: tp, tr: tp.Tracer(msgtrace.ScopeName)}, cfg, nil
}

// shutdown exports what is left, within timeout, reporting a failure on
// stderr (the command's own outcome stands).
func (t *commandTracing) shutdown(timeout time.Duration, stderr io.Writer) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "streamrun: exporting traces: %v\n", err)
	}
}

// send starts the "send" span of m, published to topic: a child of the
// trace context m's properties carry (one given with --property, say),
// else a trace of its own. It returns m carrying the span's context (none
// for a root the sampler does not sample: see msgtrace.StartSend) and
// done wrapped to end the span with the receipt.
func (t *commandTracing) send(topic string, m pool.Message, done func(pulsarwire.MessageID, error)) (pool.Message, func(pulsarwire.MessageID, error)) {
	if t == nil {
		return m, done
	}
	ctx := context.Background()
	if sc := msgtrace.Extract(m.Properties); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	span, props := msgtrace.StartSend(ctx, t.tr, topic, m.Properties)
	m.Properties = props
	return m, func(id pulsarwire.MessageID, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetAttributes(msgtrace.KeyErrorType.String("publish"))
		} else {
			span.SetAttributes(msgtrace.KeyMessageID.String(id.String()))
		}
		span.End()
		done(id, err)
	}
}

// process starts the "process" span of a received message, a child of
// (and linked to) its creation context; the caller ends it.
func (t *commandTracing) process(m *subscribe.Message, subscription string) trace.Span {
	if t == nil {
		return nil
	}
	ctx := context.Background()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(msgtrace.SystemPulsar, msgtrace.KeyOperationName.String("process"),
			msgtrace.KeyOperationType.String("process"), msgtrace.KeyDestination.String(m.Topic),
			msgtrace.KeyConsumerGroup.String(subscription), msgtrace.KeyMessageID.String(m.ID.String()))}
	if sc := msgtrace.Extract(m.Properties); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
			Attributes: []attribute.KeyValue{msgtrace.KeyMessageID.String(m.ID.String())}}))
	}
	_, span := t.tr.Start(ctx, msgtrace.ProcessName(m.Topic), opts...)
	return span
}

// hostTelemetry is what `streamrun run` sets up for the host: traces as
// the environment and the files say, metrics and health served on
// --telemetry-addr (or the files' telemetry.http).
type hostTelemetry struct {
	log     *slog.Logger
	tracing *commandTracing
	cfg     telemetry.Config
	addr    string
	mp      *sdkmetric.MeterProvider
	metrics http.Handler
	srv     *scrape.Server
}

// startHostTelemetry sets up what t and addr (the flag, which wins over
// t.HTTP) ask for; nothing that is not asked for.
func startHostTelemetry(ctx context.Context, t pipelines.Telemetry, addr string, log *slog.Logger) (*hostTelemetry, error) {
	base := fileTraces(t.Traces)
	ht := &hostTelemetry{log: log, addr: addr}
	if ht.addr == "" {
		ht.addr = t.HTTP
	}
	var err error
	if ht.tracing, ht.cfg, err = startTracing(ctx, base); err != nil {
		return nil, err
	}
	if ht.addr == "" {
		return ht, nil
	}
	res, err := telemetry.NewResource(ht.cfg)
	if err != nil {
		ht.close(time.Second)
		return nil, err
	}
	if ht.mp, ht.metrics, err = scrape.NewMeterProvider(res); err != nil {
		ht.close(time.Second)
		return nil, err
	}
	return ht, nil
}

// apply puts the providers and the plugins' OTEL_* settings into o.
func (ht *hostTelemetry) apply(o *runtime.Options) {
	if ht.tracing != nil {
		o.TracerProvider = ht.tracing.tp
		o.PluginEnv = append(o.PluginEnv, ht.cfg.Environ()...)
	} else {
		// A plugin must not export what its host does not.
		o.PluginEnv = append(o.PluginEnv, "OTEL_TRACES_EXPORTER=none")
	}
	if ht.mp != nil {
		o.MeterProvider = ht.mp
	}
}

// serve starts the endpoints, ready as h is.
func (ht *hostTelemetry) serve(h *runtime.Host) error {
	if ht.addr == "" {
		return nil
	}
	srv, err := scrape.Listen(scrape.Options{Addr: ht.addr, Metrics: ht.metrics, Ready: h.Ready, Logger: ht.log})
	if err != nil {
		return err
	}
	ht.srv = srv
	ht.log.Info("serving /metrics, /healthz and /readyz", "addr", srv.Addr())
	return nil
}

// close stops serving and exports what is left, within timeout.
func (ht *hostTelemetry) close(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if ht.srv != nil {
		_ = ht.srv.Close(ctx)
	}
	if ht.mp != nil {
		_ = ht.mp.Shutdown(ctx)
	}
	if ht.tracing != nil {
		if err := ht.tracing.tp.Shutdown(ctx); err != nil {
			ht.log.Warn("exporting traces", "err", err)
		}
	}
}

// addTelemetry takes a file's telemetry section: the first file that has
// one gives it, and another that has a different one is an error (one
// run serves one set of endpoints).
func (l *loaded) addTelemetry(t pipelines.Telemetry, path string, from *string) error {
	if reflect.DeepEqual(t, pipelines.Telemetry{}) {
		return nil
	}
	if err := checkTelemetry(t, path); err != nil {
		return err
	}
	if *from == "" {
		l.telemetry, *from = t, path
		return nil
	}
	if !reflect.DeepEqual(t, l.telemetry) {
		return fmt.Errorf("%s: telemetry differs from %s: one run has one telemetry section", path, *from)
	}
	return nil
}

// checkTelemetry reports what is wrong with the telemetry section of the
// file at path (what the pipelines package does not check: the settings'
// values), naming the file and the setting.
func checkTelemetry(t pipelines.Telemetry, path string) error {
	if err := fileTraces(t.Traces).Check(); err != nil {
		return fmt.Errorf("%s: telemetry.traces: %w", path, err)
	}
	if t.HTTP != "" {
		if _, err := scrape.ListenAddr(t.HTTP); err != nil {
			return fmt.Errorf("%s: telemetry.http: %w", path, err)
		}
	}
	return nil
}

// fileTraces is a file's traces section as a telemetry.Config.
func fileTraces(tr pipelines.Traces) telemetry.Config {
	return telemetry.Config{Endpoint: tr.Endpoint, Protocol: tr.Protocol, Headers: tr.Headers, ServiceName: tr.ServiceName,
		ResourceAttributes: tr.ResourceAttributes, Sampler: tr.Sampler, SamplerArg: tr.SamplerArg}
}
