package runtime

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	MetricEndToEnd     = "streamrun.batch.end_to_end.duration"
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
	// Per step of a pipeline (attributes streamrun.step and
	// streamrun.step.kind): messages given to it, passed on, filtered,
	// dead-lettered, and those on which an expression failed.
	MetricStepIn           = "streamrun.step.in"
	MetricStepOut          = "streamrun.step.out"
	MetricStepFiltered     = "streamrun.step.filtered"
	MetricStepDeadLettered = "streamrun.step.dead_lettered"
	MetricStepErrors       = "streamrun.step.errors"
)

// Histogram boundaries: the messaging conventions' advice for durations
// in seconds, and powers of two-ish for batch sizes.
var (
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	latencyBuckets  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	sizeBuckets     = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}
)

// hostMetrics are the host's instruments; nil without
// Options.MeterProvider, and every method of a nil one does nothing.
//
// A measurement through the SDK costs most of a microsecond, as much as
// a tenth of what a message costs the whole host, so nothing is measured
// per message: the counts are the pipelines' own atomic counters (and
// the sends'), observed when metrics are collected (observe.go), and
// the histograms are recorded once per batch.
type hostMetrics struct {
	batchSize             metric.Int64Histogram
	processTime, endToEnd metric.Float64Histogram
	reg                   metric.Registration
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
	hm.batchSize, err = m.Int64Histogram(MetricBatchSize, metric.WithUnit("{message}"),
		metric.WithDescription("Messages per batch handed to the handler."), metric.WithExplicitBucketBoundaries(sizeBuckets...))
	add(err)
	hm.processTime, err = m.Float64Histogram(MetricProcessTime, metric.WithUnit("s"),
		metric.WithDescription("How long the handler took over a batch (with error.type when it failed)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	add(err)
	hm.endToEnd, err = m.Float64Histogram(MetricEndToEnd, metric.WithUnit("s"),
		metric.WithDescription("Per batch: from the publish time of its oldest message to the settling of its last "+
			"(ack, retry, dead letter or drop): the end-to-end latency of the batch's slowest message."),
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
// attributes made once, and its counts of sends.
type metrics struct {
	h     *hostMetrics
	attrs []attribute.KeyValue
	base  metric.MeasurementOption
	sends sync.Map // sendKey -> *atomic.Int64
}

// sendKey names a count of sends: to a topic, failed with an error type
// ("" for the successful).
type sendKey struct{ topic, errorType string }

func (hm *hostMetrics) forPipeline(p *pipeline) *metrics {
	if hm == nil {
		return nil
	}
	attrs := []attribute.KeyValue{msgtrace.SystemPulsar, msgtrace.KeyPipeline.String(p.name),
		msgtrace.KeyConsumerGroup.String(p.cfg.Source.Subscription)}
	return &metrics{h: hm, attrs: attrs, base: metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

// handled records a batch handed to the handler.
func (m *metrics) handled(size int, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.h.batchSize.Record(bg, int64(size), m.base)
	if err != nil {
		m.h.processTime.Record(bg, took.Seconds(), metric.WithAttributeSet(attribute.NewSet(
			append(m.attrs[:len(m.attrs):len(m.attrs)], msgtrace.KeyErrorType.String(errorType(err)))...)))
		return
	}
	m.h.processTime.Record(bg, took.Seconds(), m.base)
}

// batchDone records the end-to-end latency of b, every message of which
// is settled.
func (m *metrics) batchDone(b *batch) {
	if m == nil {
		return
	}
	var oldest time.Time
	for _, it := range b.items {
		if t := it.m.PublishTime; !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	if !oldest.IsZero() {
		m.h.endToEnd.Record(bg, time.Since(oldest).Seconds(), m.base)
	}
}

// sent counts an output or dead letter published to topic (or not).
func (m *metrics) sent(topic string, err error) {
	if m == nil {
		return
	}
	k := sendKey{topic: topic}
	if err != nil {
		k.errorType = sendErrorType(err)
	}
	c, ok := m.sends.Load(k)
	if !ok {
		c, _ = m.sends.LoadOrStore(k, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}
