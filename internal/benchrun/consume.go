package benchrun

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/streamrun/streamrun/subscribe"
)

// Consume measures receiving: messages per second at the consumer, and
// the latency from each message's publish time to its receipt there.
// With Produce it publishes them too, from this process.
func (b *Bench) Consume(ctx context.Context) (*Result, error) {
	o := &b.o
	m := NewMeter()
	// The producers first: they create the topics, which a pattern
	// subscription finds when it subscribes.
	var pub *publisher
	var err error
	b.writes = o.Produce
	if o.Produce {
		if pub, err = b.newPublisher(ctx, o.topicNames(), m); err != nil {
			return nil, err
		}
	} else {
		b.cond.Rate, b.cond.MessageSize = 0, 0 // what arrives, not what this process publishes
	}
	typ := o.Type
	so := subscribe.Options{Topics: o.topicNames(), Subscription: o.Subscription, Type: typ, ReceiverQueue: o.ReceiverQueue}
	if o.Pattern {
		so.Topics, so.Pattern = nil, regexp.QuoteMeta(o.Topic)+"-[0-9]+"
	}
	if o.Earliest {
		so.InitialPosition = subscribe.Earliest
	}
	cons, err := subscribe.New(ctx, b.client, so)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", o.Topic, err)
	}
	defer b.closeConsumer(cons)
	if o.Pattern && len(cons.Topics()) < o.Topics {
		return nil, fmt.Errorf("the pattern %s found %d of the %d topics", so.Pattern, len(cons.Topics()), o.Topics)
	}
	b.cond.Subscription, b.cond.SubscriptionType, b.cond.ReceiverQueue = o.Subscription, typ.Name(), o.ReceiverQueue
	return b.measureReceiving(ctx, "consume", m, pub, cons, 1)
}

// measureReceiving runs a receiver on cons and, when pub is not nil, the
// publisher; it ends when everything published arrived, perInput
// messages for each (or, without a publisher, Count messages or
// Duration), and returns the result.
func (b *Bench) measureReceiving(ctx context.Context, command string, m *Meter, pub *publisher, cons *subscribe.Consumer, perInput int64) (*Result, error) {
	o := &b.o
	m.Restart()
	m.StartProgress(ctx, o.Progress, o.ProgressEvery)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	recv := &receiver{cons: cons, meter: m}
	recvDone := make(chan struct{})
	var recvErr error
	go func() {
		defer close(recvDone)
		recvErr = recv.run(rctx)
	}()
	var want int64
	var err error
	switch {
	case pub != nil:
		var sent int64
		sent, err = pub.run(ctx, nil)
		err = errors.Join(err, b.sendErrors(m, sent))
		want = pub.ok.Load() * perInput
	case o.Count > 0:
		want = o.Count
	default:
		sleep(ctx, o.Duration)
		want = m.Messages()
	}
	if err == nil {
		err = waitForMessages(m, want, recvDone, o.DrainTimeout)
	}
	stop()
	<-recvDone
	m.StopProgress()
	res := m.Result(command, b.cond)
	if recvErr != nil {
		err = errors.Join(err, fmt.Errorf("receive from %s: %w", cons.Topics(), recvErr))
	}
	return res, err
}
