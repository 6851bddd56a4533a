package control

import (
	"context"
	"sync"
	"time"

	"github.com/streamrun/streamrun"
)

// rates samples every pipeline's counts and backlog every interval, so
// that the API answers with rates over the last interval and a recent
// backlog without asking the brokers on every request.
type rates struct {
	run   *streamrun.Run
	every time.Duration

	mu      sync.Mutex
	at      time.Time
	last    map[string]counts // at the last sample
	perSec  map[string]Rates
	backlog map[string]int64 // missing: not known (not running, or the broker did not answer)
}

// counts are what rates are taken of.
type counts struct{ received, acked, deadLettered, settled int64 }

// Rates are a pipeline's rates over the last interval, per second.
type Rates struct {
	Received     float64 `json:"received"`
	Acked        float64 `json:"acked"`
	Settled      float64 `json:"settled"`
	DeadLettered float64 `json:"dead_lettered"`
	// Interval is what they were measured over, in seconds.
	Interval float64 `json:"interval"`
}

func newRates(run *streamrun.Run, every time.Duration) *rates {
	return &rates{run: run, every: every, last: map[string]counts{}, perSec: map[string]Rates{}, backlog: map[string]int64{}}
}

// loop samples until stop closes.
func (r *rates) loop(stop <-chan struct{}) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	r.sample(stop)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.sample(stop)
		}
	}
}

func (r *rates) sample(stop <-chan struct{}) {
	h := r.run.Host()
	now := time.Now()
	stats := h.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), r.every)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	backlog := map[string]int64{}
	for _, st := range stats {
		if n, err := h.Backlog(ctx, st.Pipeline); err == nil {
			backlog[st.Pipeline] = n
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	secs := now.Sub(r.at).Seconds()
	perSec := map[string]Rates{}
	last := map[string]counts{}
	for _, st := range stats {
		c := counts{received: st.Received, acked: st.Acked, deadLettered: st.DeadLettered,
			settled: st.Acked + st.DeadLettered + st.Dropped + st.Filtered + st.Retried}
		last[st.Pipeline] = c
		if p, ok := r.last[st.Pipeline]; ok && !r.at.IsZero() && secs > 0 {
			perSec[st.Pipeline] = Rates{
				Received: float64(c.received-p.received) / secs, Acked: float64(c.acked-p.acked) / secs,
				Settled: float64(c.settled-p.settled) / secs, DeadLettered: float64(c.deadLettered-p.deadLettered) / secs,
				Interval: secs,
			}
		}
	}
	r.at, r.last, r.perSec, r.backlog = now, last, perSec, backlog
}

// of is pipeline's rates and backlog (ok false when not known).
func (r *rates) of(pipeline string) (Rates, int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.backlog[pipeline]
	return r.perSec[pipeline], n, ok
}
