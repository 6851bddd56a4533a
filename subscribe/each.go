package subscribe

import (
	"context"
	"errors"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// EachOptions shape (*Consumer).Each.
type EachOptions struct {
	// Count stops after this many messages; 0 (the default): no limit.
	Count int64
	// Idle stops once no message came for this long, since the start or
	// the last message; 0 (the default): never.
	Idle time.Duration
	// NoAck leaves every message unacknowledged (it is delivered again
	// to the subscription); by default (false) each is acknowledged once
	// fn returned nil.
	NoAck bool
}

// EachResult is what (*Consumer).Each handled.
type EachResult struct {
	N    int64                // messages handled
	Last pulsarwire.MessageID // the last one's id
	Idle bool                 // it stopped after EachOptions.Idle without a message
}

// errIdle is the cause of a receive that waited EachOptions.Idle.
var errIdle = errors.New("subscribe: idle")

// Each receives messages and hands each to fn, then acknowledges it,
// until o.Count messages were handled, none came for o.Idle, or ctx
// ends (then it returns ctx's error); an error of fn's, of receiving or
// of the acknowledgement ends it with that error.
func (c *Consumer) Each(ctx context.Context, o EachOptions, fn func(*Message) error) (EachResult, error) {
	var r EachResult
	for o.Count == 0 || r.N < o.Count {
		m, err := c.receiveWithin(ctx, o.Idle)
		if errors.Is(err, errIdle) {
			r.Idle = true
			return r, nil
		}
		if err != nil {
			return r, err
		}
		if err := fn(m); err != nil {
			return r, err
		}
		if !o.NoAck {
			if err := c.Ack(ctx, m); err != nil {
				return r, err
			}
		}
		r.N++
		r.Last = m.ID
	}
	return r, nil
}

// receiveWithin waits for the next message, for at most idle when it is
// not 0 (then errIdle).
func (c *Consumer) receiveWithin(ctx context.Context, idle time.Duration) (*Message, error) {
	if idle == 0 {
		return c.Receive(ctx)
	}
	rctx, cancel := context.WithTimeoutCause(ctx, idle, errIdle)
	defer cancel()
	m, err := c.Receive(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), errIdle) {
		return nil, errIdle
	}
	return m, err
}
