package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// PublishOptions shape (*Producer).Publish.
type PublishOptions struct {
	// Rate is how many messages a second to send at most, spaced from
	// the start; 0 (the default): as fast as the producer takes them.
	Rate float64
	// ReceiptTimeout bounds the wait for the last receipts once sending
	// ended, even when ctx ended (an interrupted run still learns what
	// the broker stored). Default 30s.
	ReceiptTimeout time.Duration
	// Wrap, when set, replaces each message and its receipt callback
	// before it is sent: a tracer starts a span there and ends it in the
	// callback. Default nil.
	Wrap func(m Message, done func(pulsarwire.MessageID, error)) (Message, func(pulsarwire.MessageID, error))
	// Progress, when set, is called after each send with the counts so
	// far, on the sending goroutine. Default nil.
	Progress func(PublishResult)
}

// PublishResult counts what (*Producer).Publish sent and what the broker
// answered.
type PublishResult struct {
	Sent   int   // messages handed to the producer
	Acked  int64 // messages the broker stored (receipts)
	Failed int64 // messages that failed
	// LastID is the id of the last message stored; FirstErr the error
	// of the first that failed.
	LastID   pulsarwire.MessageID
	FirstErr error
}

// Publish sends every message next gives, at o.Rate when set, until next
// reports the end (false) or an error, or ctx ends; then it sends the
// open batches and waits, for at most o.ReceiptTimeout, for the receipts
// of everything sent. It returns the counts, and next's error or, when
// receipts are still missing at the timeout, that wait's. A message that
// failed is counted in Failed (FirstErr), not returned as the error.
func (p *Producer) Publish(ctx context.Context, next func(context.Context) (Message, bool, error), o PublishOptions) (PublishResult, error) {
	if o.ReceiptTimeout <= 0 {
		o.ReceiptTimeout = 30 * time.Second
	}
	var r receipts
	start := time.Now()
	sent, srcErr := 0, error(nil)
	for ; ctx.Err() == nil; sent++ {
		if o.Rate > 0 && !waitUntil(ctx, start.Add(time.Duration(float64(sent)/o.Rate*float64(time.Second)))) {
			break
		}
		m, ok, err := next(ctx)
		if err != nil || !ok {
			srcErr = err
			break
		}
		r.all.Add(1)
		done := r.done
		if o.Wrap != nil {
			m, done = o.Wrap(m, done)
		}
		p.SendAsync(ctx, m, done)
		if o.Progress != nil {
			o.Progress(r.snapshot(sent + 1))
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ReceiptTimeout)
	defer cancel()
	waitErr := p.Flush(wctx)
	if waitErr == nil {
		waitErr = r.wait(wctx)
	}
	if waitErr != nil {
		waitErr = fmt.Errorf("waiting for the receipts of %s: %w", p.topic, waitErr)
	}
	return r.snapshot(sent), errors.Join(srcErr, waitErr)
}

// receipts counts the broker's answers to the messages sent.
type receipts struct {
	acked, failed atomic.Int64
	all           sync.WaitGroup
	mu            sync.Mutex
	lastID        pulsarwire.MessageID // guarded by mu
	firstErr      error                // guarded by mu
}

// done is the receipt callback of one message.
func (r *receipts) done(id pulsarwire.MessageID, err error) {
	r.mu.Lock()
	if err != nil {
		r.failed.Add(1)
		if r.firstErr == nil {
			r.firstErr = err
		}
	} else {
		r.acked.Add(1)
		r.lastID = id
	}
	r.mu.Unlock()
	r.all.Done()
}

// wait waits for every callback, while ctx allows.
func (r *receipts) wait(ctx context.Context) error {
	all := make(chan struct{})
	go func() { r.all.Wait(); close(all) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		// The goroutine ends with the last callback, which the client's
		// close gives at the latest.
		return ctx.Err()
	}
}

func (r *receipts) snapshot(sent int) PublishResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return PublishResult{Sent: sent, Acked: r.acked.Load(), Failed: r.failed.Load(), LastID: r.lastID, FirstErr: r.firstErr}
}

// waitUntil waits until due; false when ctx ended first.
func waitUntil(ctx context.Context, due time.Time) bool {
	if wait := time.Until(due); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return ctx.Err() == nil
	}
	return true
}
