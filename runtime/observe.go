package runtime

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

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
	restarts := counter(MetricRestarts, "{restart}", "Handler instances restarted.")
	crashes := counter(MetricCrashes, "{crash}", "Handler failures: crashes, hangs, wrong answers, failed restarts.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(conns, int64(len(h.client.BrokerConns())))
		h.mu.Lock()
		pipes := h.pipes
		h.mu.Unlock()
		for _, p := range pipes {
			attrs := metric.WithAttributeSet(attribute.NewSet(msgtrace.SystemPulsar, msgtrace.KeyPipeline.String(p.name),
				msgtrace.KeyConsumerGroup.String(p.cfg.Source.Subscription)))
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
		}
		return nil
	}, up, healthy, inFlight, conns, restarts, crashes)
}
