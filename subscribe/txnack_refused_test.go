package subscribe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// A commit whose held acknowledgement of several entries is refused
// (one of them acknowledged before, by a transaction that committed)
// aborts, and the other entries come again: none is lost, and the one
// committed does not come again. Apache Pulsar refuses such an ACK whole
// and takes every entry it names off the consumer's unacknowledged ones
// all the same, so that neither the abort nor the consumer asking for
// them by id brings them back (docs/reliability.md, "Exactly once";
// the embedded broker does the same). Both brokers, Shared and
// Key_Shared.
func TestTxnAckRefusedInTheCommitComesAgain(t *testing.T) {
	for name, typ := range map[string]subscribe.Type{"Shared": subscribe.Shared, "KeyShared": subscribe.KeyShared} {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			tg := newTxnTarget(t)
			c := tg.newClient(t, clientConfig{noBatching: true})
			topic := brokertest.TopicName(t)
			cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", Type: typ, InitialPosition: subscribe.Earliest})
			const n = 6
			publish(ctx, t, c, topic, 0, n, func(i int, m *pool.Message) { m.Key = fmt.Sprint("k", i%3) })
			ms := receiveN(ctx, t, cons, n, false)
			checkSequence(t, ms, 0)

			first := begin(ctx, t, c, time.Minute)
			if err := cons.AckWithTxn(ctx, ms[0], first); err != nil {
				t.Fatalf("ack %s in the first: %v", ms[0].ID, err)
			}
			if err := first.Commit(ctx); err != nil {
				t.Fatalf("commit the first: %v", err)
			}
			// A copy of ms[0] handled again, with the others: their ACK
			// names an entry acknowledged for good.
			second := begin(ctx, t, c, time.Minute)
			for _, m := range ms {
				if err := cons.AckWithTxn(ctx, m, second); err != nil {
					t.Fatalf("held ack of %s in the second: %v", m.ID, err)
				}
			}
			err := second.Commit(ctx)
			if !errors.Is(err, pool.ErrTransactionAborted) || !errors.Is(err, pulsarwire.ErrTransactionConflict) {
				t.Fatalf("commit the second: got %v, want ErrTransactionAborted with TransactionConflict", err)
			}
			t.Logf("refused: %v", err)

			// Everything but ms[0] comes again, each once.
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			seen := map[string]int{}
			for len(seen) < n-1 {
				m, err := cons.Receive(rctx)
				if err != nil {
					t.Fatalf("after the abort %d of the %d messages acknowledged only in it came again (%v): the rest are lost", len(seen), n-1, seen)
				}
				seen[string(m.Payload)]++
				if string(m.Payload) == string(ms[0].Payload) {
					t.Fatalf("%s, committed in the first transaction, came again", m.ID)
				}
				if err := cons.Ack(ctx, m); err != nil {
					t.Fatalf("ack %s: %v", m.ID, err)
				}
			}
			for p, k := range seen {
				if k != 1 {
					t.Errorf("%s came %d times", p, k)
				}
			}
			expectNothing(ctx, t, cons, time.Second)
		})
	}
}
