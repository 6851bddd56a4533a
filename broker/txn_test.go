package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Transactions on the wire, against what Apache Pulsar 4.0.8 with
// transactionCoordinatorEnabled=true answers (checked with a raw client
// against it): codes and messages word for word; where the embedded
// broker deliberately differs, the test says so.

func txnsOn(o *broker.Options) { o.Transactions = true }

type txnID = pulsarwire.TxnID

func (p *peer) newTxn(ttlMs uint64) txnID {
	p.t.Helper()
	rid := p.rid()
	r := p.request(&pb.CommandNewTxn{RequestId: proto.Uint64(rid), TxnTtlSeconds: proto.Uint64(ttlMs), TcId: proto.Uint64(0)}, rid)
	if err := errOf(r); err != nil {
		p.t.Fatalf("new txn: %v", err)
	}
	return txnID{Most: r.GetNewTxnResponse().GetTxnidMostBits(), Least: r.GetNewTxnResponse().GetTxnidLeastBits()}
}

func (p *peer) addPartition(id txnID, topics ...string) *pb.BaseCommand {
	p.t.Helper()
	rid := p.rid()
	return p.request(&pb.CommandAddPartitionToTxn{RequestId: proto.Uint64(rid), TxnidMostBits: proto.Uint64(id.Most),
		TxnidLeastBits: proto.Uint64(id.Least), Partitions: topics}, rid)
}

func (p *peer) addSub(id txnID, topic, sub string) *pb.BaseCommand {
	p.t.Helper()
	rid := p.rid()
	return p.request(&pb.CommandAddSubscriptionToTxn{RequestId: proto.Uint64(rid), TxnidMostBits: proto.Uint64(id.Most),
		TxnidLeastBits: proto.Uint64(id.Least), Subscription: []*pb.Subscription{{Topic: proto.String(topic), Subscription: proto.String(sub)}}}, rid)
}

func (p *peer) endTxn(id txnID, a pb.TxnAction) *pb.BaseCommand {
	p.t.Helper()
	rid := p.rid()
	return p.request(&pb.CommandEndTxn{RequestId: proto.Uint64(rid), TxnidMostBits: proto.Uint64(id.Most),
		TxnidLeastBits: proto.Uint64(id.Least), TxnAction: a.Enum()}, rid)
}

// sendTxn publishes m in transaction id and returns the receipt or the
// refusal. inMetadata puts the id in the message's metadata too (the Java
// client and ours do; pulsar-client-go v0.19 does not).
func (p *peer) sendTxn(pid, seq uint64, m msg, id txnID, inMetadata bool) *pb.BaseCommand {
	p.t.Helper()
	f, err := pulsarwire.ParseFrame(sendFrame(pid, seq, m)[4:])
	if err != nil {
		p.t.Fatal(err)
	}
	s, md := f.Cmd.GetSend(), f.Metadata
	s.TxnidMostBits, s.TxnidLeastBits = proto.Uint64(id.Most), proto.Uint64(id.Least)
	if inMetadata {
		md.TxnidMostBits, md.TxnidLeastBits = proto.Uint64(id.Most), proto.Uint64(id.Least)
	}
	b, err := pulsarwire.AppendPayloadCommand(nil, f.Cmd, md, f.Payload)
	if err != nil {
		p.t.Fatal(err)
	}
	p.write(b)
	return p.expect(fmt.Sprintf("answer to SEND %d", seq), func(c *pb.BaseCommand) bool {
		return (c.GetType() == pb.BaseCommand_SEND_RECEIPT && c.GetSendReceipt().GetSequenceId() == seq) ||
			(c.GetType() == pb.BaseCommand_SEND_ERROR && c.GetSendError().GetSequenceId() == seq)
	}).Cmd
}

func (p *peer) ackTxn(cid uint64, id txnID, cumulative bool, ids ...*pb.MessageIdData) *pb.BaseCommand {
	p.t.Helper()
	rid := p.rid()
	typ := pb.CommandAck_Individual
	if cumulative {
		typ = pb.CommandAck_Cumulative
	}
	return p.request(&pb.CommandAck{ConsumerId: proto.Uint64(cid), AckType: typ.Enum(), MessageId: ids, RequestId: proto.Uint64(rid),
		TxnidMostBits: proto.Uint64(id.Most), TxnidLeastBits: proto.Uint64(id.Least)}, rid)
}

// wantRefusal checks an answer's code and message.
func wantRefusal(t *testing.T, what string, c *pb.BaseCommand, code pb.ServerError, msg string) {
	t.Helper()
	se, ok := errOf(c).(*pulsarwire.ServerError)
	if !ok || se.Code != code || se.Message != msg {
		t.Errorf("%s: got %v, want %s %q", what, c, code, msg)
	}
}

func wantOK(t *testing.T, what string, c *pb.BaseCommand) {
	t.Helper()
	if err := errOf(c); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func notFound(id txnID) string {
	return "The transaction with this txdID `" + id.String() + "`not found "
}

// The coordinator's answers: connect, begin, register, end; an unknown
// transaction, a second end and an end of an aborted one are
// TransactionNotFound; another coordinator's id TransactionCoordinatorNotFound.
func TestTxnCoordinatorAnswersAsApachePulsar(t *testing.T) {
	c := brokertest.Start(t, txnsOn)
	p := dial(t, c.ServiceURL())
	topic := brokertest.TopicName(t)

	rid := p.rid()
	md := p.request(&pb.CommandPartitionedTopicMetadata{Topic: proto.String(pulsarwire.TxnCoordinatorTopic), RequestId: proto.Uint64(rid)}, rid)
	if n := md.GetPartitionMetadataResponse().GetPartitions(); n != 1 {
		t.Fatalf("coordinators: %d", n)
	}
	rid = p.rid()
	wantOK(t, "TC_CLIENT_CONNECT 0", p.request(&pb.CommandTcClientConnectRequest{RequestId: proto.Uint64(rid), TcId: proto.Uint64(0)}, rid))
	rid = p.rid()
	if r := p.request(&pb.CommandTcClientConnectRequest{RequestId: proto.Uint64(rid), TcId: proto.Uint64(5)}, rid); !strings.Contains(fmt.Sprint(errOf(r)), "ServiceNotReady") {
		t.Errorf("TC_CLIENT_CONNECT 5: %v", r)
	}
	rid = p.rid()
	r := p.request(&pb.CommandNewTxn{RequestId: proto.Uint64(rid), TxnTtlSeconds: proto.Uint64(60000), TcId: proto.Uint64(5)}, rid)
	wantRefusal(t, "NEW_TXN at coordinator 5", r, pb.ServerError_TransactionCoordinatorNotFound, "Transaction coordinator with id 5 not found!")
	if r.GetNewTxnResponse().GetTxnidMostBits() != 5 {
		t.Errorf("NEW_TXN at coordinator 5 names %v", r)
	}

	unknown := txnID{Most: 0, Least: 987654}
	wantRefusal(t, "ADD_PARTITION unknown", p.addPartition(unknown, topic), pb.ServerError_TransactionNotFound, notFound(unknown))
	wantRefusal(t, "ADD_SUBSCRIPTION unknown", p.addSub(unknown, topic, "s"), pb.ServerError_TransactionNotFound, notFound(unknown))
	wantRefusal(t, "END_TXN unknown", p.endTxn(unknown, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(unknown))
	other := txnID{Most: 7, Least: 1}
	wantRefusal(t, "END_TXN at coordinator 7", p.endTxn(other, pb.TxnAction_COMMIT), pb.ServerError_TransactionCoordinatorNotFound, "Transaction coordinator with id 7 not found!")

	id := p.newTxn(60000)
	if id.Most != 0 {
		t.Fatalf("txn %s at coordinator %d", id, id.Most)
	}
	if next := p.newTxn(60000); next.Least != id.Least+1 {
		t.Errorf("ids %s then %s", id, next)
	}
	r = p.addPartition(id, topic)
	wantOK(t, "ADD_PARTITION", r)
	if a := r.GetAddPartitionToTxnResponse(); a.GetTxnidLeastBits() != id.Least || a.TxnidMostBits == nil {
		t.Errorf("ADD_PARTITION's answer names %v", a)
	}
	wantOK(t, "ADD_PARTITION again", p.addPartition(id, topic))
	wantOK(t, "ADD_SUBSCRIPTION", p.addSub(id, topic, "s"))
	wantOK(t, "commit", p.endTxn(id, pb.TxnAction_COMMIT))
	for what, r := range map[string]*pb.BaseCommand{
		"commit again":                  p.endTxn(id, pb.TxnAction_COMMIT),
		"abort after commit":            p.endTxn(id, pb.TxnAction_ABORT),
		"ADD_PARTITION after commit":    p.addPartition(id, topic),
		"ADD_SUBSCRIPTION after commit": p.addSub(id, topic, "s"),
	} {
		wantRefusal(t, what, r, pb.ServerError_TransactionNotFound, notFound(id))
	}
	aborted := p.newTxn(60000)
	wantOK(t, "abort", p.endTxn(aborted, pb.TxnAction_ABORT))
	wantRefusal(t, "commit after abort", p.endTxn(aborted, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(aborted))
}

// Nothing at or after an open transaction's first entry is delivered;
// its commit delivers its entries and those after, in log order, its
// marker taking an entry id (as in Apache Pulsar); an abort hides its
// entries, whether the client put the transaction id in the metadata or
// only in the SEND (where Apache Pulsar, going by the metadata, delivers
// them: apache/pulsar-client-go#1498), batched or not.
func TestTxnPublishIsolation(t *testing.T) {
	c := brokertest.Start(t, txnsOn)
	p := dial(t, c.ServiceURL())
	topic := brokertest.TopicName(t)
	pid := p.producer(topic)
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(cid, 100)

	committed := p.newTxn(60000)
	wantOK(t, "SEND in the transaction", p.sendTxn(pid, 0, msg{payload: "t1"}, committed, true))
	wantOK(t, "SEND in the transaction", p.sendTxn(pid, 1, msg{payload: "t2"}, committed, true))
	p.publish(pid, 2, msg{payload: "p2"})
	p.noMessage(cid, 300*time.Millisecond)
	rid := p.rid()
	last := p.request(&pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid)}, rid).GetGetLastMessageIdResponse().GetLastMessageId()
	if int64(last.GetEntryId()) != -1 || int64(last.GetLedgerId()) != -1 {
		t.Errorf("last message id while the transaction is open: %v, want -1:-1", last)
	}
	wantOK(t, "commit", p.endTxn(committed, pb.TxnAction_COMMIT))
	for i, want := range []string{"t1", "t2", "p2"} {
		if m := p.receive(cid); m.payload != want || m.id.GetEntryId() != uint64(i) {
			t.Fatalf("after the commit got %v, want %q at entry %d", m, want, i)
		}
	}

	for _, batched := range []bool{false, true} {
		for _, inMetadata := range []bool{true, false} {
			seq := uint64(100)
			if batched {
				seq += 10
			}
			if inMetadata {
				seq += 1
			}
			aborted := p.newTxn(60000)
			m := msg{payload: "aborted"}
			if batched {
				m = msg{batch: []string{"aborted-0", "aborted-1"}}
			}
			wantOK(t, "aborted SEND", p.sendTxn(pid, seq, m, aborted, inMetadata))
			after := fmt.Sprintf("after-%d", seq)
			p.publish(pid, seq+1000, msg{payload: after})
			wantOK(t, "abort", p.endTxn(aborted, pb.TxnAction_ABORT))
			if m := p.receive(cid); m.payload != after {
				t.Fatalf("batched=%v, id in metadata=%v: after the abort got %v, want %q", batched, inMetadata, m, after)
			}
		}
	}
	p.noMessage(cid, 300*time.Millisecond)
	rid = p.rid()
	last = p.request(&pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid)}, rid).GetGetLastMessageIdResponse().GetLastMessageId()
	// Entries 0-2 and the commit's marker (3), then per abort its entry,
	// the plain message, its marker: the newest is the last abort's
	// marker (15), the last a consumer could get the plain message before
	// it.
	if last.GetEntryId() != 14 {
		t.Errorf("last message id after the aborts: %v, want entry 14", last)
	}
}
