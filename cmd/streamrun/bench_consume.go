package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/streamrun/streamrun/internal/benchrun"
	"github.com/streamrun/streamrun/subscribe"
)

// consume measures receiving: messages per second at the consumer, and
// the latency from each message's publish time to its receipt there.
// With --produce it publishes them too, from this process.
func (b *bench) consume(ctx context.Context) (*benchrun.Result, error) {
	f := b.f
	m := benchrun.NewMeter()
	// The producers first: they create the topics, which a pattern
	// subscription finds when it subscribes.
	var pub *publisher
	var err error
	if f.produce {
		if pub, err = b.newPublisher(ctx, f.topicNames(), m); err != nil {
			return nil, err
		}
	} else {
		b.cond.Rate, b.cond.MessageSize = 0, 0 // what arrives, not what this process publishes
	}
	typ, _ := subscribe.ParseType(f.subType) // checked
	so := subscribe.Options{Topics: f.topicNames(), Subscription: f.subscription, Type: typ, ReceiverQueue: f.receiverQueue}
	if f.pattern {
		so.Topics, so.Pattern = nil, regexp.QuoteMeta(f.topic)+"-[0-9]+"
	}
	if f.position == "earliest" {
		so.InitialPosition = subscribe.Earliest
	}
	cons, err := subscribe.New(ctx, b.client, so)
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", f.topic, err)
	}
	defer b.closeConsumer(cons)
	if f.pattern && len(cons.Topics()) < f.topics {
		return nil, fmt.Errorf("the pattern %s found %d of the %d topics", so.Pattern, len(cons.Topics()), f.topics)
	}
	b.cond.Subscription, b.cond.SubscriptionType, b.cond.ReceiverQueue = f.subscription, typ.Name(), f.receiverQueue
	return b.measureReceiving(ctx, "consume", m, pub, cons)
}

// measureReceiving runs a receiver on cons and, when pub is not nil, the
// publisher; it ends when everything published arrived (or, without a
// publisher, --count messages or --duration), and returns the result.
func (b *bench) measureReceiving(ctx context.Context, command string, m *benchrun.Meter, pub *publisher, cons *subscribe.Consumer) (*benchrun.Result, error) {
	f := b.f
	m.Restart()
	m.StartProgress(ctx, b.cmd.stderr, f.progress)
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
		want = pub.ok.Load()
	case f.count > 0:
		want = f.count
	default:
		sleep(ctx, f.duration)
		want = m.Messages()
	}
	if err == nil {
		err = waitForMessages(m, want, recvDone, f.drainTimeout)
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

// closeConsumer closes cons within --close-timeout.
func (b *bench) closeConsumer(cons *subscribe.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), b.f.closeTimeout)
	defer cancel()
	cons.Close(ctx)
}
