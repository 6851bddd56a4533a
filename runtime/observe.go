package runtime

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// with is the pipeline's attributes and kv, for an observation.
func (m *metrics) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(append(m.attrs[:len(m.attrs):len(m.attrs)], kv...)...))
}

// backlogTimeout bounds asking the brokers for a pipeline's backlog
// during a collection.
const backlogTimeout = 2 * time.Second

// bg is the context of measurements, which have none of their own.
var bg = context.Background()

// observeHost registers the gauges and cumulative counts read from the
// host when metrics are collected (a scrape), not kept on the hot path.
func observeHost(m metric.Meter, h *Host) (metric.Registration, error) {
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	up := gauge(MetricInstancesUp, "{instance}", "Handler instances running.")
	healthy := gauge(MetricPipelineUp, "", "1 while the pipeline runs with no handler instance that keeps crashing, else 0.")
	inFlight := gauge(MetricInFlight, "{message}", "Messages received and not settled yet.")
	conns := gauge(MetricConnections, "{connection}", "Broker connections open.")
	reconnects := counter(MetricReconnects, "{connection}", "Broker connections dialed again to an address connected before.")
	pendingMsgs := gauge(MetricPendingMsgs, "{message}", "Messages published and not yet acknowledged by the broker, all producers.")
	pendingBytes := gauge(MetricPendingBytes, "By", "Payload bytes of those messages.")
	permits := gauge(MetricPermits, "{message}", "Flow permits granted to the brokers and not used yet.")
	backlog := gauge(MetricBacklog, "{entry}", "The subscription's backlog as the brokers report it, in entries (a batch counts once).")
	restarts := counter(MetricRestarts, "{restart}", "Handler instances restarted.")
	received := counter(MetricReceived, "{message}", "Messages received from the pipeline's subscription.")
	processed := counter(MetricProcessed, "{message}", "Messages the handler answered for.")
	settled := counter(MetricSettled, "{message}",
		"Messages settled, by streamrun.outcome: acked, retried, dead_lettered, dropped, handed_back.")
	sent := counter(MetricSent, "{message}", "Outputs and dead letters published (with error.type when the publish failed).")
	crashes := counter(MetricCrashes, "{crash}", "Handler failures: crashes, hangs, wrong answers, failed restarts.")
	stepIn := counter(MetricStepIn, "{message}", "Messages (or, after the handler, outputs) given to a step.")
	stepOut := counter(MetricStepOut, "{message}", "Messages a step passed on.")
	stepFiltered := counter(MetricStepFiltered, "{message}", "Messages a filter step kept out.")
	stepDead := counter(MetricStepDeadLettered, "{message}", "Messages a step sent to the dead-letter topic.")
	stepErrors := counter(MetricStepErrors, "{message}", "Messages on which one of a step's expressions failed.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		cs := h.client.Stats()
		o.ObserveInt64(conns, int64(cs.Connections))
		o.ObserveInt64(reconnects, cs.Reconnects)
		o.ObserveInt64(pendingMsgs, cs.PendingMessages)
		o.ObserveInt64(pendingBytes, cs.PendingBytes)
		h.mu.Lock()
		pipes := h.pipes
		h.mu.Unlock()
		for _, p := range pipes {
			attrs := p.met.base
			hl := p.health()
			n := 0
			for _, ih := range hl.Instances {
				if ih.Up {
					n++
				}
			}
			o.ObserveInt64(up, int64(n), attrs)
			ok := int64(0)
			if hl.Healthy() {
				ok = 1
			}
			o.ObserveInt64(healthy, ok, attrs)
			st := p.snapshot()
			o.ObserveInt64(inFlight, st.InFlight, attrs)
			o.ObserveInt64(restarts, st.Restarts, attrs)
			o.ObserveInt64(crashes, st.Crashes, attrs)
			o.ObserveInt64(received, st.Received, attrs)
			o.ObserveInt64(processed, st.Processed, attrs)
			for _, oc := range []struct {
				name string
				n    int64
			}{{"acked", st.Acked}, {"retried", st.Retried}, {"dead_lettered", st.DeadLettered},
				{"dropped", st.Dropped}, {"filtered", st.Filtered}, {"handed_back", st.HandedBack}} {
				o.ObserveInt64(settled, oc.n, p.met.with(msgtrace.KeyOutcome.String(oc.name)))
			}
			p.met.sends.Range(func(k, v any) bool {
				sk := k.(sendKey)
				kv := []attribute.KeyValue{msgtrace.KeyDestination.String(sk.topic)}
				if sk.errorType != "" {
					kv = append(kv, msgtrace.KeyErrorType.String(sk.errorType))
				}
				o.ObserveInt64(sent, v.(*atomic.Int64).Load(), p.met.with(kv...))
				return true
			})
			for _, s := range st.Steps {
				kv := p.met.with(msgtrace.KeyStep.String(s.Name), msgtrace.KeyStepKind.String(s.Kind))
				o.ObserveInt64(stepIn, s.In, kv)
				o.ObserveInt64(stepOut, s.Out, kv)
				o.ObserveInt64(stepFiltered, s.Filtered, kv)
				o.ObserveInt64(stepDead, s.DeadLettered, kv)
				o.ObserveInt64(stepErrors, s.Errors, kv)
			}
			if s := p.state.Load().(State); s != StateRunning {
				continue // the consumer is being opened or closed
			}
			o.ObserveInt64(permits, p.cons.Permits(), attrs)
			bctx, cancel := context.WithTimeout(ctx, backlogTimeout)
			bl, err := p.cons.Backlog(bctx)
			cancel()
			if err == nil {
				o.ObserveInt64(backlog, bl, attrs)
			}
		}
		return nil
	}, up, healthy, inFlight, conns, reconnects, pendingMsgs, pendingBytes, permits, backlog, restarts, crashes,
		received, processed, settled, sent, stepIn, stepOut, stepFiltered, stepDead, stepErrors)
}
