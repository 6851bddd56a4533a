package clientrun

import (
	"context"
	"time"

	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry/clienttrace"
)

// ConsumeOptions are one `streamrun consume`.
type ConsumeOptions struct {
	Conn
	// Subscribe is the subscription. Required: as subscribe.New takes it.
	Subscribe subscribe.Options
	// Each says when to stop and whether to acknowledge, as
	// subscribe.Consumer.Each. Default: every message, acknowledged,
	// until ctx ends.
	Each subscribe.EachOptions
	// Tracing, when set, gives each message a "process" span around the
	// handling function. Default nil: none.
	Tracing *clienttrace.Tracing
	// Subscribed is told the topics subscribed to, once subscribing
	// succeeded (it waits, under Client's retries, for an Exclusive
	// subscription in use or a broker not ready). Default nil.
	Subscribed func(topics []string)
}

// ConsumeResult is what a Consume that subscribed received.
type ConsumeResult struct {
	subscribe.EachResult
	// Elapsed runs from subscribed to the last message handled, or to
	// the stop.
	Elapsed time.Duration
}

// Consume connects, subscribes, hands each message to fn (acknowledged
// once fn returns nil, unless o.Each.NoAck) until o.Each says stop or
// ctx ends, and closes. Failing before it subscribed it returns a nil
// result; afterwards, the result and the error that ended it (ctx's
// when it ended).
func Consume(ctx context.Context, o ConsumeOptions, fn func(*subscribe.Message) error) (*ConsumeResult, error) {
	c, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := subscribe.New(ctx, c, o.Subscribe)
	defer func() {
		cctx, cancel := o.closing(ctx)
		defer cancel()
		if cons != nil {
			cons.Close(cctx)
		}
		c.Close(cctx)
	}()
	if err != nil {
		return nil, err
	}
	if o.Subscribed != nil {
		o.Subscribed(cons.Topics())
	}
	start := time.Now()
	handle := fn
	if o.Tracing != nil {
		handle = func(m *subscribe.Message) error {
			if span := o.Tracing.Process(m, cons.Subscription()); span != nil {
				defer span.End()
			}
			return fn(m)
		}
	}
	r, err := cons.Each(ctx, o.Each, handle)
	return &ConsumeResult{EachResult: r, Elapsed: time.Since(start)}, err
}
