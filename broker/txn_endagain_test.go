package broker_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// An END_TXN asked again once the transaction ended, as a client does
// when the first answer was lost with its connection: whether it
// committed, aborted or timed out, and whatever the second one asks,
// the coordinator answers TransactionNotFound. The answer does not tell
// a commit from an abort, which is why the host treats such an end as
// unknown (docs/runtime.md, "Exactly once"). Both brokers.
func TestTxnEndAskedAgainIsNotFoundWhateverTheOutcome(t *testing.T) {
	peer := brokertest.TxnTarget(t, txnsOn)
	p := dial(t, peer.URL)
	topic := brokertest.TopicName(t)
	p.lookup(pulsarwire.TxnCoordinatorTopic + pulsarwire.PartitionSuffix + "0") // Apache Pulsar serves the coordinator once its topic is looked up
	rid := p.rid()
	wantOK(t, "TC_CLIENT_CONNECT 0", p.request(&pb.CommandTcClientConnectRequest{RequestId: proto.Uint64(rid), TcId: proto.Uint64(0)}, rid))

	committed := p.newTxn(60000)
	wantOK(t, "ADD_PARTITION", p.addPartition(committed, topic))
	wantOK(t, "ADD_SUBSCRIPTION", p.addSub(committed, topic, "s"))
	wantOK(t, "commit", p.endTxn(committed, pb.TxnAction_COMMIT))
	wantRefusal(t, "commit again", p.endTxn(committed, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(committed))
	wantRefusal(t, "abort after commit", p.endTxn(committed, pb.TxnAction_ABORT), pb.ServerError_TransactionNotFound, notFound(committed))

	aborted := p.newTxn(60000)
	wantOK(t, "ADD_PARTITION", p.addPartition(aborted, topic))
	wantOK(t, "abort", p.endTxn(aborted, pb.TxnAction_ABORT))
	wantRefusal(t, "abort again", p.endTxn(aborted, pb.TxnAction_ABORT), pb.ServerError_TransactionNotFound, notFound(aborted))
	wantRefusal(t, "commit after abort", p.endTxn(aborted, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(aborted))

	timedOut := p.newTxn(300)
	wantOK(t, "ADD_PARTITION", p.addPartition(timedOut, topic))
	// Registering again is harmless while it is open and refused once
	// the timeout aborted it.
	brokertest.Eventually(t, 30*time.Second, "the timeout's abort", func() bool {
		return errOf(p.addPartition(timedOut, topic)) != nil
	})
	wantRefusal(t, "commit after the timeout", p.endTxnAfterAbort(timedOut, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(timedOut))
	wantRefusal(t, "abort after the timeout", p.endTxn(timedOut, pb.TxnAction_ABORT), pb.ServerError_TransactionNotFound, notFound(timedOut))
}

// A DropAnswer fault on END_TXN: the broker commits, then drops the
// connection with the answer unsent, so that the client cannot tell; the
// transaction's message is delivered and the commit asked again on a new
// connection is TransactionNotFound. This is the fault the host's tests
// of a commit whose outcome is unknown use.
func TestTxnCommitWhoseAnswerIsDropped(t *testing.T) {
	c := brokertest.Start(t, txnsOn)
	topic := brokertest.TopicName(t)
	h := brokertest.Faults(t, c).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_END_TXN, DropAnswer: true, Count: 1})
	p := dial(t, c.ServiceURL())
	pid := p.producer(topic)
	id := p.newTxn(60000)
	wantOK(t, "SEND in the transaction", p.sendTxn(pid, 0, msg{payload: "committed"}, id, true))
	p.send(&pb.CommandEndTxn{RequestId: proto.Uint64(p.rid()), TxnidMostBits: proto.Uint64(id.Most),
		TxnidLeastBits: proto.Uint64(id.Least), TxnAction: pb.TxnAction_COMMIT.Enum()})
	if !p.closedByBroker() {
		t.Fatal("the connection stayed open")
	}
	for len(p.frames) > 0 {
		if f := <-p.frames; f.Cmd.GetType() == pb.BaseCommand_END_TXN_RESPONSE {
			t.Fatalf("the answer went out: %v", f.Cmd)
		}
	}
	if h.Fired() != 1 {
		t.Fatalf("fault fired %d times", h.Fired())
	}
	q := dial(t, c.ServiceURL())
	wantRefusal(t, "commit asked again", q.endTxn(id, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(id))
	cid := q.subscribe(topic, "s", pb.CommandSubscribe_Exclusive, earliest)
	q.flow(cid, 10)
	if got := q.receive(cid); got.payload != "committed" {
		t.Fatalf("got %v, want the committed message", got)
	}
}
