package subscribe_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/subscribe"
)

// After RedeliverUnacknowledged on a single-active subscription, with
// nothing acknowledged, every message comes again from the first, in
// order and without a gap, even when the broker has reads under way as
// it rewinds: Apache Pulsar 4.0.8 lets such a read move its cursor past
// entries sent with the old consumer epoch, and they never came again
// (an exactly_once pipeline lost them). The messages may start again
// from the first (the consumer asks for everything again when it sees
// the broker skip); one must never be skipped. Fails without subscribe's
// staleWatch on Apache Pulsar.
func TestRedeliverAllLeavesNoGap(t *testing.T) {
	ctx := testContext(t)
	tg := newTarget(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	const n = 2000
	publish(ctx, t, c, topic, 0, n, nil)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s",
		Type: subscribe.Failover, InitialPosition: subscribe.Earliest, ReceiverQueue: 200})
	index := func(m *subscribe.Message) int {
		var i int
		if _, err := fmt.Sscanf(string(m.Payload), "message-%d", &i); err != nil || !bytes.Equal(m.Payload, payload(i)) {
			t.Fatalf("message %s: payload %q", m.ID, m.Payload)
		}
		return i
	}
	// receive takes messages until 0..k-1 have all come, each only
	// after all before it: the broker may send some again (everything,
	// when the consumer asks for it on seeing a skip), never skip one.
	receive := func(what string, k int) {
		t.Helper()
		seen := make([]bool, n)
		for next := 0; next < k; {
			m, err := cons.Receive(ctx)
			if err != nil {
				t.Fatalf("%s: after %d messages: %v", what, next, err)
			}
			i := index(m)
			if i > next {
				t.Fatalf("%s: message %d came before %d (of %d in order)", what, i, next, k)
			}
			seen[i] = true
			for next < n && seen[next] {
				next++
			}
		}
	}
	receive("first delivery", 100)
	for round := 0; round < 30; round++ {
		if err := cons.RedeliverUnacknowledged(); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			// Back to back, as an exactly_once pipeline does when the
			// transaction after an aborted one aborts too.
			if err := cons.RedeliverUnacknowledged(); err != nil {
				t.Fatal(err)
			}
		}
		receive(fmt.Sprintf("round %d", round), 50+(round*137)%(n-100))
	}
	if err := cons.RedeliverUnacknowledged(); err != nil {
		t.Fatal(err)
	}
	receive("to the end", n)
}
