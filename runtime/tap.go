package runtime

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// A tap shows a sample of what passes through a pipeline: its inputs as
// they are settled (with the outcome) and its outputs as they are
// published, a few per second, payloads truncated. It costs a pipeline
// nothing while none is open (one atomic load per message), and is only
// allowed on a pipeline whose file says tap: true, as payloads leave the
// host through it.

// ErrTapNotAllowed refuses a tap of a pipeline whose tap field is false.
var ErrTapNotAllowed = errors.New("the pipeline does not allow a tap (its tap field is false)")

// TapKind says where in a pipeline a tapped message was seen.
type TapKind string

// Where a tap sees messages.
const (
	TapInput  TapKind = "input"
	TapOutput TapKind = "output"
)

// TapEvent is one message a tap saw.
type TapEvent struct {
	Time     time.Time
	Pipeline string
	Kind     TapKind
	// Topic is where an input came from, or where an output goes (as
	// the handler named it).
	Topic string
	Key   string
	// MessageID is an input's id ("" for an output, which has none until
	// its receipt).
	MessageID string
	// TraceID is the W3C trace id the message travels in, "" when none.
	TraceID string
	// Payload is the first TapOptions.MaxPayload bytes of the payload,
	// a copy; Size the whole payload's length.
	Payload []byte
	Size    int
	// Outcome of an input (acked, retried, dead-lettered, dropped,
	// filtered) and its reason when there is one.
	Outcome string
	Reason  string
}

// TapOptions bound what a tap passes on.
type TapOptions struct {
	// Rate is the most events per second; the others are skipped (and
	// counted by Tap's skipped). Default 10.
	Rate float64
	// MaxPayload is how much of a payload an event carries. Default 256
	// bytes.
	MaxPayload int
}

func (o TapOptions) withDefaults() TapOptions {
	if o.Rate <= 0 {
		o.Rate = 10
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 256
	}
	return o
}

// tap is one open tap of a pipeline.
type tap struct {
	opts TapOptions
	fn   func(TapEvent)

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	skipped int64
}

// allow takes a token of the tap's rate, refilled as time passes (at
// most one second's worth saved up).
func (t *tap) allow(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*t.opts.Rate, max(t.opts.Rate, 1))
	t.last = now
	if t.tokens < 1 {
		t.skipped++
		return false
	}
	t.tokens--
	return true
}

// taps are a pipeline's open taps; nil while none is open.
type taps []*tap

// Tap calls fn with a sample of pipeline's messages (see TapEvent) until
// stop is called, as opts bound it. fn is called on the pipeline's own
// goroutines: it must return at once (hand the event to a buffer that
// drops when full). A pipeline that does not allow a tap is refused with
// ErrTapNotAllowed, as is one the host does not run. stop returns how
// many events the rate skipped.
func (h *Host) Tap(pipeline string, opts TapOptions, fn func(TapEvent)) (stop func() (skipped int64), err error) {
	p := h.pipelineNamed(pipeline)
	if p == nil {
		return nil, fmt.Errorf("runtime: tap: no pipeline %q", pipeline)
	}
	if !p.tapAllowed.Load() {
		return nil, fmt.Errorf("runtime: tap of %s: %w", pipeline, ErrTapNotAllowed)
	}
	t := &tap{opts: opts.withDefaults(), fn: fn, last: time.Now()}
	t.tokens = max(t.opts.Rate, 1)
	p.tapMu.Lock()
	cur := p.taps.Load()
	next := taps{t}
	if cur != nil {
		next = append(append(taps(nil), (*cur)...), t)
	}
	p.taps.Store(&next)
	p.tapMu.Unlock()
	return func() int64 {
		p.tapMu.Lock()
		defer p.tapMu.Unlock()
		if cur := p.taps.Load(); cur != nil {
			var rest taps
			for _, o := range *cur {
				if o != t {
					rest = append(rest, o)
				}
			}
			if len(rest) == 0 {
				p.taps.Store(nil)
			} else {
				p.taps.Store(&rest)
			}
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.skipped
	}, nil
}

// pipelineNamed is the running pipeline called name, nil when none.
func (h *Host) pipelineNamed(name string) *pipeline {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.pipes {
		if p.name == name {
			return p
		}
	}
	return nil
}

// tapInput shows it, settled as o for reason, to the open taps.
func (p *pipeline) tapInput(ts *taps, it *item, o Outcome, reason string) {
	now := time.Now()
	for _, t := range *ts {
		if !t.allow(now) {
			continue
		}
		windowJSON(it)
		m := it.m
		tid := traceIDOf(m.Properties)
		if tid == "" && it.b != nil && it.b.span != nil {
			tid = it.b.span.SpanContext().TraceID().String()
		}
		t.fn(TapEvent{Time: now, Pipeline: p.name, Kind: TapInput, Topic: m.Topic, Key: m.Key, MessageID: m.ID.String(),
			TraceID: tid, Payload: truncated(m.Payload, t.opts.MaxPayload), Size: len(m.Payload),
			Outcome: o.String(), Reason: reason})
	}
}

// tapOutput shows an output of it to topic to the open taps.
func (p *pipeline) tapOutput(ts *taps, it *item, topic string, m *pool.Message) {
	now := time.Now()
	for _, t := range *ts {
		if !t.allow(now) {
			continue
		}
		tid := traceIDOf(m.Properties)
		if tid == "" {
			tid = traceIDOf(it.m.Properties)
		}
		if tid == "" && it.b != nil && it.b.span != nil {
			tid = it.b.span.SpanContext().TraceID().String()
		}
		t.fn(TapEvent{Time: now, Pipeline: p.name, Kind: TapOutput, Topic: topic, Key: m.Key, TraceID: tid,
			Payload: truncated(m.Payload, t.opts.MaxPayload), Size: len(m.Payload)})
	}
}

// traceIDOf reads the trace id of a W3C traceparent property
// (version-traceid-parentid-flags), "" when there is none.
func traceIDOf(props map[string]string) string {
	tp := props[msgtrace.PropertyTraceParent]
	_, rest, ok := strings.Cut(tp, "-")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "-")
	if !ok || len(id) != 32 {
		return ""
	}
	return id
}

// truncated is a copy of the first n bytes of b.
func truncated(b []byte, n int) []byte {
	return append([]byte(nil), b[:min(len(b), n)]...)
}
