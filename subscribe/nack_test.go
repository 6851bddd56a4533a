package subscribe_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// A negatively acknowledged message comes back after the nack delay with
// its redelivery count one higher each time, and after MaxDeliveries
// deliveries it goes to the dead-letter topic (<topic>-<subscription>-DLQ)
// with its key and properties, instead of coming back again.
func TestNackRedeliversThenDeadLetters(t *testing.T) {
	const maxDeliveries = 3
	for _, typ := range []subscribe.Type{subscribe.Shared, subscribe.KeyShared} {
		t.Run(typ.Name(), func(t *testing.T) {
			tg := newTarget(t)
			ctx := testContext(t)
			c := tg.newClient(t, clientConfig{noBatching: true})
			topic := brokertest.TopicName(t)
			dead := newConsumer(ctx, t, c, subscribe.Options{
				Topics: []string{topic + "-dlqsub-DLQ"}, Subscription: "inspect", InitialPosition: subscribe.Earliest,
			})
			cons := newConsumer(ctx, t, c, subscribe.Options{
				Topics: []string{topic}, Subscription: "dlqsub", Type: typ,
				NackDelay:  50 * time.Millisecond,
				DeadLetter: &subscribe.DeadLetterPolicy{MaxDeliveries: maxDeliveries},
			})
			ids := publish(ctx, t, c, topic, 0, 3, func(i int, m *pool.Message) {
				m.Key = fmt.Sprint("k", i)
				m.Properties = map[string]string{"i": fmt.Sprint(i)}
			})

			counts := map[string][]uint32{}
			for total := 0; total < 3*maxDeliveries; total++ {
				m := receiveN(ctx, t, cons, 1, false)[0]
				counts[string(m.Payload)] = append(counts[string(m.Payload)], m.RedeliveryCount)
				if err := cons.Nack(m); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 3; i++ {
				if got := fmt.Sprint(counts[string(payload(i))]); got != "[0 1 2]" {
					t.Errorf("%s: redelivery counts %s, want [0 1 2]", payload(i), got)
				}
			}
			got := map[string]*subscribe.Message{}
			for _, m := range receiveN(ctx, t, dead, 3, true) {
				got[string(m.Payload)] = m
			}
			for i := 0; i < 3; i++ {
				m := got[string(payload(i))]
				if m == nil {
					t.Fatalf("%s is not in the dead-letter topic", payload(i))
				}
				if m.Key != fmt.Sprint("k", i) || m.Properties["i"] != fmt.Sprint(i) ||
					m.Properties[subscribe.PropertyRealTopic] != topic || m.Properties[subscribe.PropertyOriginMessageID] != ids[i].String() {
					t.Errorf("%s in the dead-letter topic: key %q properties %v", payload(i), m.Key, m.Properties)
				}
			}
			expectNothing(ctx, t, cons, 300*time.Millisecond)
			brokertest.Eventually(t, testTimeout, "the dead messages acknowledged", func() bool { return tg.backlog(t, topic, "dlqsub") == 0 })
		})
	}
}

// Nacking one message of a batch brings back that message only: the
// others of the batch, acknowledged, are not delivered twice.
func TestNackOneMessageOfABatch(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "nackbatch", NackDelay: 50 * time.Millisecond})
	publish(ctx, t, c, topic, 0, 10, nil)
	msgs := receiveN(ctx, t, cons, 10, false)
	if msgs[9].ID.Entry != msgs[0].ID.Entry || msgs[9].ID.BatchSize != 10 {
		t.Fatalf("the ten messages are not one batch: %s .. %s", msgs[0].ID, msgs[9].ID)
	}
	for i, m := range msgs {
		var err error
		if i == 6 {
			err = cons.Nack(m)
		} else {
			err = cons.Ack(ctx, m)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	again := receiveN(ctx, t, cons, 1, false)[0]
	if string(again.Payload) != string(payload(6)) || again.ID != msgs[6].ID {
		t.Fatalf("after the nack: %s %q, want %s %q", again.ID, again.Payload, msgs[6].ID, payload(6))
	}
	if err := cons.Ack(ctx, again); err != nil {
		t.Fatal(err)
	}
	expectNothing(ctx, t, cons, 300*time.Millisecond)
	brokertest.Eventually(t, testTimeout, "the batch acknowledged", func() bool { return tg.backlog(t, topic, "nackbatch") == 0 })
}

// On Exclusive and Failover a nack brings back, after the delay, every
// unacknowledged message of the topic, in order, as the Java client does.
func TestNackOnExclusiveKeepsOrder(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "nackexcl", Type: subscribe.Exclusive, NackDelay: 50 * time.Millisecond})
	publish(ctx, t, c, topic, 0, 10, nil)
	msgs := receiveN(ctx, t, cons, 10, false)
	for _, m := range msgs[:3] {
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := cons.Nack(msgs[3]); err != nil {
		t.Fatal(err)
	}
	checkSequence(t, receiveN(ctx, t, cons, 7, true), 3)
	expectNothing(ctx, t, cons, 300*time.Millisecond)
}

// NackAfter takes a delay of its own: a message handed back for a short
// while comes back before one handed back earlier for longer.
func TestNackAfterOrdersByDeadline(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "nackafter"})
	publish(ctx, t, c, topic, 0, 2, nil)
	msgs := receiveN(ctx, t, cons, 2, false)
	if err := cons.NackAfter(msgs[0], 700*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := cons.NackAfter(msgs[1], 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	again := receiveN(ctx, t, cons, 2, true)
	if string(again[0].Payload) != string(payload(1)) || string(again[1].Payload) != string(payload(0)) {
		t.Fatalf("came back as %q, %q; want %q first", again[0].Payload, again[1].Payload, payload(1))
	}
}

// Apache Pulsar keeps no redelivery count on Exclusive and Failover: a
// nacked message comes back (in order, with what follows it) with count
// 0, so a dead-letter policy never fires there.
func TestNoRedeliveryCountOnSingleActiveTypes(t *testing.T) {
	for _, typ := range []subscribe.Type{subscribe.Exclusive, subscribe.Failover} {
		t.Run(typ.Name(), func(t *testing.T) {
			tg := newTarget(t)
			ctx := testContext(t)
			c := tg.newClient(t, clientConfig{noBatching: true})
			topic := brokertest.TopicName(t)
			cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "count", Type: typ, NackDelay: 20 * time.Millisecond})
			publish(ctx, t, c, topic, 0, 1, nil)
			for i := 0; i < 3; i++ {
				m := receiveN(ctx, t, cons, 1, false)[0]
				if m.RedeliveryCount != 0 {
					t.Fatalf("delivery %d: redelivery count %d, want 0", i, m.RedeliveryCount)
				}
				if err := cons.Nack(m); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
