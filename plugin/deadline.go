package plugin

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// batchContext is the context a handler gets for one batch: the serving
// context's values and cancellation, and the batch's deadline. It starts
// no timer and joins no parent until a handler asks for Done: most
// handlers never do, and context.WithTimeout's timer and its entry in
// the parent's children were 7 % of a plugin process's CPU at batch 100
// (docs/runtime.md, "A batch's deadline without a timer"). Err reads
// the clock instead, so a handler that checks it sees the deadline all
// the same.
type batchContext struct {
	parent   context.Context
	deadline time.Time
	released atomic.Bool // the batch is answered: Err says Canceled

	mu    sync.Mutex // makes inner once
	inner atomic.Pointer[timedContext]
}

// timedContext is what Done makes: context.WithDeadline of the parent.
type timedContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newBatchContext(parent context.Context, timeout time.Duration) *batchContext {
	return &batchContext{parent: parent, deadline: time.Now().Add(timeout)}
}

// Deadline is the batch's, or the parent's when that is earlier.
func (c *batchContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *batchContext) Done() <-chan struct{} { return c.timed().Done() }

func (c *batchContext) Err() error {
	if t := c.inner.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if c.released.Load() {
		return context.Canceled
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value is the parent's; once Done has made the timed context, that
// one's, so that a context derived from this one finds the cancellation
// it belongs to (as context.WithCancel looks for it).
func (c *batchContext) Value(key any) any {
	if t := c.inner.Load(); t != nil {
		return t.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// timed returns the context with the parent's cancellation and the
// batch's deadline, made on the first call.
func (c *batchContext) timed() context.Context {
	if t := c.inner.Load(); t != nil {
		return t.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.inner.Load(); t != nil {
		return t.ctx
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline)
	if c.released.Load() {
		cancel() // asked for after the batch was answered: done already
	}
	c.inner.Store(&timedContext{ctx: ctx, cancel: cancel})
	return ctx
}

// release says the batch is answered: the context is cancelled, and the
// timer, if Done made one, stopped.
func (c *batchContext) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released.Store(true)
	if t := c.inner.Load(); t != nil {
		t.cancel()
	}
}
