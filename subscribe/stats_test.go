package subscribe_test

import (
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"

	"github.com/streamrun/streamrun/subscribe"
)

// Permits count down as the broker pushes messages and Backlog is what
// the broker reports: unacknowledged entries count, acknowledged ones not
// (the messages here are published one per entry, as Pulsar counts the
// backlog in entries).
func TestPermitsAndBacklog(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "stats", ReceiverQueue: 100})
	if got := cons.Permits(); got != 100 {
		t.Fatalf("permits before any message: %d, want 100", got)
	}
	publish(ctx, t, c, topic, 0, 10, nil)
	var ms []*subscribe.Message
	for range 10 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	// Fewer than half the queue taken: no FLOW yet, 10 permits used.
	if got := cons.Permits(); got != 90 {
		t.Errorf("permits after 10 messages: %d, want 90", got)
	}
	n, err := cons.Backlog(ctx)
	if err != nil || n != 10 {
		t.Errorf("backlog before acknowledging: %d, %v; want 10", n, err)
	}
	for _, m := range ms[:4] {
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	brokertest.Eventually(t, 30*time.Second, "the backlog to fall to 6", func() bool { n, err := cons.Backlog(ctx); return err == nil && n == 6 })
}

// LastMessageID: none on a topic without messages; then the id of the
// last message published (its receipt's). Both brokers.
func TestLastMessageID(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "last", InitialPosition: subscribe.Earliest})
	if _, ok, err := cons.LastMessageID(ctx); ok || err != nil {
		t.Fatalf("last message id of an empty topic: ok %v, %v; want none", ok, err)
	}
	ids := publish(ctx, t, c, topic, 0, 3, nil)
	id, ok, err := cons.LastMessageID(ctx)
	if !ok || err != nil || id.Compare(ids[2]) != 0 {
		t.Fatalf("last message id: %v ok %v, %v; want %v", id, ok, err, ids[2])
	}
}
