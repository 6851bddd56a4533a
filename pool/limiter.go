package pool

import (
	"context"
	"sync"
	"sync/atomic"
)

// limiter is a counting semaphore that blocks, in FIFO order, callers
// asking for more than is left. One acquisition larger than the whole
// limit is let through when nothing else is held, so that it cannot wait
// forever. A limit <= 0 means no limit.
//
// Taking and giving back without waiting are a few atomic operations:
// the mutex and the waiter list are only touched when someone waits.
// That works because a waiter counts itself (waiting) before it looks at
// used for the last time, and a release changes used before it looks at
// waiting: one of the two sees the other (Go's atomics are sequentially
// consistent), so no wake-up is missed.
//
// Why not x/sync/semaphore.Weighted (the same FIFO order): it takes a
// mutex on every acquire and release, 2-4x the cost on the publish path
// (BenchmarkLimiter; docs/pool.md has the figures), and blocks for ever
// on an acquisition larger than its size.
type limiter struct {
	limit   int64
	used    atomic.Int64
	waiting atomic.Int32

	mu      sync.Mutex
	waiters []*limitWaiter
}

type limitWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

func newLimiter(limit int64) *limiter { return &limiter{limit: limit} }

// tryTake takes n if it fits now.
func (l *limiter) tryTake(n int64) bool {
	for {
		used := l.used.Load()
		if used+n > l.limit && used != 0 {
			return false
		}
		if l.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// acquire takes n, waiting while ctx allows.
func (l *limiter) acquire(ctx context.Context, n int64) error {
	if l == nil || l.limit <= 0 {
		return nil
	}
	if l.waiting.Load() == 0 && l.tryTake(n) {
		return nil
	}
	l.mu.Lock()
	l.waiting.Add(1)
	if len(l.waiters) == 0 && l.tryTake(n) {
		l.waiting.Add(-1)
		l.mu.Unlock()
		return nil
	}
	w := &limitWaiter{n: n, ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		if w.granted {
			// Granted just as ctx ended: take it, the caller goes on.
			l.mu.Unlock()
			return nil
		}
		for i, x := range l.waiters {
			if x == w {
				l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
				break
			}
		}
		l.waiting.Add(-1)
		l.wakeLocked() // the next may fit now that w is gone
		l.mu.Unlock()
		return ctx.Err()
	}
}

// release gives n back and wakes the waiters that now fit.
func (l *limiter) release(n int64) {
	if l == nil || l.limit <= 0 || n == 0 {
		return
	}
	l.used.Add(-n)
	if l.waiting.Load() > 0 {
		l.mu.Lock()
		l.wakeLocked()
		l.mu.Unlock()
	}
}

// wakeLocked grants the waiters at the head of the line that fit.
func (l *limiter) wakeLocked() {
	for len(l.waiters) > 0 && l.tryTake(l.waiters[0].n) {
		w := l.waiters[0]
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		l.waiting.Add(-1)
		w.granted = true
		close(w.ready)
	}
}

// blocked reports how many callers wait, for tests.
func (l *limiter) blocked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}
