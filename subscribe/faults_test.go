package subscribe_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	"github.com/streamrun/streamrun/subscribe"
)

// Subscribing runs under OperationRetries: a broker that answers "not
// now" three times is asked a fourth time, and the consumer starts; with
// fewer attempts than that, New fails with the Subscribe error carrying
// the broker's answer.
func TestSubscribeRetriesWhatTheBrokerRefusesForNow(t *testing.T) {
	tg := newTarget(t)
	cl := tg.embedded(t, "fault injection")
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{retryDelay: 20 * time.Millisecond})
	topic := brokertest.TopicName(t)

	f := brokertest.Faults(t, cl).Add(faults.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 3})
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "retry"})
	if f.Fired() != 3 {
		t.Fatalf("the fault fired %d times, want 3", f.Fired())
	}
	publish(ctx, t, c, topic, 0, 3, nil)
	checkSequence(t, receiveN(ctx, t, cons, 3, true), 0)

	brokertest.Faults(t, cl).Add(faults.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 3})
	_, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: "giveup",
		Retries: pool.OperationRetries{Attempts: 2}})
	var se *subscribe.SubscribeError
	if !errors.As(err, &se) || !errors.Is(err, pulsarwire.ErrServiceNotReady) || !errors.Is(err, pool.ErrRetriesExhausted) {
		t.Fatalf("New = %v, want the Subscribe error wrapping ServiceNotReady after 2 attempts", err)
	}

	// A final answer is not retried.
	f = brokertest.Faults(t, cl).Add(faults.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_AuthorizationError, Count: 5})
	_, err = subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: "final"})
	if !errors.As(err, &se) || !errors.Is(err, pulsarwire.ErrAuthorizationError) || f.Fired() != 1 {
		t.Fatalf("New = %v after %d tries, want one try and the Subscribe error wrapping AuthorizationError", err, f.Fired())
	}
	f.Remove()
}

// A consumer that reconnects while the broker still refuses keeps
// trying, then gets its permits again and carries on.
func TestReconnectRetriesUntilTheBrokerTakesItBack(t *testing.T) {
	tg := newTarget(t)
	cl := tg.embedded(t, "fault injection")
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{retryDelay: 20 * time.Millisecond})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "back", ReceiverQueue: 10})
	publish(ctx, t, c, topic, 0, 5, nil)
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 0)

	f := brokertest.Faults(t, cl).Add(faults.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 4})
	cl.DropConnections(-1)
	publish(ctx, t, c, topic, 5, 30, nil)
	checkSequence(t, receiveN(ctx, t, cons, 30, true), 5)
	if f.Fired() != 4 {
		t.Fatalf("the fault fired %d times, want 4", f.Fired())
	}
}

// Acknowledgements held for a part that is reconnecting do not count
// toward AckGroupSize: meanwhile the other parts' acknowledgements are
// still grouped, not sent one add at a time, and the held ones go once
// the part is back.
func TestAcksHeldForAReconnectingPartKeepGrouping(t *testing.T) {
	tg := newTarget(t)
	cl := tg.embedded(t, "fault injection")
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{retryDelay: 20 * time.Millisecond})
	away, stays := brokertest.TopicName(t), brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{away, stays}, Subscription: "held",
		AckGroupTime: time.Hour, AckGroupSize: 1000})
	publish(ctx, t, c, away, 0, 1000, nil)
	publish(ctx, t, c, stays, 0, 10, nil)
	var awayMsgs, staysMsgs []*subscribe.Message
	for _, m := range receiveN(ctx, t, cons, 1010, false) {
		if m.Topic == away {
			awayMsgs = append(awayMsgs, m)
		} else {
			staysMsgs = append(staysMsgs, m)
		}
	}
	staysBacklog := tg.backlog(t, stays, "held")
	if staysBacklog <= 0 || len(awayMsgs) != 1000 {
		t.Fatalf("%d messages from %s, backlog %d on %s: want 1000 and some", len(awayMsgs), away, staysBacklog, stays)
	}

	// The part of away cannot subscribe again until the fault goes.
	f := brokertest.Faults(t, cl).Add(faults.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: away, Err: pb.ServerError_ServiceNotReady})
	defer f.Remove()
	tg.disconnect(t, away)
	brokertest.Eventually(t, testTimeout, "the part of "+away+" to be refused", func() bool { return f.Fired() > 0 })

	// 1000 messages held for away, then 10 for stays: fewer than the
	// group size, so they wait (AckGroupTime is an hour).
	for _, m := range append(awayMsgs, staysMsgs...) {
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if b := tg.backlog(t, stays, "held"); b != staysBacklog {
		t.Fatalf("backlog of %s went from %d to %d: its acknowledgements were sent at once, not grouped, while %s reconnected",
			stays, staysBacklog, b, away)
	}

	f.Remove()
	brokertest.Eventually(t, testTimeout, "the held acknowledgements of "+away, func() bool { return tg.backlog(t, away, "held") == 0 })
	if b := tg.backlog(t, stays, "held"); b != staysBacklog {
		t.Fatalf("backlog of %s went from %d to %d when %s came back, want it still grouped", stays, staysBacklog, b, away)
	}
}

// With several brokers, each owning a share of the topics, a consumer of
// topics on all of them follows the lookups' redirects and reconnects to
// each owner after it restarts.
func TestTopicsSpreadOverSeveralBrokers(t *testing.T) {
	tg := newTarget(t, func(o *broker.Options) { o.Brokers = 3 })
	cl := tg.embedded(t, "several brokers in one process")
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	var topics []string
	owners := map[int]bool{}
	for len(owners) < 3 {
		topic := brokertest.TopicName(t)
		topics = append(topics, topic)
		owners[cl.OwnerOf(topic)] = true
	}
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: topics, Subscription: "spread"})
	for i, topic := range topics {
		publish(ctx, t, c, topic, 100*i, 10, nil)
	}
	got := map[string]int{}
	for _, m := range receiveN(ctx, t, cons, 10*len(topics), true) {
		got[m.Topic]++
	}
	for _, topic := range topics {
		if got[topic] != 10 {
			t.Fatalf("%d messages from %s (owner %d), want 10", got[topic], topic, cl.OwnerOf(topic))
		}
	}
	if n := c.Stats().Connections; n < 3 {
		t.Fatalf("the client has %d broker connections, want one per broker", n)
	}

	owner := cl.OwnerOf(topics[0])
	if err := cl.RestartBroker(owner); err != nil {
		t.Fatal(err)
	}
	publish(ctx, t, c, topics[0], 1000, 10, nil)
	// Messages whose acknowledgements were still grouped when the broker
	// went away come again: skip those.
	var again []*subscribe.Message
	for len(again) < 10 {
		m := receiveN(ctx, t, cons, 1, true)[0]
		if m.Topic == topics[0] && string(m.Payload) >= string(payload(1000)) {
			again = append(again, m)
		}
	}
	checkSequence(t, again, 1000)
	if !slices.Contains(cons.Topics(), topics[0]) {
		t.Fatal(fmt.Sprint("lost ", topics[0]))
	}
}
