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

// A series begins the next transaction as the one before commits, and
// registers it with the topics that one used: the transaction Begin
// returns has its topic registered before anything is published in it,
// its publishes are still flushed by its commit (the producer hooks
// itself to a registration made ahead as to its own), and what it
// commits is delivered. Close aborts the transaction begun ahead, and
// Begin fails afterwards.
func TestTransactionSeriesBeginsTheNextAheadRegistered(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	tg := &target{Peer: peer, cluster: peer.Cluster}
	// A batch goes out only when the commit flushes it.
	c := newClient(t, tg, Options{OperationRetries: fastRetries, Producer: ProducerOptions{Batching: BatchingOptions{MaxMessages: 1000, MaxDelay: time.Hour}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	part := p.partList()[0].topic
	s, err := c.NewTransactionSeries(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 3
	for round := 0; round < rounds; round++ {
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if reg := tx.inner().Partition(part); (reg != nil) != (round > 0) {
			t.Fatalf("round %d: %s registered ahead: %v, want %v", round, part, reg != nil, round > 0)
		}
		if d := time.Until(tx.Deadline()); d > time.Minute || d < 54*time.Second {
			t.Fatalf("round %d: deadline in %v, want at most a tenth of the minute's timeout gone", round, d)
		}
		col := newCollector(2)
		for i := 0; i < 2; i++ {
			p.SendAsync(ctx, Message{Payload: fmt.Appendf(nil, "r%d-%d", round, i), Txn: tx}, col.cb(i))
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
		col.wait(t, 10*time.Second)
		for i, err := range col.errs {
			if err != nil {
				t.Fatalf("round %d: publish %d: %v", round, i, err)
			}
		}
	}
	rc := subscribeRaw(t, c, topic)
	brokertest.Eventually(t, 10*time.Second, "every committed message", func() bool { return len(rc.all()) == 2*rounds })
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Begin(ctx); !errors.Is(err, ErrTransactionSeriesClosed) {
		t.Fatalf("Begin after Close: got %v, want ErrTransactionSeriesClosed", err)
	}
}

// A transaction begun ahead that waited longer than a tenth of the
// timeout is not handed out: its timeout started too long ago. Begin
// aborts it and begins a fresh one, whose deadline is a whole timeout
// away.
func TestTransactionSeriesDropsAStaleSpare(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	tg := &target{Peer: peer, cluster: peer.Cluster}
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	ctx := brokertest.Context(t, time.Minute)
	const timeout = 3 * time.Second
	s, err := c.NewTransactionSeries(timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(timeout/10 + 200*time.Millisecond)
	before := time.Now()
	tx2, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx2.Deadline().Before(before.Add(timeout)) {
		t.Fatalf("Begin handed out a transaction begun %v before it was called", before.Add(timeout).Sub(tx2.Deadline()))
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Apache Pulsar holds a topic's first transactional entries while it
// takes the topic's first transaction buffer snapshot, and stores the
// producer's entries outside a transaction sent after them meanwhile:
// their receipts come first. That is no entry skipped; the producer
// takes each receipt for its own entry and keeps its connection, so the
// transaction commits and everything is delivered. (Closing the
// connection, as for a skip, failed the transaction's entries and
// aborted it: the campaign's window pipeline, whose changelog takes
// both, at 6a6a714.)
func TestReceiptsOfEntriesOutsideATransactionMayComeFirst(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	tg := &target{Peer: peer, cluster: peer.Cluster}
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	ctx := brokertest.Context(t, time.Minute)
	for round := range 3 {
		topic := brokertest.TopicName(t) + fmt.Sprint(round) // never written in a transaction before
		if _, err := c.Producer(ctx, topic); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, topic, Message{Payload: []byte("before")}); err != nil {
			t.Fatal(err)
		}
		tx, err := c.BeginTransaction(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		reconnects := c.Stats().Reconnects
		const n = 20
		col := newCollector(2 * n)
		for i := range n {
			c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "txn-%d", i), Txn: tx}, col.cb(i))
			c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "out-%d", i)}, col.cb(n+i))
		}
		col.wait(t, 30*time.Second)
		for i, err := range col.errs {
			t.Errorf("round %d: send %d failed: %v", round, i, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
		if r := c.Stats().Reconnects; r != reconnects {
			t.Errorf("round %d: %d reconnects while publishing", round, r-reconnects)
		}
		rc := subscribeRaw(t, c, topic) // from the earliest message
		brokertest.Eventually(t, 10*time.Second, "every message", func() bool { return len(rc.all()) >= 2*n+1 })
		time.Sleep(200 * time.Millisecond)
		if got := rc.all(); len(got) != 2*n+1 {
			t.Fatalf("round %d: %d messages delivered, want %d", round, len(got), 2*n+1)
		}
	}
}

// A transaction's requests to its coordinator are answered on the
// connection's reader, without a goroutine waiting for each (the series'
// NEW_TXN and registrations, the commit's END_TXN). Their failures go
// the way a waiting request's do: "not now" and a lost connection are
// asked again under the client's retries, so the series still hands out
// a transaction and the commit commits; a refusal for good ends the
// commit with ErrTransactionOutcomeUnknown and the refusal.
func TestTxnCoordinatorRequestsFailAsWaitingOnesDo(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	if peer.Pulsar() {
		t.Skip("needs the embedded broker's fault injection")
	}
	tg := &target{Peer: peer, cluster: peer.Cluster}
	c := newClient(t, tg, Options{OperationRetries: fastRetries, Producer: ProducerOptions{Batching: BatchingOptions{MaxMessages: 1000, MaxDelay: time.Hour}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewTransactionSeries(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	fs := brokertest.Faults(t, tg.cluster)
	// Each round's fault hits the request the round's commit makes: the
	// commit's own END_TXN, or the next transaction's NEW_TXN or topic
	// registration, which the series makes as the commit begins.
	rounds := []struct {
		name    string
		fault   faults.Fault
		refused bool // the commit fails: its END_TXN was refused for good
	}{
		{"NEW_TXN not now", faults.Fault{Broker: -1, Command: pb.BaseCommand_NEW_TXN, Err: pb.ServerError_ServiceNotReady, Count: 1}, false},
		{"ADD_PARTITION_TO_TXN not now", faults.Fault{Broker: -1, Command: pb.BaseCommand_ADD_PARTITION_TO_TXN, Err: pb.ServerError_ServiceNotReady, Count: 1}, false},
		// The connection is the producer's too: its publish in flight
		// fails, and the commit aborts instead (or commits, if the
		// receipt came first); the next transaction is still handed out.
		{"NEW_TXN connection lost", faults.Fault{Broker: -1, Command: pb.BaseCommand_NEW_TXN, Drop: true, Count: 1}, false},
		{"END_TXN connection lost", faults.Fault{Broker: -1, Command: pb.BaseCommand_END_TXN, Drop: true, Count: 1}, false},
		{"END_TXN not now", faults.Fault{Broker: -1, Command: pb.BaseCommand_END_TXN, Err: pb.ServerError_ServiceNotReady, Count: 1}, false},
		// Last: its transaction stays open on the broker until its
		// timeout, and readers of the topic stop at its first message.
		{"END_TXN refused", faults.Fault{Broker: -1, Command: pb.BaseCommand_END_TXN, Err: pb.ServerError_NotAllowedError, Message: "commit refused", Count: 1}, true},
	}
	committed := 0
	for _, r := range rounds {
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatalf("%s: begin: %v", r.name, err)
		}
		col := newCollector(1)
		p.SendAsync(ctx, Message{Payload: []byte(r.name), Txn: tx}, col.cb(0))
		var h *faults.Handle
		if r.fault.Command != 0 {
			h = fs.Add(r.fault)
		}
		err = tx.Commit(ctx)
		switch {
		case r.refused:
			if !errors.Is(err, ErrTransactionOutcomeUnknown) || !strings.Contains(err.Error(), "commit refused") {
				t.Fatalf("%s: commit: got %v, want ErrTransactionOutcomeUnknown with the refusal", r.name, err)
			}
		case r.fault.Drop && r.fault.Command == pb.BaseCommand_NEW_TXN && errors.Is(err, ErrTransactionAborted):
		case err != nil:
			t.Fatalf("%s: commit: %v", r.name, err)
		default:
			committed++
			col.wait(t, 10*time.Second)
			if col.errs[0] != nil {
				t.Fatalf("%s: publish: %v", r.name, col.errs[0])
			}
		}
		if h != nil {
			brokertest.Eventually(t, 10*time.Second, r.name+" fired", func() bool { return h.Fired() == 1 })
		}
		// After a lost connection, the next round's publish waits for the
		// producer to be back (one written as the connection closes fails).
		pp := p.partList()[0]
		brokertest.Eventually(t, 10*time.Second, "the producer connected", func() bool {
			pp.mu.Lock()
			defer pp.mu.Unlock()
			return pp.conn != nil && !pp.conn.Closed()
		})
	}
	rc := subscribeRaw(t, c, topic)
	brokertest.Eventually(t, 10*time.Second, "every committed message", func() bool { return len(rc.all()) == committed })
	time.Sleep(200 * time.Millisecond) // nothing of the refused commit may follow
	for _, m := range rc.all() {
		if m.Payload == "END_TXN refused" {
			t.Fatalf("delivered the message of the transaction whose commit was refused")
		}
	}
	if got := len(rc.all()); got != committed {
		t.Fatalf("delivered %d messages, want %d", got, committed)
	}
}

// ConnectTransactionCoordinators says TC_CLIENT_CONNECT_REQUEST to every
// coordinator not connected yet, retrying one that is not ready, and
// nothing to one already connected (Apache Pulsar loads a coordinator,
// and ends its timed-out transactions, only on that request: a read back
// after a broker restart relies on it, docs/reliability.md). A broker
// with transactions off has no coordinator to connect to.
func TestConnectTransactionCoordinatorsSaysConnectOnce(t *testing.T) {
	peer := brokertest.TxnTarget(t)
	if peer.Pulsar() {
		t.Skip("needs the embedded broker's fault injection")
	}
	tg := &target{Peer: peer, cluster: peer.Cluster}
	c := newClient(t, tg, Options{OperationRetries: fastRetries})
	ctx := brokertest.Context(t, time.Minute)
	fs := brokertest.Faults(t, tg.cluster)
	first := fs.Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST, Err: pb.ServerError_ServiceNotReady, Count: 1})
	if err := c.ConnectTransactionCoordinators(ctx); err != nil {
		t.Fatalf("connect: %v", err)
	}
	if first.Fired() != 1 {
		t.Fatalf("the refusal of the first TC_CLIENT_CONNECT_REQUEST fired %d times, want 1", first.Fired())
	}
	again := fs.Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST, Err: pb.ServerError_ServiceNotReady, Count: 1})
	if err := c.ConnectTransactionCoordinators(ctx); err != nil {
		t.Fatalf("connect again: %v", err)
	}
	if again.Fired() != 0 {
		t.Fatalf("a connected coordinator was sent TC_CLIENT_CONNECT_REQUEST again")
	}
	tx, err := c.BeginTransaction(ctx, time.Minute)
	if err != nil {
		t.Fatalf("begin after connecting: %v", err)
	}
	if err := tx.Abort(ctx); err != nil {
		t.Fatal(err)
	}

	off := brokertest.Target(t)
	if off.Pulsar() {
		return
	}
	c2 := newClient(t, &target{Peer: off, cluster: off.Cluster}, Options{OperationRetries: fastRetries})
	if err := c2.ConnectTransactionCoordinators(ctx); !errors.Is(err, ErrTransactionsOff) {
		t.Fatalf("connect on a broker with transactions off: got %v, want ErrTransactionsOff", err)
	}
}
