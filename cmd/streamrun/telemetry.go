package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// commandTracing traces what a command publishes and receives, as the
// OTEL_* environment says (docs/telemetry.md). A nil *commandTracing is
// off and every method does nothing.
type commandTracing struct {
	tp  *telemetry.Tracing
	tr  trace.Tracer
	log *slog.Logger
}

// startTracing sets up tracing from the environment over base (a
// pipeline file's settings); nil when nothing is configured. Failed
// exports are reported on log, in the command's log format.
func startTracing(ctx context.Context, base telemetry.Config, log *slog.Logger) (*commandTracing, telemetry.Config, error) {
	cfg, err := telemetry.FromEnv(base, os.Getenv)
	if err != nil {
		return nil, cfg, err
	}
	tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{Logger: log})
	if err != nil || tp == nil {
		return nil, cfg, err
	}
	return &commandTracing{tp: tp, tr: tp.Tracer(msgtrace.ScopeName), log: log}, cfg, nil
}

// shutdown exports what is left, within the flush timeout
// (telemetry.Config.FlushTimeout) and timeout; what was not exported is
// reported on the log (the command's own outcome stands).
func (t *commandTracing) shutdown(timeout time.Duration) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		t.log.Warn("stopping the trace exporter", "error", err)
	}
}

// send starts the "send" span of m, published to topic
// (msgtrace.StartPublish). It returns m carrying the span's context and
// done wrapped to end the span with the receipt.
func (t *commandTracing) send(topic string, m pool.Message, done func(pulsarwire.MessageID, error)) (pool.Message, func(pulsarwire.MessageID, error)) {
	if t == nil {
		return m, done
	}
	props, end := msgtrace.StartPublish(t.tr, topic, m.Properties)
	m.Properties = props
	if end == nil {
		return m, done
	}
	return m, func(id pulsarwire.MessageID, err error) {
		end(id, err)
		done(id, err)
	}
}

// process starts the "process" span of a received message
// (msgtrace.StartReceived); the caller ends it.
func (t *commandTracing) process(m *subscribe.Message, subscription string) trace.Span {
	if t == nil {
		return nil
	}
	return msgtrace.StartReceived(t.tr, m.Topic, subscription, m.ID.String(), m.Properties)
}
