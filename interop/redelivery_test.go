package interop

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// A negatively acked message comes back, on every subscription type. On
// Shared and KeyShared its redelivery count rises by one each time; on
// Exclusive and Failover Apache Pulsar keeps no count (the Go client asks
// for all unacked messages again and they come back with count 0), and
// neither does the embedded broker.
func TestNackRedeliveryCount(t *testing.T) {
	for _, typ := range []pulsar.SubscriptionType{pulsar.Shared, pulsar.KeyShared, pulsar.Exclusive, pulsar.Failover} {
		t.Run(subTypeName(typ), func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			c := newClient(t)
			topic := brokertest.TopicName(t)
			cons := subscribe(t, c, pulsar.ConsumerOptions{
				Topic:               topic,
				SubscriptionName:    "nack",
				Type:                typ,
				NackRedeliveryDelay: 100 * time.Millisecond,
			})
			p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
			sendAll(ctx, t, p, 1, func(int) *pulsar.ProducerMessage {
				return &pulsar.ProducerMessage{Payload: payload(0), Key: "k", Properties: map[string]string{"p": "v"}}
			})
			for want := uint32(0); want <= 2; want++ {
				m := receive(ctx, t, cons)
				if string(m.Payload()) != string(payload(0)) || m.Key() != "k" || m.Properties()["p"] != "v" {
					t.Fatalf("delivery %d: got %q key %q props %v", want, m.Payload(), m.Key(), m.Properties())
				}
				wantCount := uint32(0)
				if typ == pulsar.Shared || typ == pulsar.KeyShared {
					wantCount = want
				}
				if m.RedeliveryCount() != wantCount {
					t.Fatalf("delivery %d: RedeliveryCount() = %d, want %d", want, m.RedeliveryCount(), wantCount)
				}
				if want < 2 {
					cons.Nack(m)
				} else if err := cons.Ack(m); err != nil {
					t.Fatal(err)
				}
			}
			expectNothing(ctx, t, cons, 500*time.Millisecond)
		})
	}
}

func subTypeName(typ pulsar.SubscriptionType) string {
	switch typ {
	case pulsar.Exclusive:
		return "Exclusive"
	case pulsar.Shared:
		return "Shared"
	case pulsar.Failover:
		return "Failover"
	case pulsar.KeyShared:
		return "KeyShared"
	}
	return fmt.Sprint(int(typ))
}

// Unacked messages of a consumer that leaves a Shared subscription go to
// the consumer that stays. (Apache Pulsar does not raise their redelivery
// count for this, so the count is not asserted.)
func TestSharedRedeliveryOnClose(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "shared", Type: pulsar.Shared}
	leaver := subscribe(t, c, opts)
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 10, 0)
	checkSequence(t, receiveN(ctx, t, leaver, 10, false), 0)

	stayer := subscribe(t, c, opts)
	leaver.Close()
	checkSequence(t, receiveN(ctx, t, stayer, 10, true), 0)
	expectNothing(ctx, t, stayer, 300*time.Millisecond)
}

// With a dead-letter policy, a message nacked MaxDeliveries times goes to
// the dead-letter topic with its payload, key and properties.
func TestDeadLetterAfterMaxDeliveries(t *testing.T) {
	const maxDeliveries = 3
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	dlq := topic + "-dlqsub-DLQ"
	dead := subscribe(t, c, pulsar.ConsumerOptions{
		Topic:                       dlq,
		SubscriptionName:            "inspect",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	cons := subscribe(t, c, pulsar.ConsumerOptions{
		Topic:               topic,
		SubscriptionName:    "dlqsub",
		Type:                pulsar.Shared,
		NackRedeliveryDelay: 100 * time.Millisecond,
		DLQ:                 &pulsar.DLQPolicy{MaxDeliveries: maxDeliveries, DeadLetterTopic: dlq},
	})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendAll(ctx, t, p, 3, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: payload(i), Key: fmt.Sprint("k", i), Properties: map[string]string{"i": fmt.Sprint(i)}}
	})

	deliveries := map[string]int{}
	maxCount := map[string]uint32{}
	for total := 0; total < 3*maxDeliveries; total++ {
		m := receive(ctx, t, cons)
		deliveries[string(m.Payload())]++
		maxCount[string(m.Payload())] = max(maxCount[string(m.Payload())], m.RedeliveryCount())
		cons.Nack(m)
	}
	got := map[string]pulsar.Message{}
	for len(got) < 3 {
		m := receive(ctx, t, dead)
		got[string(m.Payload())] = m
		if err := dead.Ack(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		k := string(payload(i))
		if deliveries[k] != maxDeliveries || maxCount[k] != maxDeliveries-1 {
			t.Errorf("%s: delivered %d times, last redelivery count %d; want %d and %d", k, deliveries[k], maxCount[k], maxDeliveries, maxDeliveries-1)
		}
		m, ok := got[k]
		if !ok {
			t.Fatalf("%s not in the dead-letter topic (got %v)", k, got)
		}
		if m.Key() != fmt.Sprint("k", i) || m.Properties()["i"] != fmt.Sprint(i) {
			t.Errorf("%s in the DLQ: key %q properties %v", k, m.Key(), m.Properties())
		}
	}
	expectNothing(ctx, t, cons, 500*time.Millisecond)
}
