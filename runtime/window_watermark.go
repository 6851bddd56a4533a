package runtime

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// watermarks are a pipeline's watermark and its partitions'
// (docs/pipelines.md, "Watermarks"), in Unix milliseconds: a
// partition's is the newest time seen on it less out_of_order; the
// pipeline's the least of the partitions that are not idle, and never
// less than it was. When every partition is idle, it moves on with the
// clock from the newest partition's, by the time since the last message.
// processing: the clock is the watermark, held back to the earliest
// time of a message taken and not placed yet (taken).
type watermarks struct {
	ooo, idle  int64 // ms
	processing bool
	// taken: in processing time, the times of the messages taken whose
	// changelog write has no receipt yet, in runs of one time, earliest
	// first. The clock passes them before they are placed; held back, a
	// window does not fire, nor is forgotten, without a message taken
	// before its end, which would otherwise make it again, alone
	// (TestAProcessingTimeWindowWaitsForAMessageBeingWritten).
	taken []takenRun
	parts map[string]*winPart
	list  []*winPart // parts' values: least walks these for every message
	last  time.Time  // the last message, on any partition
	high  int64
}

type takenRun struct {
	t int64
	n int
}

type winPart struct {
	max  int64
	last time.Time
}

func newWatermarks(ooo, idle time.Duration, processing bool) *watermarks {
	return &watermarks{ooo: ooo.Milliseconds(), idle: idle.Milliseconds(), processing: processing,
		parts: map[string]*winPart{}, high: math.MinInt64}
}

// expect is told that partition topic is read from now on. Until its
// first message, or until it has been idle for idle_timeout, it holds the
// pipeline's watermark where it is: counted only from its first message,
// a partition whose times are behind the others' would find its own
// messages late, the others having moved the watermark past them.
func (wm *watermarks) expect(topic string, now time.Time) {
	if wm.parts[topic] == nil {
		pt := &winPart{max: math.MinInt64, last: now}
		wm.parts[topic] = pt
		wm.list = append(wm.list, pt)
	}
}

// observe is told that a message of time t came on partition topic at now.
func (wm *watermarks) observe(topic string, t int64, now time.Time) {
	pt := wm.parts[topic]
	if pt == nil {
		pt = &winPart{max: math.MinInt64}
		wm.parts[topic] = pt
		wm.list = append(wm.list, pt)
	}
	pt.max = max(pt.max, t)
	pt.last, wm.last = now, now
}

// take is told, in processing time, that a message of time t is being
// written.
func (wm *watermarks) take(t int64) {
	if !wm.processing {
		return
	}
	if n := len(wm.taken); n == 0 || wm.taken[n-1].t < t {
		wm.taken = append(wm.taken, takenRun{t: t, n: 1})
		return
	}
	// The same time, or the clock went back.
	i, ok := slices.BinarySearchFunc(wm.taken, t, func(r takenRun, t int64) int { return cmp.Compare(r.t, t) })
	if ok {
		wm.taken[i].n++
		return
	}
	wm.taken = slices.Insert(wm.taken, i, takenRun{t: t, n: 1})
}

// placed is told, in processing time, that the message of time t taken
// is placed, or comes again.
func (wm *watermarks) placed(t int64) {
	if !wm.processing {
		return
	}
	i, ok := slices.BinarySearchFunc(wm.taken, t, func(r takenRun, t int64) int { return cmp.Compare(r.t, t) })
	if !ok || wm.taken[i].n == 0 {
		return
	}
	wm.taken[i].n--
	for len(wm.taken) > 0 && wm.taken[0].n == 0 {
		wm.taken = wm.taken[1:]
	}
}

// at is the pipeline's watermark at now.
func (wm *watermarks) at(now time.Time) int64 {
	if wm.processing {
		if len(wm.taken) > 0 {
			return min(now.UnixMilli(), wm.taken[0].t)
		}
		return now.UnixMilli()
	}
	wm.high = max(wm.high, wm.least(now))
	return wm.high
}

func (wm *watermarks) least(now time.Time) int64 {
	least, newest, counted := int64(math.MaxInt64), int64(math.MinInt64), false
	for _, pt := range wm.list {
		newest = max(newest, pt.max)
		if now.Sub(pt.last).Milliseconds() >= wm.idle {
			continue
		}
		if pt.max == math.MinInt64 {
			return math.MinInt64 // read, and not heard from yet
		}
		counted = true
		least = min(least, pt.max)
	}
	switch {
	case newest == math.MinInt64:
		return math.MinInt64
	case !counted:
		return newest - wm.ooo + now.Sub(wm.last).Milliseconds()
	}
	return least - wm.ooo
}
