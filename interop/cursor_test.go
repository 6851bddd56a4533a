package interop

import (
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// A subscription is a cursor the broker keeps across its consumers: after
// a restart the unacked messages come again and the acked ones do not, and
// what is published while no consumer is connected waits for the next one.
// The subscription starts at Latest, so none of this is a rewind.
func TestDurableCursorAcrossRestarts(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	opts := pulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "durable",
		Type:                        pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionLatest,
	}
	cons := subscribe(t, c, opts)
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 100, 0)

	// Ack the first half only; the rest is received but not acked.
	got := receiveN(ctx, t, cons, 100, false)
	checkSequence(t, got, 0)
	for _, m := range got[:50] {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()

	cons = subscribe(t, c, opts)
	checkSequence(t, receiveN(ctx, t, cons, 50, true), 50)
	cons.Close()

	// Published with no consumer connected.
	sendPlain(ctx, t, p, 30, 100)

	cons = subscribe(t, c, opts)
	checkSequence(t, receiveN(ctx, t, cons, 30, true), 100)
	cons.Close()

	// Everything acked: a restart brings nothing back, and the next new
	// message is the first to arrive.
	cons = subscribe(t, c, opts)
	sendPlain(ctx, t, p, 1, 130)
	checkSequence(t, receiveN(ctx, t, cons, 1, true), 130)
}

// Batched messages acked one by one: a restart redelivers the batch that
// was not fully acked and not the batches that were.
func TestDurableCursorBatches(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "durable", Type: pulsar.Exclusive}
	cons := subscribe(t, c, opts)
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 10})
	sendPlain(ctx, t, p, 100, 0)

	got := receiveN(ctx, t, cons, 100, false)
	checkSequence(t, got, 0)
	// Ack up to the first message of a batch that is not the first one.
	cut := -1
	for i := 1; i < len(got); i++ {
		if got[i].ID().BatchIdx() == 0 && i >= 30 {
			cut = i
			break
		}
	}
	if cut < 0 {
		t.Fatalf("messages did not come in batches: ids %v .. %v", got[0].ID(), got[99].ID())
	}
	for _, m := range got[:cut] {
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	cons.Close()

	cons = subscribe(t, c, opts)
	checkSequence(t, receiveN(ctx, t, cons, 100-cut, true), cut)
}
