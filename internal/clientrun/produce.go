package clientrun

import (
	"context"
	"time"

	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/telemetry/clienttrace"
)

// ProduceOptions are one `streamrun produce`.
type ProduceOptions struct {
	Conn
	// Topic is where the messages go. Required.
	Topic string
	// Source is the messages: an input's lines, or generated ones.
	Source msglines.Source
	// Rate is messages per second. Default 0: as fast as the broker
	// takes them.
	Rate float64
	// Tracing, when set, gives each message a "send" span. Default nil:
	// none.
	Tracing *clienttrace.Tracing
	// Opened is told, once Source is open and before the first message
	// goes, how many messages it holds (-1: not known ahead, an input's
	// lines). Default nil.
	Opened func(total int)
	// Progress is told how publishing goes, as
	// pool.PublishOptions.Progress. Default nil.
	Progress func(pool.PublishResult)
}

// ProduceResult is what a Produce that started publishing did.
type ProduceResult struct {
	pool.PublishResult
	// Total is how many messages Source held: Sent when that was not
	// known ahead.
	Total int
	// Elapsed runs from the first message to the client closed.
	Elapsed time.Duration
	// Interrupted says ctx ended before publishing did.
	Interrupted bool
	// CloseErr is closing the client's error.
	CloseErr error
}

// A SourceError is Source.Open's: an input that does not open (an
// *os.PathError), a fixed payload larger than the broker takes (a
// *msglines.TooLargeError).
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// Produce connects, publishes o.Source to o.Topic, waits for every
// receipt and closes. Failing before the first message (connecting, the
// source, the producer) it returns a nil result and the error; once
// publishing began, the result and pool.Producer.Publish's error.
func Produce(ctx context.Context, o ProduceOptions) (*ProduceResult, error) {
	c, err := o.connect(ctx)
	if err != nil {
		return nil, err
	}
	closeClient := func() error {
		cctx, cancel := o.closing(ctx)
		defer cancel()
		return c.Close(cctx)
	}
	next, total, stopSource, err := o.Source.Open(ctx, c)
	if err != nil {
		_ = closeClient()
		return nil, &SourceError{err}
	}
	defer stopSource()
	p, err := c.Producer(ctx, o.Topic)
	if err != nil {
		_ = closeClient()
		return nil, err
	}
	if o.Opened != nil {
		o.Opened(total)
	}
	start := time.Now()
	po := pool.PublishOptions{Rate: o.Rate, ReceiptTimeout: o.CloseTimeout, Progress: o.Progress}
	if o.Tracing != nil {
		po.Wrap = func(m pool.Message, done func(pulsarwire.MessageID, error)) (pool.Message, func(pulsarwire.MessageID, error)) {
			return o.Tracing.Send(p.Topic(), m, done)
		}
	}
	res, err := p.Publish(ctx, next, po)
	r := &ProduceResult{PublishResult: res, Total: total, Interrupted: ctx.Err() != nil}
	r.CloseErr = closeClient()
	r.Elapsed = time.Since(start)
	if r.Total < 0 {
		r.Total = res.Sent
	}
	return r, err
}
