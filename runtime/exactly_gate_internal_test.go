package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// A commit waits until its transaction holds no batch entry in part, and
// it must see that under the gate, which orders the acknowledgements: a
// worker that settles an entry's first message into the transaction
// just before the commit takes the gate would otherwise make it commit
// the entry in part, which aborts (ErrPartialBatch) although the rest of
// the entry was about to settle. The interleaving is forced: the worker
// holds the gate for reading until the commit has looked and is waiting
// for it (a writer waiting makes TryRLock fail), then acknowledges the
// entry's first message.
func TestCommitWaitsUnderTheGateForAnEntryBegunJustBefore(t *testing.T) {
	ctx := brokertest.Context(t, time.Minute)
	cl := brokertest.Start(t, func(o *broker.Options) { o.Transactions = true })
	client, err := pool.New(ctx, pool.Options{ServiceURL: cl.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	topic := brokertest.TopicName(t)
	cons, err := subscribe.New(ctx, client, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	prod, err := client.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var sent sync.WaitGroup
	for _, s := range []string{"a", "b"} {
		sent.Add(1)
		prod.SendAsync(ctx, pool.Message{Payload: []byte(s)}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				t.Error(err)
			}
			sent.Done()
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sent.Wait()
	var ms []*subscribe.Message
	for len(ms) < 2 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	if ms[0].ID.BatchIndex < 0 || ms[0].ID.Ledger != ms[1].ID.Ledger || ms[0].ID.Entry != ms[1].ID.Entry {
		t.Fatalf("want one batch entry of two messages, got %s and %s", ms[0].ID, ms[1].ID)
	}
	tx, err := client.BeginTransaction(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &committer{p: &pipeline{cons: cons}, timeout: 20 * time.Second, quit: make(chan struct{})}
	e := &epoch{txn: tx}

	c.gate.RLock() // the worker, settling the entry's first message
	closed := make(chan int)
	go func() {
		c.closeGate(e, false)
		closed <- cons.PartialInTxn(tx) // under the gate: what the commit sends
		c.gate.Unlock()
	}()
	brokertest.Eventually(t, 10*time.Second, "the commit waiting for the gate", func() bool {
		if c.gate.TryRLock() {
			c.gate.RUnlock()
			return false
		}
		return true
	})
	if err := cons.AckWithTxn(ctx, ms[0], tx); err != nil {
		t.Fatal(err)
	}
	c.gate.RUnlock()

	// The other worker settles the rest of the entry when the gate lets it.
	acked := make(chan error, 1)
	go func() {
		c.gate.RLock()
		defer c.gate.RUnlock()
		acked <- cons.AckWithTxn(ctx, ms[1], tx)
	}()
	var partial int
	select {
	case partial = <-closed:
	case <-ctx.Done():
		t.Fatal("the commit never took the gate")
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if partial != 0 {
		err := tx.Commit(ctx)
		t.Fatalf("the commit took the gate with %d entry in part; its commit: %v (want it to wait for the rest of the entry)", partial, err)
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, subscribe.ErrPartialBatch) {
			t.Fatalf("commit: %v", err)
		}
		t.Fatal(err)
	}
}
