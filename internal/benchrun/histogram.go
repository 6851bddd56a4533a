package benchrun

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies outside [histMin, histMax] are clamped into it: the
// histogram keeps 3 significant figures from 1 µs to 10 minutes, from a
// local receipt to a backlog read minutes after it was published.
const (
	histMin     = int64(time.Microsecond)
	histMax     = int64(10 * time.Minute)
	histSigFigs = 3
)

// Recorder is a latency histogram safe for concurrent use: receipts
// arrive on connection goroutines. It keeps the whole run and the current
// interval (for the progress line) apart.
type Recorder struct {
	mu       sync.Mutex
	total    *hdrhistogram.Histogram
	interval *hdrhistogram.Histogram
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{
		total:    hdrhistogram.New(histMin, histMax, histSigFigs),
		interval: hdrhistogram.New(histMin, histMax, histSigFigs),
	}
}

// Record adds one latency.
func (r *Recorder) Record(d time.Duration) {
	v := min(max(int64(d), histMin), histMax)
	r.mu.Lock()
	// RecordValue fails only outside the trackable range, excluded above.
	_ = r.total.RecordValue(v)
	_ = r.interval.RecordValue(v)
	r.mu.Unlock()
}

// Interval returns p50 and p99 of what was recorded since the last call,
// and starts a new interval. ok is false when nothing was recorded.
func (r *Recorder) Interval() (p50, p99 time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interval.TotalCount() == 0 {
		return 0, 0, false
	}
	p50 = time.Duration(r.interval.ValueAtQuantile(50))
	p99 = time.Duration(r.interval.ValueAtQuantile(99))
	r.interval.Reset()
	return p50, p99, true
}

// Summary returns the percentiles of the whole run.
func (r *Recorder) Summary() Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.total
	ms := func(v int64) float64 { return float64(v) / float64(time.Millisecond) }
	l := Latency{Count: h.TotalCount()}
	if l.Count == 0 {
		return l
	}
	l.P50 = ms(h.ValueAtQuantile(50))
	l.P99 = ms(h.ValueAtQuantile(99))
	l.P999 = ms(h.ValueAtQuantile(99.9))
	l.Max = ms(h.Max())
	l.Mean = h.Mean() / float64(time.Millisecond)
	return l
}
