package benchrun

import (
	"sync"
	"sync/atomic"
	"time"
)

// timelineStep is the finest a timeline records: a point at most this
// often, so that a long run at a high rate keeps a few MB of points.
const timelineStep = time.Millisecond

// timeline records how many messages had been measured at which times,
// for the rate of the run's middle part (Steady) and the time of its
// first message. Safe for concurrent use.
type timeline struct {
	last atomic.Int64 // Unix ns of the last point; 0: none yet

	mu     sync.Mutex
	points []point
}

type point struct {
	n  int64 // messages measured by then
	at int64 // Unix ns
}

// mark records that n messages had been measured at t, unless the last
// point is less than timelineStep before t.
func (tl *timeline) mark(n int64, t time.Time) {
	ns := t.UnixNano()
	if last := tl.last.Load(); last != 0 && ns-last < int64(timelineStep) {
		return
	}
	tl.mu.Lock()
	if last := tl.last.Load(); last == 0 || ns-last >= int64(timelineStep) {
		tl.points = append(tl.points, point{n: n, at: ns})
		tl.last.Store(ns)
	}
	tl.mu.Unlock()
}

// first is the time of the first point (zero without points).
func (tl *timeline) first() time.Time {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.points) == 0 {
		return time.Time{}
	}
	return time.Unix(0, tl.points[0].at)
}

// steady is the rate, in messages per second, between the first point
// at which 10 % of total messages had been measured and the first at
// which 90 % had, with end (total messages at that time) as the last
// point: the run without its start and its tail. 0 when the points do
// not span that part.
func (tl *timeline) steady(total int64, end time.Time) float64 {
	tl.mu.Lock()
	ps := append(tl.points[:len(tl.points):len(tl.points)], point{n: total, at: end.UnixNano()})
	tl.mu.Unlock()
	if total <= 0 {
		return 0
	}
	lo, hi := reach(ps, (total+9)/10), reach(ps, (total*9+9)/10)
	if lo < 0 || hi <= lo || ps[hi].at <= ps[lo].at {
		return 0
	}
	return float64(ps[hi].n-ps[lo].n) / (float64(ps[hi].at-ps[lo].at) / 1e9)
}

// reach is the index of the first point with at least n messages, or -1.
func reach(ps []point, n int64) int {
	for i, p := range ps {
		if p.n >= n {
			return i
		}
	}
	return -1
}
