package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// Transactions, through pulsar-client-go's transaction API, against a
// broker with transactions on (Apache Pulsar's transactionCoordinatorEnabled;
// scripts/pulsar start --name txn). Apache Pulsar's answers, checked
// with these tests, are the embedded broker's spec: a message published
// in a transaction is delivered once it commits and never if it aborts;
// while any transaction is open on a topic nothing after its first
// message is delivered; a message acknowledged in a transaction that
// aborts (or times out) comes again; a second transaction acknowledging
// the same message is refused with TransactionConflict.

// txnTarget is the broker the transaction tests use, one with
// transactions on beside the suite's target (which has them off, as
// Apache Pulsar by default): on the pulsar target, the standalone
// STREAMRUN_PULSAR_TXN_URL names (`scripts/pulsar start --name txn`);
// on the others, a broker of the same kind started with transactions on
// the first time a test asks (startTxnTarget), stopped after the suite.
func txnTarget(t *testing.T) *target {
	t.Helper()
	if tgt.name != "pulsar" {
		txnOnce.Do(func() { txnTgt, txnErr = startTxnTarget() })
		if txnErr != nil {
			t.Fatalf("start a broker with transactions on: %v", txnErr)
		}
		return txnTgt
	}
	url := os.Getenv("STREAMRUN_PULSAR_TXN_URL")
	if url == "" {
		t.Skip("transactions on Apache Pulsar need a standalone with transactions on: " +
			`eval "$(scripts/pulsar start --name txn)" sets STREAMRUN_PULSAR_TXN_URL and _HTTP`)
	}
	return &target{name: "pulsar", serviceURL: url, adminURL: httpURL(envOr("STREAMRUN_PULSAR_TXN_HTTP", "http://127.0.0.1:8281"))}
}

var (
	txnOnce sync.Once
	txnTgt  *target
	txnErr  error
	// txnStop stops the broker startTxnTarget started; nil when none.
	txnStop func()
)

// startTxnTarget starts a broker of the suite's kind (in this process, or
// a `streamrun broker` process) with transactions on.
func startTxnTarget() (*target, error) {
	brokers, err := brokerCount()
	if err != nil {
		return nil, err
	}
	if tgt.name == "process" {
		listen, http, err := freeBrokerAddrs(brokers)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b, err := startBrokerProcess(ctx, brokerArgs{listen: listen, http: http, brokers: brokers, txns: true}, processLog())
		if err != nil {
			return nil, err
		}
		txnStop = func() { b.stop(30 * time.Second) }
		return &target{name: "process", serviceURL: b.serviceURL, adminURL: b.adminURL}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := brokertest.StartMain(ctx, processLog(), slog.LevelDebug, func(o *broker.Options) {
		o.Brokers, o.Transactions = brokers, true
	})
	if err != nil {
		return nil, err
	}
	txnStop = func() { c.Close() }
	return &target{name: "embedded", serviceURL: c.ServiceURL(), adminURL: httpURL(c.AdminURL())}, nil
}

// txnClient is an official Go client with transactions on, connected to
// the transaction target.
func txnClient(t *testing.T) pulsar.Client {
	t.Helper()
	return newClientURL(t, txnTarget(t).serviceURL, func(o *pulsar.ClientOptions) { o.EnableTransaction = true })
}

func newTxn(t *testing.T, c pulsar.Client, timeout time.Duration) pulsar.Transaction {
	t.Helper()
	txn, err := c.NewTransaction(timeout)
	if err != nil {
		t.Fatalf("new transaction: %v", err)
	}
	return txn
}

// sendTxn publishes payload(from) ... payload(from+n-1) inside txn and
// waits for their receipts.
func sendTxn(ctx context.Context, t *testing.T, p pulsar.Producer, txn pulsar.Transaction, n, from int) {
	t.Helper()
	sendAll(ctx, t, p, n, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: payload(from + i), Transaction: txn}
	})
}

// A client asking for transactions of a broker that has them off finds
// no coordinator: the coordinators' topic has no partitions, and
// pulsar-client-go refuses to start.
func TestTransactionsOff(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(testLog(t, "pulsar-client-go"), nil))
	c, err := pulsar.NewClient(pulsar.ClientOptions{URL: tgt.serviceURL, EnableTransaction: true,
		ConnectionTimeout: 10 * time.Second, OperationTimeout: 30 * time.Second,
		Logger: pulsarlog.NewLoggerWithSlog(logger), MetricsRegisterer: prometheus.NewRegistry()})
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, pulsar.ErrTransactionCoordinatorNotEnabled) {
		t.Fatalf("new client with transactions against %s: got %v, want ErrTransactionCoordinatorNotEnabled", tgt.name, err)
	}
}

// What a transaction publishes is delivered once it commits, in order,
// and not before; a message published outside it after its first message
// waits with it, because the broker delivers nothing past an open
// transaction's first message.
//
// Outside means by another producer: pulsar-client-go v0.19's batching
// producer keeps the transaction's id on the SENDs of its later batches
// (fixed with apache/pulsar-client-go#1498 by the open
// apache/pulsar-client-go#1499), which puts them in the transaction.
func TestTxnCommitMakesMessagesVisible(t *testing.T) {
	ctx := testContext(t)
	c := txnClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "txn", Type: pulsar.Shared})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	plain := newProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	txn := newTxn(t, c, time.Minute)
	sendTxn(ctx, t, p, txn, 10, 0)
	sendPlain(ctx, t, plain, 1, 10)
	expectNothing(ctx, t, cons, time.Second)
	if err := txn.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if s := txn.GetState(); s != pulsar.TxnCommitted {
		t.Fatalf("state after commit: %v", s)
	}
	checkSequence(t, receiveN(ctx, t, cons, 11, true), 0)
	expectNothing(ctx, t, cons, 500*time.Millisecond)
}

// What an aborted transaction published is never delivered; what was
// published outside it is, once the abort unblocks the topic.
//
// Apache Pulsar delivers pulsar-client-go's aborted messages all the
// same: the client puts the transaction id on CommandSend only, not in
// the message's metadata (apache/pulsar-client-go#1498), and Apache
// Pulsar's dispatcher tells aborted entries by their metadata. The
// embedded broker isolates by the SEND's transaction id, so they stay
// invisible there.
func TestTxnAbortHidesMessages(t *testing.T) {
	ctx := testContext(t)
	c := txnClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "txn", Type: pulsar.Shared})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	plain := newProducer(t, c, pulsar.ProducerOptions{Topic: topic}) // see TestTxnCommitMakesMessagesVisible
	txn := newTxn(t, c, time.Minute)
	sendTxn(ctx, t, p, txn, 5, 0)
	sendPlain(ctx, t, plain, 1, 5)
	expectNothing(ctx, t, cons, time.Second)
	if err := txn.Abort(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if s := txn.GetState(); s != pulsar.TxnAborted {
		t.Fatalf("state after abort: %v", s)
	}
	if tgt.name == "pulsar" {
		// apache/pulsar-client-go#1498: the aborted five come first.
		checkSequence(t, receiveN(ctx, t, cons, 6, true), 0)
	} else {
		checkSequence(t, receiveN(ctx, t, cons, 1, true), 5)
	}
	expectNothing(ctx, t, cons, 500*time.Millisecond)
}

// A message acknowledged in a transaction that aborts is delivered
// again (on Shared, with its redelivery count raised); one acknowledged
// in a transaction that commits is not.
func TestTxnAbortedAckIsRedelivered(t *testing.T) {
	ctx := testContext(t)
	c := txnClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "txn", Type: pulsar.Shared})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 2, 0)
	ms := receiveN(ctx, t, cons, 2, false)
	checkSequence(t, ms, 0)

	aborted := newTxn(t, c, time.Minute)
	if err := cons.AckWithTxn(ms[0], aborted); err != nil {
		t.Fatalf("ack in a transaction: %v", err)
	}
	committed := newTxn(t, c, time.Minute)
	if err := cons.AckWithTxn(ms[1], committed); err != nil {
		t.Fatalf("ack in a transaction: %v", err)
	}
	if err := aborted.Abort(ctx); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if err := committed.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	m := receive(ctx, t, cons)
	if string(m.Payload()) != string(payload(0)) || m.RedeliveryCount() != 1 {
		t.Fatalf("after the abort: got %q with redelivery count %d, want %q with 1", m.Payload(), m.RedeliveryCount(), payload(0))
	}
	if err := cons.Ack(m); err != nil {
		t.Fatal(err)
	}
	expectNothing(ctx, t, cons, 500*time.Millisecond)
}

// A transaction nobody ends is aborted by the broker when its timeout
// passes: what it published is never delivered, what it acknowledged
// comes again, and the client can no longer commit it.
func TestTxnTimeoutAborts(t *testing.T) {
	ctx := testContext(t)
	c := txnClient(t)
	in, out := brokertest.TopicName(t)+"-in", brokertest.TopicName(t)+"-out"
	inCons := subscribe(t, c, pulsar.ConsumerOptions{Topic: in, SubscriptionName: "txn", Type: pulsar.Shared})
	outCons := subscribe(t, c, pulsar.ConsumerOptions{Topic: out, SubscriptionName: "txn", Type: pulsar.Shared})
	inP := newProducer(t, c, pulsar.ProducerOptions{Topic: in, DisableBatching: true})
	outP := newProducer(t, c, pulsar.ProducerOptions{Topic: out})
	plain := newProducer(t, c, pulsar.ProducerOptions{Topic: out}) // see TestTxnCommitMakesMessagesVisible
	sendPlain(ctx, t, inP, 1, 0)
	m := receive(ctx, t, inCons)

	const timeout = 2 * time.Second
	txn := newTxn(t, c, timeout)
	sendTxn(ctx, t, outP, txn, 3, 100)
	if err := inCons.AckWithTxn(m, txn); err != nil {
		t.Fatalf("ack in a transaction: %v", err)
	}
	// The broker's abort redelivers the acknowledged message: waiting for
	// it is waiting for the timeout.
	again := receive(ctx, t, inCons)
	if string(again.Payload()) != string(payload(0)) || again.RedeliveryCount() != 1 {
		t.Fatalf("after the timeout: got %q with redelivery count %d, want %q with 1", again.Payload(), again.RedeliveryCount(), payload(0))
	}
	// pulsar-client-go marks the transaction timed out on its own clock
	// and refuses to commit it without asking the broker.
	brokertest.Eventually(t, 10*time.Second, "the client to mark the transaction timed out", func() bool { return txn.GetState() == pulsar.TxnTimeout })
	if err := txn.Commit(ctx); err == nil {
		t.Fatal("commit of a timed-out transaction succeeded")
	}
	sendPlain(ctx, t, plain, 1, 200)
	if tgt.name == "pulsar" {
		// apache/pulsar-client-go#1498, as in TestTxnAbortHidesMessages.
		checkSequence(t, receiveN(ctx, t, outCons, 3, true), 100)
	}
	checkSequence(t, receiveN(ctx, t, outCons, 1, true), 200)
	expectNothing(ctx, t, outCons, 500*time.Millisecond)
}

// A message one transaction acknowledged is refused to a second one with
// TransactionConflict (pulsar-client-go shows the code and the broker's
// message in the error's text), and so is acknowledging it again in the
// same one; the first transaction still commits.
func TestTxnAckConflict(t *testing.T) {
	ctx := testContext(t)
	c := txnClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "txn", Type: pulsar.Shared})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 1, 0)
	m := receive(ctx, t, cons)

	first := newTxn(t, c, time.Minute)
	if err := cons.AckWithTxn(m, first); err != nil {
		t.Fatalf("ack in the first transaction: %v", err)
	}
	second := newTxn(t, c, 5*time.Second)
	err := cons.AckWithTxn(m, second)
	if err == nil || !strings.Contains(err.Error(), "TransactionConflict") {
		t.Fatalf("ack in the second transaction: got %v, want TransactionConflict", err)
	}
	t.Logf("second transaction's ack refused: %v", err)
	if err := first.Commit(ctx); err != nil {
		t.Fatalf("commit the first: %v", err)
	}
	// pulsar-client-go marks a transaction whose operation failed as in
	// error: it neither commits nor aborts it (the broker's timeout does).
	if err := second.Commit(ctx); err == nil {
		t.Fatal("commit of the transaction whose ack was refused succeeded")
	}
	expectNothing(ctx, t, cons, time.Second)
}

// The admin API's transaction endpoints, as Apache Pulsar answers them:
// the coordinators, their stats (one open transaction counted), an open
// transaction's metadata (its status, timeout, the topics it published
// to, the subscriptions it acknowledged on), 404 for one that ended.
func TestTxnAdminStats(t *testing.T) {
	ctx := testContext(t)
	tt := txnTarget(t)
	c := txnClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "txn", Type: pulsar.Shared})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 1, 0)
	m := receive(ctx, t, cons)
	txn := newTxn(t, c, time.Minute)
	sendTxn(ctx, t, p, txn, 1, 1)
	if err := cons.AckWithTxn(m, txn); err != nil {
		t.Fatal(err)
	}
	admin := &brokertest.Peer{Admin: tt.adminURL}
	var coords []struct {
		ID               int    `json:"id"`
		BrokerServiceURL string `json:"brokerServiceUrl"`
	}
	json.Unmarshal(admin.AdminDo(t, "GET", "/admin/v3/transactions/coordinators", ""), &coords)
	if len(coords) != 1 || coords[0].ID != 0 || !strings.HasPrefix(coords[0].BrokerServiceURL, "pulsar://") {
		t.Errorf("coordinators: %+v", coords)
	}
	var stats map[string]struct {
		State          string `json:"state"`
		OngoingTxnSize int    `json:"ongoingTxnSize"`
		LeastSigBits   uint64 `json:"leastSigBits"`
	}
	json.Unmarshal(admin.AdminDo(t, "GET", "/admin/v3/transactions/coordinatorStats", ""), &stats)
	id := txn.GetTxnID()
	if s, ok := stats["0"]; !ok || s.State != "Ready" || s.OngoingTxnSize < 1 || s.LeastSigBits < id.LeastSigBits {
		t.Errorf("coordinator stats: %+v", stats)
	}
	path := fmt.Sprintf("/admin/v3/transactions/transactionMetadata/%d/%d", id.MostSigBits, id.LeastSigBits)
	var md struct {
		TxnID              string                     `json:"txnId"`
		Status             string                     `json:"status"`
		TimeoutAt          int64                      `json:"timeoutAt"`
		ProducedPartitions map[string]json.RawMessage `json:"producedPartitions"`
		AckedPartitions    map[string]map[string]any  `json:"ackedPartitions"`
	}
	json.Unmarshal(admin.AdminDo(t, "GET", path, ""), &md)
	if md.TxnID != fmt.Sprintf("(%d,%d)", id.MostSigBits, id.LeastSigBits) || md.Status != "OPEN" || md.TimeoutAt != 60000 ||
		md.ProducedPartitions[topic] == nil || md.AckedPartitions[topic]["txn"] == nil {
		t.Errorf("metadata of an open transaction: %+v", md)
	}
	if err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", tt.adminURL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("The transaction with this txdID `(%d,%d)`not found ", id.MostSigBits, id.LeastSigBits)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), want) {
		t.Errorf("metadata of a committed transaction: %d %s", resp.StatusCode, body)
	}
}
