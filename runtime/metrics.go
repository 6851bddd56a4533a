package runtime

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// Metric names, in OpenTelemetry's form; docs/telemetry.md lists their
// Prometheus forms. The messaging conventions' names where they fit,
// streamrun's own under "streamrun." elsewhere.
const (
	MetricReceived     = "messaging.client.consumed.messages"
	MetricSent         = "messaging.client.sent.messages"
	MetricProcessed    = "streamrun.messages.processed"
	MetricSettled      = "streamrun.messages.settled"
	MetricInFlight     = "streamrun.messages.in_flight"
	MetricBatchSize    = "streamrun.batch.size"
	MetricProcessTime  = "messaging.process.duration"
	MetricEndToEnd     = "streamrun.message.end_to_end.duration"
	MetricInstancesUp  = "streamrun.handler.instances.up"
	MetricRestarts     = "streamrun.handler.restarts"
	MetricCrashes      = "streamrun.handler.crashes"
	MetricPipelineUp   = "streamrun.pipeline.healthy"
	MetricConnections  = "streamrun.broker.connections"
	MetricReconnects   = "streamrun.broker.reconnects"
	MetricPermits      = "streamrun.consumer.permits"
	MetricBacklog      = "streamrun.consumer.backlog"
	MetricPendingMsgs  = "streamrun.producer.pending.messages"
	MetricPendingBytes = "streamrun.producer.pending.bytes"
)

// Histogram boundaries: the messaging conventions' advice for durations
// in seconds, and powers of two-ish for batch sizes.
var (
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	latencyBuckets  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	sizeBuckets     = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}
)

// outcomeValue is streamrun.outcome's value for o.
func outcomeValue(o Outcome) string {
	if o == DeadLettered {
		return "dead_lettered"
	}
	return o.String()
}

// hostMetrics are the host's instruments; nil without
// Options.MeterProvider, and every method of a nil one does nothing.
type hostMetrics struct {
	received, processed, settled, sent metric.Int64Counter
	batchSize                          metric.Int64Histogram
	processTime, endToEnd              metric.Float64Histogram
	reg                                metric.Registration
}

func newHostMetrics(mp metric.MeterProvider, h *Host) (*hostMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	m := mp.Meter(msgtrace.ScopeName)
	hm := &hostMetrics{}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	hm.received, err = m.Int64Counter(MetricReceived, metric.WithUnit("{message}"),
		metric.WithDescription("Messages received from the pipeline's subscription."))
	add(err)
	hm.processed, err = m.Int64Counter(MetricProcessed, metric.WithUnit("{message}"),
		metric.WithDescription("Messages the handler answered for."))
	add(err)
	hm.settled, err = m.Int64Counter(MetricSettled, metric.WithUnit("{message}"),
		metric.WithDescription("Messages settled, by streamrun.outcome: acked, retried, dead_lettered, dropped, handed_back."))
	add(err)
	hm.sent, err = m.Int64Counter(MetricSent, metric.WithUnit("{message}"),
		metric.WithDescription("Outputs and dead letters published (with error.type when the publish failed)."))
	add(err)
	hm.batchSize, err = m.Int64Histogram(MetricBatchSize, metric.WithUnit("{message}"),
		metric.WithDescription("Messages per batch handed to the handler."), metric.WithExplicitBucketBoundaries(sizeBuckets...))
	add(err)
	hm.processTime, err = m.Float64Histogram(MetricProcessTime, metric.WithUnit("s"),
		metric.WithDescription("How long the handler took over a batch (with error.type when it failed)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	hm.endToEnd, err = m.Float64Histogram(MetricEndToEnd, metric.WithUnit("s"),
		metric.WithDescription("From a message's publish time to its settling (ack, dead letter or drop)."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("runtime: metrics: %w", err)
	}
	if hm.reg, err = observeHost(m, h); err != nil {
		return nil, fmt.Errorf("runtime: metrics: %w", err)
	}
	return hm, nil
}

// close stops the observations of the host.
func (hm *hostMetrics) close() {
	if hm != nil && hm.reg != nil {
		_ = hm.reg.Unregister()
	}
}

// metrics are a pipeline's view of the host's instruments, its
// attributes made once.
type metrics struct {
	h        *hostMetrics
	base     metric.MeasurementOption
	attrs    []attribute.KeyValue
	outcomes map[Outcome]metric.MeasurementOption
	back     metric.MeasurementOption
}

func (hm *hostMetrics) forPipeline(p *pipeline) *metrics {
	if hm == nil {
		return nil
	}
	attrs := []attribute.KeyValue{msgtrace.SystemPulsar, msgtrace.KeyPipeline.String(p.name),
		msgtrace.KeyConsumerGroup.String(p.cfg.Source.Subscription)}
	m := &metrics{h: hm, attrs: attrs, base: metric.WithAttributes(attrs...), outcomes: map[Outcome]metric.MeasurementOption{}}
	for _, o := range []Outcome{Acked, Retried, DeadLettered, Dropped} {
		m.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(append(attrs[:len(attrs):len(attrs)],
			msgtrace.KeyOutcome.String(outcomeValue(o)))...))
	}
	m.back = metric.WithAttributeSet(attribute.NewSet(append(attrs[:len(attrs):len(attrs)],
		msgtrace.KeyOutcome.String("handed_back"))...))
	return m
}

func (m *metrics) received(n int) {
	if m != nil {
		m.h.received.Add(bg, int64(n), m.base)
	}
}

func (m *metrics) processed(n int) {
	if m != nil {
		m.h.processed.Add(bg, int64(n), m.base)
	}
}

func (m *metrics) handled(size int, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.h.batchSize.Record(bg, int64(size), m.base)
	if err != nil {
		m.h.processTime.Record(bg, took.Seconds(), m.base, metric.WithAttributes(msgtrace.KeyErrorType.String(errorType(err))))
		return
	}
	m.h.processTime.Record(bg, took.Seconds(), m.base)
}

func (m *metrics) settled(it *item, o Outcome) {
	if m == nil {
		return
	}
	m.h.settled.Add(bg, 1, m.outcomes[o])
	if o != Retried && !it.m.PublishTime.IsZero() {
		m.h.endToEnd.Record(bg, time.Since(it.m.PublishTime).Seconds(), m.base)
	}
}

func (m *metrics) handedBack() {
	if m != nil {
		m.h.settled.Add(bg, 1, m.back)
	}
}

func (m *metrics) sent(topic string, err error) {
	if m == nil {
		return
	}
	opt := metric.WithAttributes(msgtrace.KeyDestination.String(topic))
	if err != nil {
		m.h.sent.Add(bg, 1, m.base, opt, metric.WithAttributes(msgtrace.KeyErrorType.String(sendErrorType(err))))
		return
	}
	m.h.sent.Add(bg, 1, m.base, opt)
}
