package subscribe

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
)

// An acknowledgement in a transaction that races its commit is either in
// the commit or refused: the last message of a batch entry acknowledged
// while the commit looks at the entry must not be accepted (AckWithTxn
// returns nil) while the commit counts the entry in part and aborts
// (ErrPartialBatch), nor be accepted and left out of what the commit
// sends. The race is forced: the acknowledgement stops once it found the
// transaction open until the commit has begun and had time to look.
func TestTxnAckRacingTheCommitIsInItOrRefused(t *testing.T) {
	ctx := brokertest.Context(t, time.Minute)
	cl := brokertest.Start(t, func(o *broker.Options) { o.Transactions = true })
	client, err := pool.New(ctx, pool.Options{ServiceURL: cl.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	topic := brokertest.TopicName(t)
	cons, err := New(ctx, client, Options{Topics: []string{topic}, Subscription: "s", InitialPosition: Earliest})
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
	var ms []*Message
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
	if err := cons.AckWithTxn(ctx, ms[0], tx); err != nil {
		t.Fatal(err)
	}

	stopped, resume := make(chan struct{}), make(chan struct{})
	cons.txnAcks.checked = func() {
		close(stopped)
		<-resume
	}
	acked := make(chan error, 1)
	go func() { acked <- cons.AckWithTxn(ctx, ms[1], tx) }()
	<-stopped
	committed := make(chan error, 1)
	go func() { committed <- tx.Commit(ctx) }()
	brokertest.Eventually(t, 10*time.Second, "the commit begun", func() bool { return tx.State() != pool.TransactionOpen })
	var commitErr error
	select {
	case commitErr = <-committed:
		close(resume)
	case <-time.After(200 * time.Millisecond):
		// Waiting for the acknowledgement: let it finish.
		close(resume)
		commitErr = <-committed
	}
	ackErr := <-acked
	switch {
	case ackErr == nil && commitErr != nil:
		t.Fatalf("the entry's last message was accepted into the transaction, yet the commit failed: %v", commitErr)
	case ackErr != nil && commitErr == nil:
		t.Fatalf("the entry's last message was refused (%v), yet the commit of the entry in part succeeded", ackErr)
	case ackErr != nil && !errors.Is(commitErr, ErrPartialBatch):
		t.Fatalf("refused (%v): the commit failed with %v, want ErrPartialBatch", ackErr, commitErr)
	}
	if commitErr == nil {
		// Committed with the whole entry: the entry is acknowledged on the
		// broker, so a new consumer of the subscription gets nothing.
		cons.Close(ctx)
		again, err := New(ctx, client, Options{Topics: []string{topic}, Subscription: "s", InitialPosition: Earliest})
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close(context.Background())
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if m, err := again.Receive(rctx); err == nil {
			t.Fatalf("committed, yet %s came again: the commit left its acknowledgement out", m.ID)
		}
	}
}
