package streamrun

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/clienttrace"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/scrape"
)

// hostTelemetry is what a run sets up for its host: traces as the
// environment and the files say, metrics and health served on
// Options.TelemetryAddr (or the files' telemetry.http).
type hostTelemetry struct {
	log     *slog.Logger
	tp      *telemetry.Tracing // nil: traces off
	tr      trace.Tracer
	cfg     telemetry.Config
	addr    string
	mp      *sdkmetric.MeterProvider
	metrics http.Handler
	srv     *scrape.Server
}

// startHostTelemetry sets up what t and addr (which wins over t.HTTP)
// ask for, with the OTEL_* environment of getenv over the file's
// traces; nothing that is not asked for.
func startHostTelemetry(ctx context.Context, t pipelines.Telemetry, addr string, getenv func(string) string, log *slog.Logger) (*hostTelemetry, error) {
	ht := &hostTelemetry{log: log, addr: addr}
	if ht.addr == "" {
		ht.addr = t.HTTP
	}
	cfg, err := telemetry.FromEnv(fileTraces(t.Traces), getenv)
	if err != nil {
		return nil, err
	}
	ht.cfg = cfg
	if ht.tp, err = telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{Logger: log}); err != nil {
		return nil, err
	}
	if ht.tp != nil {
		ht.tr = ht.tp.Tracer(msgtrace.ScopeName)
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
	if ht.tp != nil {
		o.TracerProvider = ht.tp
		o.PluginEnv = append(o.PluginEnv, ht.cfg.Environ()...)
	} else {
		// A plugin must not export what its host does not.
		o.PluginEnv = append(o.PluginEnv, "OTEL_TRACES_EXPORTER=none")
	}
	if ht.mp != nil {
		o.MeterProvider = ht.mp
	}
}

// serve starts the endpoints, ready as ready says.
func (ht *hostTelemetry) serve(ready func() error) error {
	if ht.addr == "" {
		return nil
	}
	srv, err := scrape.Listen(scrape.Options{Addr: ht.addr, Metrics: ht.metrics, Ready: ready, Logger: ht.log})
	if err != nil {
		return err
	}
	ht.srv = srv
	ht.log.Info("serving /metrics, /healthz and /readyz", "addr", srv.Addr())
	return nil
}

// close stops serving and exports what is left, within timeout (and
// the traces' flush timeout, telemetry.Config.FlushTimeout: what was not
// exported by then is reported on the log).
func (ht *hostTelemetry) close(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if ht.srv != nil {
		_ = ht.srv.Close(ctx)
	}
	if ht.mp != nil {
		_ = ht.mp.Shutdown(ctx)
	}
	if ht.tp != nil {
		if err := ht.tp.Shutdown(ctx); err != nil {
			ht.log.Warn("stopping the trace exporter", "error", err)
		}
	}
}

// send starts the "send" span of m, published to topic by the run (its
// input; msgtrace.StartPublish). It returns m carrying the span's context
// and done wrapped to end the span with the receipt. Without traces it
// returns both as they are.
func (ht *hostTelemetry) send(topic string, m pool.Message, done func(pulsarwire.MessageID, error)) (pool.Message, func(pulsarwire.MessageID, error)) {
	if ht == nil || ht.tr == nil {
		return m, done
	}
	return clienttrace.SendSpan(ht.tr, topic, m, done)
}

// checkTelemetry reports what is wrong with the telemetry section of the
// file called name (what the pipelines package does not check: the
// settings' values), naming the file and the setting.
func checkTelemetry(t pipelines.Telemetry, name string) error {
	if err := fileTraces(t.Traces).Check(); err != nil {
		return fmt.Errorf("%s: telemetry.traces: %w", name, err)
	}
	if t.HTTP != "" {
		if _, err := scrape.ListenAddr(t.HTTP); err != nil {
			return fmt.Errorf("%s: telemetry.http: %w", name, err)
		}
	}
	return nil
}

// fileTraces is a file's traces section as a telemetry.Config.
func fileTraces(tr pipelines.Traces) telemetry.Config {
	return telemetry.Config{Endpoint: tr.Endpoint, Protocol: tr.Protocol, Headers: tr.Headers, ServiceName: tr.ServiceName,
		ResourceAttributes: tr.ResourceAttributes, Sampler: tr.Sampler, SamplerArg: tr.SamplerArg}
}
