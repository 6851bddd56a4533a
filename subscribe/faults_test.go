package subscribe_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
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
	topic := topicName(t)

	f := cl.AddFault(broker.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 3})
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "retry"})
	if f.Fired() != 3 {
		t.Fatalf("the fault fired %d times, want 3", f.Fired())
	}
	publish(ctx, t, c, topic, 0, 3, nil)
	checkSequence(t, receiveN(ctx, t, cons, 3, true), 0)

	cl.AddFault(broker.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 3})
	_, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: "giveup",
		Retries: pool.OperationRetries{Attempts: 2}})
	var se *subscribe.SubscribeError
	if !errors.As(err, &se) || !errors.Is(err, pulsarwire.ErrServiceNotReady) || !errors.Is(err, pool.ErrRetriesExhausted) {
		t.Fatalf("New = %v, want the Subscribe error wrapping ServiceNotReady after 2 attempts", err)
	}

	// A final answer is not retried.
	f = cl.AddFault(broker.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_AuthorizationError, Count: 5})
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
	topic := topicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "back", ReceiverQueue: 10})
	publish(ctx, t, c, topic, 0, 5, nil)
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 0)

	f := cl.AddFault(broker.Fault{Command: pb.BaseCommand_SUBSCRIBE, Topic: topic, Err: pb.ServerError_ServiceNotReady, Count: 4})
	cl.DropConnections(-1)
	publish(ctx, t, c, topic, 5, 30, nil)
	checkSequence(t, receiveN(ctx, t, cons, 30, true), 5)
	if f.Fired() != 4 {
		t.Fatalf("the fault fired %d times, want 4", f.Fired())
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
		topic := topicName(t)
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
	if n := len(c.BrokerConns()); n < 3 {
		t.Fatalf("the client has %d broker connections, want one per broker: %v", n, c.BrokerConns())
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
