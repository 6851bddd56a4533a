package subscribe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/subscribe"
)

// Each stops at its count and acknowledges what it handled; with Idle it
// stops once nothing comes; with NoAck what it handled is delivered
// again to the subscription's next consumer; fn's error ends it.
func TestEachCountsIdlesAndAcknowledges(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	o := subscribe.Options{Topics: []string{topic}, Subscription: "each", Type: subscribe.Shared}
	first := newConsumer(ctx, t, c, o)
	// One entry per message: a batch's acknowledged messages come again
	// with the rest of their batch.
	ids := publish(ctx, t, tg.newClient(t, clientConfig{noBatching: true}), topic, 0, 10, nil)

	r, err := first.Each(ctx, subscribe.EachOptions{Count: 4}, func(*subscribe.Message) error { return nil })
	if err != nil || r.N != 4 || r.Last != ids[3] || r.Idle {
		t.Fatalf("Each with Count 4: %+v, %v; want 4 messages up to %s", r, err, ids[3])
	}
	var got []string
	r, err = first.Each(ctx, subscribe.EachOptions{Idle: 300 * time.Millisecond, NoAck: true}, func(m *subscribe.Message) error {
		got = append(got, string(m.Payload))
		return nil
	})
	if err != nil || r.N != 6 || !r.Idle || r.Last != ids[9] {
		t.Fatalf("Each with Idle: %+v, %v; want the other 6, then idle", r, err)
	}
	if got[0] != string(payload(4)) {
		t.Fatalf("after the first 4 came %q", got[0])
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := first.Close(cctx); err != nil {
		t.Fatal(err)
	}

	// The 6 not acknowledged come again; the 4 acknowledged do not.
	again := newConsumer(ctx, t, c, o)
	boom := errors.New("boom")
	var redelivered []string
	r, err = again.Each(ctx, subscribe.EachOptions{}, func(m *subscribe.Message) error {
		redelivered = append(redelivered, string(m.Payload))
		if len(redelivered) == 6 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || r.N != 5 {
		t.Fatalf("Each ended with %+v, %v; want fn's error at the 6th", r, err)
	}
	for _, p := range redelivered {
		if p < string(payload(4)) {
			t.Fatalf("acknowledged message %q delivered again (all: %q)", p, redelivered)
		}
	}
}
