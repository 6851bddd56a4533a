package pool

import (
	"context"
	"sync"
)

// limiter is a counting semaphore that blocks, in FIFO order, callers
// asking for more than is left. One acquisition larger than the whole
// limit is let through when nothing else is held, so that it cannot wait
// forever. A limit <= 0 means no limit. Acquiring without waiting does not
// allocate.
type limiter struct {
	limit int64

	mu      sync.Mutex
	used    int64
	waiters []*limitWaiter
}

type limitWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

func newLimiter(limit int64) *limiter { return &limiter{limit: limit} }

func (l *limiter) fits(n int64) bool { return l.used+n <= l.limit || l.used == 0 }

// acquire takes n, waiting while ctx allows.
func (l *limiter) acquire(ctx context.Context, n int64) error {
	if l == nil || l.limit <= 0 {
		return nil
	}
	l.mu.Lock()
	if len(l.waiters) == 0 && l.fits(n) {
		l.used += n
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
		l.wakeLocked() // the head may fit now that w is gone
		l.mu.Unlock()
		return ctx.Err()
	}
}

// release gives n back and wakes the waiters that now fit.
func (l *limiter) release(n int64) {
	if l == nil || l.limit <= 0 || n == 0 {
		return
	}
	l.mu.Lock()
	l.used -= n
	l.wakeLocked()
	l.mu.Unlock()
}

func (l *limiter) wakeLocked() {
	for len(l.waiters) > 0 && l.fits(l.waiters[0].n) {
		w := l.waiters[0]
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		l.used += w.n
		w.granted = true
		close(w.ready)
	}
}

// waiting reports how many callers are blocked, for tests.
func (l *limiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}
