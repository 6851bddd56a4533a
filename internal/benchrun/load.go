package benchrun

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// publisher publishes the run's messages: Count of them, or for
// Duration, at Rate, each payload stamped with its publish time
// (Payload), round-robin over its topics, keys round-robin over Keys.
type publisher struct {
	o     *Options
	ps    []*pool.Producer
	meter *Meter
	keys  []string

	// receipts counts the receipts that came back (ok or not); ok the
	// successful ones.
	receipts, ok atomic.Int64
	wg           sync.WaitGroup
}

// newPublisher opens a producer per topic, some at a time: thousands of
// topics one after the other would take a round trip each.
func (b *Bench) newPublisher(ctx context.Context, topics []string, m *Meter) (*publisher, error) {
	pub := &publisher{o: &b.o, ps: make([]*pool.Producer, len(topics)), meter: m}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i, t := range topics {
		g.Go(func() error {
			p, err := b.client.Producer(gctx, t)
			if err != nil {
				return fmt.Errorf("producer on %s: %w", t, err)
			}
			pub.ps[i] = p
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range b.o.Keys {
		pub.keys = append(pub.keys, keyName(i))
	}
	return pub, nil
}

// keyName is the key of the publisher's i-th key (message n has key
// n mod Options.Keys); the state check counts by it too.
func keyName(i int) string { return "key-" + strconv.Itoa(i) }

// run publishes until Count or Duration (or CountCap) or ctx ends, then waits up
// to CloseTimeout for the outstanding receipts. onReceipt, when not
// nil, is called with each successful receipt and its send time. It
// returns the number of messages sent.
func (pub *publisher) run(ctx context.Context, onReceipt func(sent time.Time)) (int64, error) {
	o := pub.o
	start := time.Now()
	deadline := start.Add(o.Duration)
	var n int64
	for ctx.Err() == nil {
		if o.Count > 0 && n >= o.Count || o.CountCap > 0 && n >= o.CountCap {
			break
		}
		now := time.Now()
		if o.Count == 0 && !now.Before(deadline) {
			break
		}
		if o.Rate > 0 {
			due := start.Add(time.Duration(float64(n) / o.Rate * float64(time.Second)))
			if wait := due.Sub(now); wait > 0 {
				sleep(ctx, wait)
				now = time.Now()
			}
		}
		msg := pool.Message{Payload: Payload(o.Size, now)}
		if len(pub.keys) > 0 {
			msg.Key = pub.keys[n%int64(len(pub.keys))]
		}
		pub.wg.Add(1)
		pub.ps[n%int64(len(pub.ps))].SendAsync(ctx, msg, func(_ pulsarwire.MessageID, err error) {
			defer pub.wg.Done()
			if err != nil {
				pub.meter.Failed(err)
			} else {
				pub.ok.Add(1)
				if onReceipt != nil {
					onReceipt(now)
				}
			}
			pub.receipts.Add(1)
		})
		pub.meter.Sent()
		n++
	}
	return n, pub.wait(n)
}

// wait waits up to CloseTimeout for the receipts of n messages.
func (pub *publisher) wait(n int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), pub.o.CloseTimeout)
	defer cancel()
	for _, p := range pub.ps {
		if err := p.Flush(ctx); err != nil {
			return fmt.Errorf("flush %s: %w", p.Topic(), err)
		}
	}
	done := make(chan struct{})
	go func() { pub.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d of %d receipts from %s within --close-timeout %s", pub.receipts.Load(), n, pub.o.ServiceURL, pub.o.CloseTimeout)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// receiver reads a consumer and measures each message, until ctx ends.
type receiver struct {
	cons  *subscribe.Consumer
	meter *Meter
}

// run receives until ctx ends; a canceled ctx is its normal end.
func (r *receiver) run(ctx context.Context) error {
	buf := make([]*subscribe.Message, 1000)
	for {
		k, err := r.cons.ReceiveBatch(ctx, buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		now := time.Now()
		for _, m := range buf[:k] {
			lat, from := Since(now, m.Payload, m.PublishTime)
			r.meter.Received(len(m.Payload), lat, from)
			if err := r.cons.Ack(ctx, m); err != nil {
				return fmt.Errorf("ack on %s: %w", m.Topic, err)
			}
		}
		r.meter.MarkEnd(now)
	}
}

// waitForMessages waits until the meter counted n messages, the receiver
// stopped (failed), or timeout passed; it says which.
func waitForMessages(m *Meter, n int64, recvDone <-chan struct{}, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for m.Messages() < n {
		select {
		case <-recvDone:
			return nil
		case <-deadline.C:
			return fmt.Errorf("%d of %d messages arrived within --drain-timeout %s", m.Messages(), n, timeout)
		case <-tick.C:
		}
	}
	return nil
}
