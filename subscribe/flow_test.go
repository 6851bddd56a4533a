package subscribe_test

import (
	"testing"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/subscribe"
)

// The broker sends a consumer no more messages than its receiver queue
// holds: it fills the queue and stops; more permits go out once half the
// queue was taken, never before. Checked from the broker's side.
func TestPermitsBoundWhatTheBrokerSends(t *testing.T) {
	const queue, total = 100, 260
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	publish(ctx, t, c, topic, 0, total, nil)
	cons := newConsumer(ctx, t, c, subscribe.Options{
		Topics: []string{topic}, Subscription: "permits",
		InitialPosition: subscribe.Earliest, ReceiverQueue: queue,
	})
	brokertest.Eventually(t, testTimeout, "the broker to fill the receiver queue", func() bool {
		st := tg.consumerState(t, topic, "permits")
		return st.found && st.dispatched == queue && st.permits == 0
	})
	for i := 1; i <= total; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d: %v", i, err)
		}
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
		st := tg.consumerState(t, topic, "permits")
		if out := st.dispatched - int64(i); out > queue || st.permits < 0 || st.permits+out > queue {
			t.Fatalf("after %d received: the broker dispatched %d and has %d permits: %d outstanding, queue %d",
				i, st.dispatched, st.permits, out, queue)
		}
		if i == queue/2-1 && st.dispatched != queue {
			t.Fatalf("permits granted before half the queue was taken: %d dispatched after %d received", st.dispatched, i)
		}
		if i == queue/2 {
			brokertest.Eventually(t, testTimeout, "permits for half the queue", func() bool {
				return tg.consumerState(t, topic, "permits").dispatched == queue+queue/2
			})
		}
	}
}

// After the connection is lost (embedded: dropped; Apache Pulsar: the
// topic unloaded, so the broker closes the consumer), the consumer
// subscribes again, is granted its permits again, and every message
// arrives (some twice: at least once); Resubscribed counts each
// subscription made again.
func TestReconnectRegrantsPermitsAndLosesNothing(t *testing.T) {
	const total = 3000
	tg := newTarget(t)
	ctx := testContext(t)
	rec := &testkit.Records{}
	c := tg.newClient(t, clientConfig{rec: rec})
	topic := brokertest.TopicName(t)
	publish(ctx, t, c, topic, 0, total, nil)
	cons := newConsumer(ctx, t, c, subscribe.Options{
		Topics: []string{topic}, Subscription: "reconnect",
		InitialPosition: subscribe.Earliest, ReceiverQueue: 100,
	})
	if n := cons.Resubscribed(); n != 0 {
		t.Fatalf("Resubscribed = %d before any loss, want 0", n)
	}
	seen := map[string]bool{}
	drops := 0
	for len(seen) < total {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("receive with %d of %d seen: %v", len(seen), total, err)
		}
		seen[string(m.Payload)] = true
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
		if len(seen) == 700 && drops == 0 || len(seen) == 1900 && drops == 1 {
			drops++
			tg.disconnect(t, topic)
		}
	}
	for i := 0; i < total; i++ {
		if !seen[string(payload(i))] {
			t.Fatalf("%s never arrived", payload(i))
		}
	}
	if n := rec.Count("consumer disconnected") + rec.Count("consumer closed by the broker"); n < 2 {
		t.Fatalf("the consumer reconnected %d times, want 2", n)
	}
	if r := cons.Resubscribed(); r < 2 {
		t.Fatalf("Resubscribed = %d after two losses, want at least 2", r)
	}
	st := tg.consumerState(t, topic, "reconnect")
	if !st.found || st.dispatched == 0 {
		t.Fatalf("after the reconnects the broker's consumer has dispatched %d (found %v)", st.dispatched, st.found)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, testTimeout, "every message acknowledged", func() bool { return tg.backlog(t, topic, "reconnect") == 0 })
}
