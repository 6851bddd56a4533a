package subscribe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	"github.com/streamrun/streamrun/subscribe"
)

// Transactions: publishing and acknowledging inside one, against a broker
// with transactions on (brokertest.TxnTarget).

func newTxnTarget(t *testing.T) *target { return &target{brokertest.TxnTarget(t)} }

func begin(ctx context.Context, t *testing.T, c *pool.Client, timeout time.Duration) *pool.Transaction {
	t.Helper()
	tx, err := c.BeginTransaction(ctx, timeout)
	if err != nil {
		t.Fatalf("begin a transaction: %v", err)
	}
	return tx
}

// publishTxn publishes payload(from) ... payload(from+n-1) in tx and waits
// for their receipts.
func publishTxn(ctx context.Context, t *testing.T, c *pool.Client, topic string, tx *pool.Transaction, from, n int) {
	t.Helper()
	publish(ctx, t, c, topic, from, n, func(_ int, m *pool.Message) { m.Txn = tx })
}

// A broker with transactions off has no coordinator: BeginTransaction
// says so. Both brokers, as they start by default.
func TestBeginTransactionOnABrokerWithThemOff(t *testing.T) {
	tg := newTarget(t)
	c := tg.newClient(t, clientConfig{})
	_, err := c.BeginTransaction(testContext(t), time.Minute)
	if !errors.Is(err, pool.ErrTransactionsOff) {
		t.Fatalf("got %v, want ErrTransactionsOff", err)
	}
}

// What a transaction publishes is delivered once it commits, in order;
// nothing published on the topic after its first message is delivered
// before that. What an aborted transaction published never is: this
// client puts the transaction id in the message's metadata as well as in
// the SEND, so Apache Pulsar hides it too (pulsar-client-go's are shown
// there: apache/pulsar-client-go#1498).
func TestTxnPublishCommitAndAbort(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest})

	committed := begin(ctx, t, c, time.Minute)
	if committed.State() != pool.TransactionOpen {
		t.Fatalf("state %v", committed.State())
	}
	publishTxn(ctx, t, c, topic, committed, 0, 10)
	publish(ctx, t, c, topic, 10, 1, nil)
	expectNothing(ctx, t, cons, time.Second)
	if err := committed.Commit(ctx); err != nil {
		t.Fatalf("commit %s: %v", committed, err)
	}
	if committed.State() != pool.TransactionCommitted {
		t.Fatalf("state after commit: %v", committed.State())
	}
	checkSequence(t, receiveN(ctx, t, cons, 11, true), 0)

	aborted := begin(ctx, t, c, time.Minute)
	publishTxn(ctx, t, c, topic, aborted, 100, 5)
	publish(ctx, t, c, topic, 11, 1, nil)
	if err := aborted.Abort(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if aborted.State() != pool.TransactionAborted {
		t.Fatalf("state after abort: %v", aborted.State())
	}
	checkSequence(t, receiveN(ctx, t, cons, 1, true), 11)
	expectNothing(ctx, t, cons, 500*time.Millisecond)

	// An ended transaction takes nothing more.
	_, err := c.Publish(ctx, topic, pool.Message{Payload: payload(999), Txn: committed})
	if !errors.Is(err, pool.ErrTransactionNotOpen) {
		t.Fatalf("publish in a committed transaction: got %v, want ErrTransactionNotOpen", err)
	}
	if err := committed.Commit(ctx); !errors.Is(err, pool.ErrTransactionNotOpen) {
		t.Fatalf("commit twice: got %v, want ErrTransactionNotOpen", err)
	}
}

// A message acknowledged in a transaction that aborts comes again (on
// Shared, with its redelivery count raised); one acknowledged in a
// transaction that commits does not. Acknowledgements held for the
// transaction (AckGroupTime's default) and sent at once (negative) alike.
func TestTxnAckCommitAndAbort(t *testing.T) {
	for _, grouped := range []bool{true, false} {
		name := map[bool]string{true: "held until commit", false: "sent at once"}[grouped]
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			tg := newTxnTarget(t)
			c := tg.newClient(t, clientConfig{noBatching: true})
			topic := brokertest.TopicName(t)
			o := subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest}
			if !grouped {
				o.AckGroupTime = -1
			}
			cons := newConsumer(ctx, t, c, o)
			publish(ctx, t, c, topic, 0, 4, nil)
			ms := receiveN(ctx, t, cons, 4, false)
			aborted, committed := begin(ctx, t, c, time.Minute), begin(ctx, t, c, time.Minute)
			for i, m := range ms {
				tx := aborted
				if i >= 2 {
					tx = committed
				}
				if err := cons.AckWithTxn(ctx, m, tx); err != nil {
					t.Fatalf("ack %s in %s: %v", m.ID, tx, err)
				}
			}
			if err := aborted.Abort(ctx); err != nil {
				t.Fatalf("abort: %v", err)
			}
			if err := committed.Commit(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			// Sent before the abort, the broker sends them again; held,
			// the consumer asks for them again. Both count.
			again := receiveN(ctx, t, cons, 2, true)
			checkSequence(t, again, 0)
			for _, m := range again {
				if m.RedeliveryCount != 1 {
					t.Errorf("%s came again with redelivery count %d, want 1", m.ID, m.RedeliveryCount)
				}
			}
			expectNothing(ctx, t, cons, time.Second)
		})
	}
}

// A transaction that ended takes no more acknowledgements, also on a
// partition it acknowledged on before (where the consumer remembers its
// registration and skips the coordinator): ErrTransactionNotOpen, and the
// message stays unacknowledged.
func TestTxnAckAfterCommit(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 2, nil)
	ms := receiveN(ctx, t, cons, 2, false)
	tx := begin(ctx, t, c, time.Minute)
	if err := cons.AckWithTxn(ctx, ms[0], tx); err != nil {
		t.Fatalf("ack %s: %v", ms[0].ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := cons.AckWithTxn(ctx, ms[1], tx); !errors.Is(err, pool.ErrTransactionNotOpen) {
		t.Fatalf("ack %s in the committed transaction: got %v, want ErrTransactionNotOpen", ms[1].ID, err)
	}
	if err := cons.NackAfter(ms[1], 0); err != nil {
		t.Fatalf("nack: %v", err)
	}
	checkSequence(t, receiveN(ctx, t, cons, 1, true), 1)
}

// A second transaction acknowledging a message the first holds is
// refused with TransactionConflict: at once when acknowledgements are
// sent at once, else by its commit, which aborts instead. The first
// commits.
func TestTxnAckConflict(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	now := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest, AckGroupTime: -1})
	publish(ctx, t, c, topic, 0, 1, nil)
	m := receiveN(ctx, t, now, 1, false)[0]
	first, second, third := begin(ctx, t, c, time.Minute), begin(ctx, t, c, time.Minute), begin(ctx, t, c, time.Minute)
	if err := now.AckWithTxn(ctx, m, first); err != nil {
		t.Fatalf("ack in the first: %v", err)
	}
	err := now.AckWithTxn(ctx, m, second)
	if !errors.Is(err, pulsarwire.ErrTransactionConflict) {
		t.Fatalf("ack in the second: got %v, want TransactionConflict", err)
	}
	t.Logf("refused: %v", err)
	// The same message through a consumer that holds acknowledgements
	// until the commit: the commit aborts.
	cons2 := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s2", InitialPosition: subscribe.Earliest})
	m2 := receiveN(ctx, t, cons2, 1, false)[0]
	if err := cons2.AckWithTxn(ctx, m2, first); err != nil {
		t.Fatalf("ack on s2 in the first: %v", err)
	}
	if err := cons2.AckWithTxn(ctx, m2, third); err != nil {
		t.Fatalf("held ack on s2 in the third: %v", err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatalf("commit the first: %v", err)
	}
	err = third.Commit(ctx)
	if !errors.Is(err, pool.ErrTransactionAborted) || !errors.Is(err, pulsarwire.ErrTransactionConflict) {
		t.Fatalf("commit the third: got %v, want ErrTransactionAborted with TransactionConflict", err)
	}
	if third.State() != pool.TransactionAborted {
		t.Fatalf("third's state %v", third.State())
	}
	second.Abort(ctx)
	expectNothing(ctx, t, now, time.Second)
}

// A transaction past its timeout is aborted by the broker: what it
// acknowledged comes again, what it published is never delivered, and
// its commit is refused (TransactionNotFound; on Apache Pulsar
// InvalidTxnStatus while the abort is under way).
func TestTxnTimeout(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	in, out := brokertest.TopicName(t)+"-in", brokertest.TopicName(t)+"-out"
	inCons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{in}, Subscription: "s", InitialPosition: subscribe.Earliest, AckGroupTime: -1})
	outCons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{out}, Subscription: "s", InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, in, 0, 1, nil)
	m := receiveN(ctx, t, inCons, 1, false)[0]
	tx := begin(ctx, t, c, 2*time.Second)
	publishTxn(ctx, t, c, out, tx, 100, 3)
	if err := inCons.AckWithTxn(ctx, m, tx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	again := receiveN(ctx, t, inCons, 1, true)[0] // the broker's abort sends it again
	if again.ID != m.ID {
		t.Fatalf("after the timeout got %s, want %s", again.ID, m.ID)
	}
	err := tx.Commit(ctx)
	// Apache Pulsar sends the message again while its coordinator is
	// still ending the transaction: a commit arriving then finds it
	// aborting (InvalidTxnStatus), one after finds it gone. Either way it
	// is refused and the transaction failed.
	if !errors.Is(err, pulsarwire.ErrTransactionNotFound) &&
		!(errors.Is(err, pulsarwire.ErrInvalidTxnStatus) && strings.Contains(err.Error(), "ABORTING")) {
		t.Fatalf("commit after the timeout: got %v, want TransactionNotFound (or InvalidTxnStatus while aborting)", err)
	}
	if tx.State() != pool.TransactionFailed {
		t.Fatalf("state %v", tx.State())
	}
	publish(ctx, t, c, out, 200, 1, nil)
	checkSequence(t, receiveN(ctx, t, outCons, 1, true), 200)
	expectNothing(ctx, t, outCons, 500*time.Millisecond)
}

// The messages of a batch belong to one transaction: all acknowledged in
// it, the entry is acknowledged when it commits; one in another is
// refused; a commit with some not acknowledged in it aborts, and the
// whole batch comes again.
func TestTxnAckBatch(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 3, nil) // one batch
	ms := receiveN(ctx, t, cons, 3, false)
	if ms[0].ID.BatchIndex < 0 {
		t.Fatalf("not a batch: %s", ms[0].ID)
	}
	partial, other := begin(ctx, t, c, time.Minute), begin(ctx, t, c, time.Minute)
	if err := cons.AckWithTxn(ctx, ms[0], partial); err != nil {
		t.Fatal(err)
	}
	if err := cons.AckWithTxn(ctx, ms[1], other); !errors.Is(err, subscribe.ErrBatchAcrossTransactions) {
		t.Fatalf("another transaction: got %v, want ErrBatchAcrossTransactions", err)
	}
	if err := cons.Ack(ctx, ms[1]); !errors.Is(err, subscribe.ErrBatchAcrossTransactions) {
		t.Fatalf("outside the transaction: got %v, want ErrBatchAcrossTransactions", err)
	}
	if err := partial.Commit(ctx); !errors.Is(err, subscribe.ErrPartialBatch) || !errors.Is(err, pool.ErrTransactionAborted) {
		t.Fatalf("commit with part of a batch: got %v, want ErrTransactionAborted with ErrPartialBatch", err)
	}
	other.Abort(ctx)
	again := receiveN(ctx, t, cons, 3, false)
	checkSequence(t, again, 0)
	whole := begin(ctx, t, c, time.Minute)
	for _, m := range again {
		if err := cons.AckWithTxn(ctx, m, whole); err != nil {
			t.Fatal(err)
		}
	}
	if err := whole.Commit(ctx); err != nil {
		t.Fatalf("commit the whole batch: %v", err)
	}
	expectNothing(ctx, t, cons, time.Second)
}

// Read, transform, write, exactly once: each round consumes what came,
// publishes one output per input and acknowledges the input, all in one
// transaction; a round that aborts leaves no output and its inputs come
// again. The outputs are every input once, in order.
func TestTxnConsumeTransformProduce(t *testing.T) {
	ctx := testContext(t)
	c := newTxnTarget(t).newClient(t, clientConfig{})
	consumeTransformProduce(ctx, t, c, func(int) *pool.Transaction { return begin(ctx, t, c, time.Minute) }, nil)
}

// consumeTransformProduce runs rounds of read, transform, write: each
// takes a transaction from next, consumes ten or so inputs (whole batches:
// a batch is acknowledged in one transaction), hands them to look (when
// not nil), publishes one output per input and acknowledges the input in
// the transaction, and aborts every third round. It checks that the
// outputs are every input once, in order.
func consumeTransformProduce(ctx context.Context, t *testing.T, c *pool.Client, next func(round int) *pool.Transaction, look func(round int, tx *pool.Transaction, got []*subscribe.Message)) {
	t.Helper()
	in, out := brokertest.TopicName(t)+"-in", brokertest.TopicName(t)+"-out"
	inCons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{in}, Subscription: "work", Type: subscribe.Failover, InitialPosition: subscribe.Earliest})
	outCons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{out}, Subscription: "check", InitialPosition: subscribe.Earliest})
	const n = 60
	for i := 0; i < n; i += 10 {
		publish(ctx, t, c, in, i, 10, nil) // batches of up to 10
	}
	done, round := 0, 0
	for done < n {
		round++
		tx := next(round)
		var got []*subscribe.Message
		for len(got) < 10 || !endsBatch(got[len(got)-1]) {
			m, err := inCons.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
		if look != nil {
			look(round, tx, got)
		}
		for _, m := range got {
			if _, err := c.Publish(ctx, out, pool.Message{Payload: m.Payload, Txn: tx}); err != nil {
				t.Fatal(err)
			}
			if err := inCons.AckWithTxn(ctx, m, tx); err != nil {
				t.Fatal(err)
			}
		}
		if round%3 == 0 {
			if err := tx.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		done += len(got)
	}
	checkSequence(t, receiveN(ctx, t, outCons, n, true), 0)
	expectNothing(ctx, t, outCons, time.Second)
}

func TestTxnEntryMembership(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 3, nil) // one batch
	ms := receiveN(ctx, t, cons, 3, false)
	tx, other := begin(ctx, t, c, time.Minute), begin(ctx, t, c, time.Minute)
	defer other.Abort(ctx)
	if ms[1].InTxn(tx) || cons.PartialInTxn(tx) != 0 {
		t.Fatalf("before any ack: InTxn %v, PartialInTxn %d", ms[1].InTxn(tx), cons.PartialInTxn(tx))
	}
	if err := cons.AckWithTxn(ctx, ms[0], tx); err != nil {
		t.Fatal(err)
	}
	if !ms[1].InTxn(tx) || ms[1].InTxn(other) || cons.PartialInTxn(tx) != 1 || cons.PartialInTxn(other) != 0 {
		t.Fatalf("one of three acknowledged: InTxn %v (other %v), PartialInTxn %d", ms[1].InTxn(tx), ms[1].InTxn(other), cons.PartialInTxn(tx))
	}
	for _, m := range ms[1:] {
		if err := cons.AckWithTxn(ctx, m, tx); err != nil {
			t.Fatal(err)
		}
	}
	if n := cons.PartialInTxn(tx); n != 0 {
		t.Fatalf("the whole entry acknowledged: PartialInTxn %d", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expectNothing(ctx, t, cons, 500*time.Millisecond)
}

// RedeliverUnacknowledged on Failover sends everything unacknowledged
// again, once, and makes what was handed out before Superseded; on Shared
// it refuses.
func TestRedeliverUnacknowledgedSupersedes(t *testing.T) {
	ctx := testContext(t)
	tg := newTarget(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", Type: subscribe.Failover, InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 5, nil)
	ms := receiveN(ctx, t, cons, 5, false)
	if err := cons.Ack(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Superseded() {
			t.Fatalf("%s superseded before any redelivery", m.ID)
		}
	}
	if err := cons.RedeliverUnacknowledged(); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if !m.Superseded() {
			t.Fatalf("%s not superseded after RedeliverUnacknowledged", m.ID)
		}
	}
	again := receiveN(ctx, t, cons, 4, true)
	checkSequence(t, again, 1)
	for _, m := range again {
		if m.Superseded() {
			t.Fatalf("%s, delivered again, reads superseded", m.ID)
		}
	}
	expectNothing(ctx, t, cons, 500*time.Millisecond)

	shared := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "shared"})
	if err := shared.RedeliverUnacknowledged(); !errors.Is(err, subscribe.ErrNotSingleActive) {
		t.Fatalf("Shared: got %v, want ErrNotSingleActive", err)
	}
}

// A batch entry acknowledged whole in a transaction counts all its
// messages off the consumer's unacknowledged ones: the ACK names the
// entry's batch size. Apache Pulsar counts an entry acknowledged in a
// transaction without one as one message, and stops dispatching to a
// Shared consumer at maxUnackedMessagesPerConsumer (50000): an
// exactly_once pipeline on batched input stalled there.
func TestTxnAckBatchCountsEveryMessage(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", Type: subscribe.Shared, InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 50, nil) // one batch
	ms := receiveN(ctx, t, cons, 50, false)
	if ms[0].ID.BatchIndex < 0 {
		t.Fatalf("not a batch: %s", ms[0].ID)
	}
	tx := begin(ctx, t, c, time.Minute)
	for _, m := range ms {
		if err := cons.AckWithTxn(ctx, m, tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Subscriptions map[string]struct {
			UnackedMessages int64 `json:"unackedMessages"`
		} `json:"subscriptions"`
	}
	tg.adminGet(t, brokertest.AdminPath(topic)+"/stats", &st)
	if n := st.Subscriptions["s"].UnackedMessages; n != 0 {
		t.Fatalf("the broker counts %d messages unacknowledged after the whole batch was acknowledged in a committed transaction", n)
	}
}

// An acknowledgement in a transaction past its timeout is not sent: the
// commit aborts instead, and the message comes again when asked for.
// Apache Pulsar would hold an acknowledgement of a transaction its
// coordinator had already aborted as pending on the subscription, so
// that the message never came again (a host stopped past the timeout,
// then going on, left the campaign's eo-failover stuck).
func TestTxnAckPastTheTimeoutIsNotSent(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", Type: subscribe.Failover, InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 2, nil)
	ms := receiveN(ctx, t, cons, 2, false)
	tx := begin(ctx, t, c, time.Second)
	// The first acknowledgement, in time, joins the subscription to the
	// transaction; grouped, it waits for the commit.
	if err := cons.AckWithTxn(ctx, ms[0], tx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	for time.Now().Before(tx.Deadline().Add(time.Second)) {
		time.Sleep(50 * time.Millisecond) // the coordinator aborts it, as if the host were stopped
	}
	if err := cons.AckWithTxn(ctx, ms[1], tx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, subscribe.ErrTransactionPastTimeout) {
		t.Fatalf("commit of a transaction past its timeout: got %v, want ErrTransactionPastTimeout", err)
	}
	if err := cons.RedeliverUnacknowledged(); err != nil {
		t.Fatal(err)
	}
	again := receiveN(ctx, t, cons, 2, false)
	for i, m := range again {
		if m.ID != ms[i].ID {
			t.Fatalf("got %s again, want %s", m.ID, ms[i].ID)
		}
	}
}

// The subscription is registered with the transaction's coordinator in
// the background; held acknowledgements wait for it at the commit. When
// the coordinator refuses it, the acknowledgements were taken (AckWithTxn
// returned nil), the commit aborts with the refusal, and the messages
// come again.
func TestTxnRefusedSubscriptionRegistrationAbortsTheCommit(t *testing.T) {
	ctx := testContext(t)
	tg := newTxnTarget(t)
	cl := tg.embedded(t, "fault injection")
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 0, 3, nil)
	ms := receiveN(ctx, t, cons, 3, false)
	tx := begin(ctx, t, c, time.Minute)
	f := brokertest.Faults(t, cl).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_ADD_SUBSCRIPTION_TO_TXN,
		Err: pb.ServerError_NotAllowedError, Message: "registration refused", Count: 1})
	for _, m := range ms {
		if err := cons.AckWithTxn(ctx, m, tx); err != nil {
			t.Fatalf("ack %s: %v", m.ID, err)
		}
	}
	err := tx.Commit(ctx)
	if !errors.Is(err, pool.ErrTransactionAborted) || !strings.Contains(err.Error(), "registration refused") {
		t.Fatalf("commit: got %v, want ErrTransactionAborted with the registration's refusal", err)
	}
	if f.Fired() != 1 {
		t.Fatalf("the fault fired %d times, want 1", f.Fired())
	}
	checkSequence(t, receiveN(ctx, t, cons, 3, true), 0)
	expectNothing(ctx, t, cons, time.Second)
}

// Read, transform, write in a transaction series: each transaction after
// the first was begun, and registered with the output topic and the
// input's subscription, while the one before committed; its
// acknowledgements wait for that registration as for their own. Rounds
// that abort leave no output and their inputs come again; the outputs
// are every input once, in order.
func TestTxnSeriesConsumeTransformProduce(t *testing.T) {
	ctx := testContext(t)
	c := newTxnTarget(t).newClient(t, clientConfig{})
	series, err := c.NewTransactionSeries(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer series.Close(ctx)
	next := func(int) *pool.Transaction {
		tx, err := series.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	consumeTransformProduce(ctx, t, c, next, func(round int, tx *pool.Transaction, got []*subscribe.Message) {
		if round > 1 {
			if r := (*txn.Txn)(tx).Subscription(got[0].Topic, "work"); r == nil {
				t.Fatalf("round %d: the subscription of %s is not registered ahead", round, got[0].Topic)
			}
		}
	})
}
