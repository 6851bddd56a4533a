package clienttrace

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// Tracing traces a program's messages. A nil *Tracing is off and every
// method does nothing, so callers need not check.
type Tracing struct {
	tp  *telemetry.Tracing
	tr  trace.Tracer
	log *slog.Logger
}

// Start sets up tracing from the environment read by getenv over base (a
// pipeline file's settings, or the zero Config); nil when nothing is
// configured. Failed exports are reported on log,
// in the program's log format.
func Start(ctx context.Context, base telemetry.Config, getenv func(string) string, log *slog.Logger) (*Tracing, error) {
	cfg, err := telemetry.FromEnv(base, getenv)
	if err != nil {
		return nil, err
	}
	tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{Logger: log})
	if err != nil || tp == nil {
		return nil, err
	}
	return &Tracing{tp: tp, tr: tp.Tracer(msgtrace.ScopeName), log: log}, nil
}

// Shutdown exports what is left, within the flush timeout
// (telemetry.Config.FlushTimeout) and timeout; what was not exported is
// reported on the log, not returned: the program's own outcome stands.
func (t *Tracing) Shutdown(timeout time.Duration) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		t.log.Warn("stopping the trace exporter", "error", err)
	}
}

// Send starts the "send" span of m, published to topic
// (msgtrace.StartPublish). It returns m carrying the span's context and
// done wrapped to end the span with the receipt: the shape of
// pool.PublishOptions.Wrap.
func (t *Tracing) Send(topic string, m pool.Message, done func(pulsarwire.MessageID, error)) (pool.Message, func(pulsarwire.MessageID, error)) {
	if t == nil {
		return m, done
	}
	return SendSpan(t.tr, topic, m, done)
}

// SendSpan is Send with tracer tr: for a program that holds its own
// tracer (the host's run input and outputs do).
func SendSpan(tr trace.Tracer, topic string, m pool.Message, done func(pulsarwire.MessageID, error)) (pool.Message, func(pulsarwire.MessageID, error)) {
	props, end := msgtrace.StartPublish(tr, topic, m.Properties)
	m.Properties = props
	if end == nil {
		return m, done
	}
	return m, func(id pulsarwire.MessageID, err error) {
		end(id, err)
		done(id, err)
	}
}

// Process starts the "process" span of a received message
// (msgtrace.StartReceived); the caller ends it. Nil when t is off.
func (t *Tracing) Process(m *subscribe.Message, subscription string) trace.Span {
	if t == nil {
		return nil
	}
	return msgtrace.StartReceived(t.tr, m.Topic, subscription, m.ID.String(), m.Properties)
}
