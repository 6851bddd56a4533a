package subscribe_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// Read, transform, write, exactly once: each round's outputs and the
// acknowledgements of its inputs commit together, or not at all. A round
// that fails aborts; its outputs are never delivered and its inputs come
// again. (The broker needs transactions on: Apache Pulsar's
// transactionCoordinatorEnabled=true.)
func ExampleConsumer_AckWithTxn() {
	ctx := context.Background()
	c, err := pool.New(ctx, pool.Options{ServiceURL: "pulsar://127.0.0.1:6650"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	in, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{"orders"}, Subscription: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close(ctx)

	for {
		tx, err := c.BeginTransaction(ctx, time.Minute)
		if errors.Is(err, pool.ErrTransactionsOff) {
			log.Fatal("the broker has transactions off")
		} else if err != nil {
			log.Fatal(err)
		}
		round := func() error {
			// A hundred inputs or so, and whole batches: a batch's
			// messages are acknowledged in one transaction.
			var m *subscribe.Message
			for n := 0; n < 100 || !endsBatch(m); n++ {
				if m, err = in.Receive(ctx); err != nil {
					return err
				}
				// Commit waits for the receipts, and aborts instead if one
				// publish failed: no need to wait for each.
				out := pool.Message{Payload: bill(m.Payload), Key: m.Key, Txn: tx}
				c.PublishAsync(ctx, "invoices", out, nil)
				if err := in.AckWithTxn(ctx, m, tx); err != nil {
					return err
				}
			}
			return tx.Commit(ctx)
		}
		if err := round(); err != nil {
			log.Print(err)
			tx.Abort(ctx) // a no-op error if Commit already ended it
		}
	}
}

func bill(order []byte) []byte { return order }

// endsBatch reports whether m is the last message of its batch (or is
// not batched).
func endsBatch(m *subscribe.Message) bool {
	return m.ID.BatchIndex < 0 || m.ID.BatchIndex == m.ID.BatchSize-1
}
