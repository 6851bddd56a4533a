package pool

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// After a lost connection a producer resends what awaits receipts, except
// the entries of transactions: the broker may hold one already (its
// receipt was lost), and a copy would be a duplicate inside the
// transaction. They fail instead, with a reason that says so, and the
// transaction's commit aborts it; none of its messages is delivered,
// while a message published outside it afterwards is.
func TestTxnEntriesFailInsteadOfBeingResentAfterALostConnection(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	if peer.Pulsar() {
		t.Skip("needs the embedded broker's fault injection")
	}
	tg := &target{Peer: peer, cluster: peer.Cluster}
	c := newClient(t, tg, Options{OperationRetries: fastRetries, Producer: ProducerOptions{Batching: BatchingOptions{MaxMessages: 10}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	if _, err := c.Producer(ctx, topic); err != nil {
		t.Fatal(err)
	}
	tx, err := c.BeginTransaction(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_SEND, Topic: topic, Drop: true, Count: 1})
	const n = 50
	col := newCollector(n)
	for i := 0; i < n; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "txn-%d", i), Txn: tx}, col.cb(i))
	}
	col.wait(t, 30*time.Second)
	if h.Fired() != 1 || len(col.errs) == 0 {
		t.Fatalf("fault fired %d times, %d of %d sends failed", h.Fired(), len(col.errs), n)
	}
	for _, err := range col.errs {
		if !strings.Contains(err.Error(), "not sent again and the transaction must abort") {
			t.Fatalf("a transactional send failed with %v", err)
		}
	}
	if err := tx.Commit(ctx); !errors.Is(err, ErrTransactionAborted) {
		t.Fatalf("commit: got %v, want ErrTransactionAborted", err)
	}
	if _, err := c.Publish(ctx, topic, Message{Payload: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	rc := subscribeRaw(t, c, topic) // from the earliest message
	brokertest.Eventually(t, 10*time.Second, "the message published after", func() bool { return len(rc.all()) > 0 })
	time.Sleep(200 * time.Millisecond) // nothing of the transaction may follow
	if got := rc.all(); len(got) != 1 || got[0].Payload != "after" {
		t.Fatalf("delivered %v, want only the message published after", got)
	}
}

// A transaction's topic is registered with its coordinator in the
// background while the publishes go on; they are written once it is
// done. When the coordinator refuses it, every message published in the
// transaction to that topic fails with the refusal and the commit aborts
// (nothing of the transaction is delivered), while a message published
// outside it after them, held behind them, goes out.
func TestTxnRefusedRegistrationFailsItsMessagesAndAbortsTheCommit(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	if peer.Pulsar() {
		t.Skip("needs the embedded broker's fault injection")
	}
	tg := &target{Peer: peer, cluster: peer.Cluster}
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	if _, err := c.Producer(ctx, topic); err != nil {
		t.Fatal(err)
	}
	tx, err := c.BeginTransaction(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h := brokertest.Faults(t, tg.cluster).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_ADD_PARTITION_TO_TXN,
		Err: pb.ServerError_NotAllowedError, Message: "registration refused", Count: 1})
	const n = 5
	col := newCollector(n + 1)
	for i := 0; i < n; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "txn-%d", i), Txn: tx}, col.cb(i))
	}
	c.PublishAsync(ctx, topic, Message{Payload: []byte("after")}, col.cb(n))
	col.wait(t, 30*time.Second)
	if h.Fired() != 1 {
		t.Fatalf("fault fired %d times", h.Fired())
	}
	for i := 0; i < n; i++ {
		if err := col.errs[i]; err == nil || !strings.Contains(err.Error(), "registration refused") {
			t.Fatalf("transactional send %d: got %v, want the registration's refusal", i, err)
		}
	}
	if err := col.errs[n]; err != nil {
		t.Fatalf("the send outside the transaction: %v", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, ErrTransactionAborted) {
		t.Fatalf("commit: got %v, want ErrTransactionAborted", err)
	}
	rc := subscribeRaw(t, c, topic) // from the earliest message
	brokertest.Eventually(t, 10*time.Second, "the message published after", func() bool { return len(rc.all()) > 0 })
	time.Sleep(200 * time.Millisecond) // nothing of the transaction may follow
	if got := rc.all(); len(got) != 1 || got[0].Payload != "after" {
		t.Fatalf("delivered %v, want only the message published after", got)
	}
}
