package runtime

import (
	"context"
	"sync"
)

// credits bound the messages a pipeline holds: one is taken for each
// message received and given back when the message is settled. While
// none is free the pipeline receives nothing, so the consumer's queue
// fills, its permits are not granted again, and the broker stops sending:
// backpressure from the handler to the broker with nothing unbounded in
// between.
type credits struct {
	mu    sync.Mutex
	free  int
	total int
	wake  chan struct{} // a receiver waits for a free credit
	idle  chan struct{} // a drain waits for every credit
}

func newCredits(n int) *credits {
	return &credits{free: n, total: n, wake: make(chan struct{}, 1), idle: make(chan struct{}, 1)}
}

// try takes up to max free credits without waiting.
func (c *credits) try(max int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(c.free, max)
	c.free -= n
	return n
}

// acquire takes between 1 and max credits, waiting while none is free.
func (c *credits) acquire(ctx context.Context, max int) (int, error) {
	for {
		if n := c.try(max); n > 0 {
			return n, nil
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// release gives n credits back.
func (c *credits) release(n int) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.free += n
	all := c.free >= c.total
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if all {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// held is the number of credits taken.
func (c *credits) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - c.free
}

// waitAll waits until every credit is back: every message received has
// been settled.
func (c *credits) waitAll(ctx context.Context) error {
	for {
		if c.held() == 0 {
			return nil
		}
		select {
		case <-c.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
