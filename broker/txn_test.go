package broker_test

import (
	"fmt"
	"io"
	"net/http"
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

// endTxnAfterAbort ends a transaction that a timeout is aborting. The
// abort's visible effects (a redelivery, a refused registration) come
// while it is still ending on the topics, in ABORTING, as in Apache
// Pulsar, and the coordinator forgets the transaction only after that;
// an END_TXN sent meanwhile meets InvalidTxnStatus, so this one asks
// again until the coordinator has let go (10 s at most).
func (p *peer) endTxnAfterAbort(id txnID, a pb.TxnAction) *pb.BaseCommand {
	end := p.endTxn(id, a)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); end = p.endTxn(id, a) {
		se, ok := errOf(end).(*pulsarwire.ServerError)
		if !ok || se.Code != pb.ServerError_InvalidTxnStatus || !strings.Contains(se.Message, "ABORTING") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return end
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

func conflictMsg(topic, sub string, id txnID, what string) string {
	return "org.apache.pulsar.transaction.common.exception.TransactionConflictException: [" + topic + "][" + sub + "] Transaction:" + id.String() + " " + what
}

// Acknowledgements in a transaction: held until it ends, refused to any
// other transaction (and to the same one again) with Apache Pulsar's
// TransactionConflict messages; an abort sends them again, redelivery
// count raised (Shared); a commit makes them final ("already acked
// before" then). On Exclusive a cumulative acknowledgement held by one
// transaction refuses another's. Deliberately unlike Apache Pulsar, an
// acknowledgement in a transaction the coordinator does not have open is
// refused with TransactionNotFound (Pulsar accepts it and holds the
// message for good).
func TestTxnAcksAsApachePulsar(t *testing.T) {
	c := brokertest.Start(t, txnsOn)
	p := dial(t, c.ServiceURL())
	topic := brokertest.TopicName(t)
	pid := p.producer(topic)
	var ids []*pb.MessageIdData
	for i := uint64(0); i < 4; i++ {
		ids = append(ids, p.publish(pid, i, msg{payload: fmt.Sprint("m", i)}).GetMessageId())
	}
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(cid, 100)
	for range ids {
		p.receive(cid)
	}
	at := func(i int) string { return fmt.Sprintf("%d:%d", ids[i].GetLedgerId(), ids[i].GetEntryId()) }
	t1, t2 := p.newTxn(60000), p.newTxn(60000)
	wantOK(t, "ack m0 in t1 (not registered: the broker registers it)", p.ackTxn(cid, t1, false, ids[0]))
	wantRefusal(t, "ack m0 in t1 again", p.ackTxn(cid, t1, false, ids[0]), pb.ServerError_TransactionConflict,
		conflictMsg(topic, "s", t1, "try to ack message:"+at(0)+" (ackSet is null) in pending ack status."))
	wantRefusal(t, "ack m0 in t2", p.ackTxn(cid, t2, false, ids[0]), pb.ServerError_TransactionConflict,
		conflictMsg(topic, "s", t2, "try to ack message:"+at(0)+" (ackSet is null) in pending ack status."))
	wantOK(t, "ack m1 in t1", p.ackTxn(cid, t1, false, ids[1]))
	wantOK(t, "ack m2 in t2", p.ackTxn(cid, t2, false, ids[2]))
	unknown := txnID{Least: 987654}
	wantRefusal(t, "ack in an unknown transaction", p.ackTxn(cid, unknown, false, ids[3]), pb.ServerError_TransactionNotFound, notFound(unknown))

	wantOK(t, "abort t1", p.endTxn(t1, pb.TxnAction_ABORT))
	for _, want := range []string{"m0", "m1"} {
		if m := p.receive(cid); m.payload != want || m.redelivery != 1 {
			t.Fatalf("after the abort got %v, want %s with redelivery count 1", m, want)
		}
	}
	wantOK(t, "commit t2", p.endTxn(t2, pb.TxnAction_COMMIT))
	wantRefusal(t, "ack m2 in t2 after its commit", p.ackTxn(cid, t2, false, ids[2]), pb.ServerError_TransactionConflict,
		conflictMsg(topic, "s", t2, "try to ack message:"+at(2)+" (ackSet is null) already acked before."))
	// Asking for everything unacknowledged again brings m0, m1 and m3,
	// never m2.
	p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(cid)})
	got := map[string]bool{}
	for len(got) < 3 {
		got[p.receive(cid).payload] = true
	}
	if got["m2"] || !got["m3"] {
		t.Fatalf("after redelivering all: %v", got)
	}

	ex := brokertest.TopicName(t) + "-exclusive"
	xpid := p.producer(ex)
	var xids []*pb.MessageIdData
	for i := uint64(0); i < 3; i++ {
		xids = append(xids, p.publish(xpid, i, msg{payload: fmt.Sprint("x", i)}).GetMessageId())
	}
	xcid := p.subscribe(ex, "s", pb.CommandSubscribe_Exclusive, earliest)
	p.flow(xcid, 100)
	for range xids {
		p.receive(xcid)
	}
	t3, t4 := p.newTxn(60000), p.newTxn(60000)
	wantOK(t, "cumulative ack of x1 in t3", p.ackTxn(xcid, t3, true, xids[1]))
	wantRefusal(t, "cumulative ack of x2 in t4", p.ackTxn(xcid, t4, true, xids[2]), pb.ServerError_TransactionConflict,
		conflictMsg(ex, "s", t4, fmt.Sprintf("try to cumulative batch ack position: %d:2 within range of current currentPosition: %d:1", xids[2].GetLedgerId(), xids[1].GetLedgerId())))
	wantOK(t, "commit t3", p.endTxn(t3, pb.TxnAction_COMMIT))
	wantOK(t, "cumulative ack of x2 in t4 after t3 committed", p.ackTxn(xcid, t4, true, xids[2]))
	wantOK(t, "commit t4", p.endTxn(t4, pb.TxnAction_COMMIT))
	p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(xcid)})
	p.noMessage(xcid, 300*time.Millisecond)
}

// An ACK in a transaction refused for a conflict takes the entries it
// names off the consumer all the same (Shared), as Apache Pulsar 4.0.8
// does: asking for them again by id brings nothing, nor does the
// transaction's abort, since it holds none of them. Acknowledged alone
// in the transaction afterwards, an entry comes again with its abort
// (what the client does: subscribe's retryAlone).
func TestTxnAckRefusedTakesItsEntriesOffTheConsumer(t *testing.T) {
	c := brokertest.Start(t, txnsOn)
	p := dial(t, c.ServiceURL())
	topic := brokertest.TopicName(t)
	pid := p.producer(topic)
	var ids []*pb.MessageIdData
	for i := uint64(0); i < 3; i++ {
		ids = append(ids, p.publish(pid, i, msg{payload: fmt.Sprint("m", i)}).GetMessageId())
	}
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(cid, 100)
	for range ids {
		p.receive(cid)
	}
	at := func(i int) string { return fmt.Sprintf("%d:%d", ids[i].GetLedgerId(), ids[i].GetEntryId()) }
	t1, t2 := p.newTxn(60000), p.newTxn(60000)
	wantOK(t, "ack m0 in t1", p.ackTxn(cid, t1, false, ids[0]))
	wantOK(t, "commit t1", p.endTxn(t1, pb.TxnAction_COMMIT))
	wantRefusal(t, "ack m0, m1, m2 in t2", p.ackTxn(cid, t2, false, ids...), pb.ServerError_TransactionConflict,
		conflictMsg(topic, "s", t2, "try to ack message:"+at(0)+" (ackSet is null) already acked before."))
	p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(cid), MessageIds: ids[1:]})
	p.noMessage(cid, 300*time.Millisecond)
	wantOK(t, "ack m1 alone in t2", p.ackTxn(cid, t2, false, ids[1]))
	wantOK(t, "abort t2", p.endTxn(t2, pb.TxnAction_ABORT))
	if m := p.receive(cid); m.payload != "m1" {
		t.Fatalf("after the abort got %v, want m1", m)
	}
	p.noMessage(cid, 300*time.Millisecond) // m2: held nowhere, at no consumer
}

// A transaction past its timeout is aborted by the broker: what it
// acknowledged comes again, what it published is never delivered, and
// the coordinator no longer knows it. Deliberately unlike Apache Pulsar,
// a SEND in it afterwards is refused (TransactionNotFound); Pulsar stores
// it, hidden.
func TestTxnTimeoutAbortsAsApachePulsar(t *testing.T) {
	c := brokertest.Start(t, txnsOn)
	p := dial(t, c.ServiceURL())
	in, out := brokertest.TopicName(t)+"-in", brokertest.TopicName(t)+"-out"
	inPid, outPid := p.producer(in), p.producer(out)
	m := p.publish(inPid, 0, msg{payload: "in"}).GetMessageId()
	inCid := p.subscribe(in, "s", pb.CommandSubscribe_Shared, earliest)
	outCid := p.subscribe(out, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(inCid, 10)
	p.flow(outCid, 10)
	p.receive(inCid)
	id := p.newTxn(300)
	wantOK(t, "SEND in the transaction", p.sendTxn(outPid, 0, msg{payload: "lost"}, id, true))
	wantOK(t, "ack in the transaction", p.ackTxn(inCid, id, false, m))
	if again := p.receive(inCid); again.payload != "in" || again.redelivery != 1 {
		t.Fatalf("after the timeout got %v", again)
	}
	// The redelivery comes while the abort is still ending on the topics.
	end := p.endTxnAfterAbort(id, pb.TxnAction_COMMIT)
	wantRefusal(t, "commit after the timeout", end, pb.ServerError_TransactionNotFound, notFound(id))
	wantRefusal(t, "SEND after the timeout", p.sendTxn(outPid, 1, msg{payload: "late"}, id, true), pb.ServerError_TransactionNotFound, notFound(id))
	p.publish(outPid, 2, msg{payload: "after"})
	if got := p.receive(outCid); got.payload != "after" {
		t.Fatalf("on the output topic got %v", got)
	}
}

// With --data, kill -9 of the broker: a committed transaction's messages
// and acknowledgements stay; an open one is open again, and its timeout
// aborts it (as Apache Pulsar's coordinator recovers it): what it
// published never comes, what it acknowledged comes again.
func TestTxnSurvivesKillNine(t *testing.T) {
	dir := t.TempDir()
	bp := startProcess(t, "--data", dir, "--transactions")
	p := dial(t, bp.serviceURL)
	in, out := "persistent://public/default/txn-in", "persistent://public/default/txn-out"
	inPid, outPid := p.producer(in), p.producer(out)
	var ins []*pb.MessageIdData
	for i := uint64(0); i < 2; i++ {
		ins = append(ins, p.publish(inPid, i, msg{payload: fmt.Sprint("in", i)}).GetMessageId())
	}
	inCid := p.subscribe(in, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(inCid, 10)
	p.receive(inCid)
	p.receive(inCid)
	committed := p.newTxn(600000)
	wantOK(t, "SEND in the committed one", p.sendTxn(outPid, 0, msg{payload: "committed"}, committed, true))
	wantOK(t, "ack in0 in the committed one", p.ackTxn(inCid, committed, false, ins[0]))
	wantOK(t, "commit", p.endTxn(committed, pb.TxnAction_COMMIT))
	open := p.newTxn(3000)
	wantOK(t, "SEND in the open one", p.sendTxn(outPid, 1, msg{payload: "open"}, open, true))
	wantOK(t, "ack in1 in the open one", p.ackTxn(inCid, open, false, ins[1]))
	p.publish(outPid, 2, msg{payload: "plain"})
	bp.cmd.Process.Kill()
	bp.wait(t)
	p.close()

	bp2 := startProcess(t, "--data", dir, "--transactions")
	q := dial(t, bp2.serviceURL)
	outCid := q.subscribe(out, "check", pb.CommandSubscribe_Exclusive, earliest)
	q.flow(outCid, 10)
	if m := q.receive(outCid); m.payload != "committed" {
		t.Fatalf("first on the output topic after the restart: %v", m)
	}
	inCid2 := q.subscribe(in, "s", pb.CommandSubscribe_Shared)
	q.flow(inCid2, 10)
	// The open transaction holds in1 and everything on the output topic
	// after its entry until its timeout aborts it.
	q.noMessage(outCid, 500*time.Millisecond)
	if m := q.receive(inCid2); m.payload != "in1" {
		t.Fatalf("after the open transaction's timeout the input topic gave %v, want in1 (in0 was acknowledged by the commit)", m)
	}
	if m := q.receive(outCid); m.payload != "plain" {
		t.Fatalf("after the abort the output topic gave %v, want plain", m)
	}
	// The redelivery of in1 comes while the timeout's abort is still
	// ending on the topics.
	wantRefusal(t, "commit the aborted one", q.endTxnAfterAbort(open, pb.TxnAction_COMMIT), pb.ServerError_TransactionNotFound, notFound(open))
}

// With transactions off the admin API's transaction endpoints answer 503
// in Apache Pulsar's words; with them on, a bad id is a 400 and an
// unknown transaction a 404 with the coordinator's message.
func TestTxnAdminEndpoints(t *testing.T) {
	get := func(base, path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	off := brokertest.Start(t)
	for _, path := range []string{"/coordinators", "/coordinatorStats", "/transactionMetadata/0/1", "/slowTransactions/1000"} {
		code, body := get(off.AdminURL(), "/admin/v3/transactions"+path)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "This Broker is not configured with transactionCoordinatorEnabled=true.") {
			t.Errorf("%s with transactions off: %d %s", path, code, body)
		}
	}
	on := brokertest.Start(t, txnsOn)
	if code, body := get(on.AdminURL(), "/admin/v3/transactions/transactionMetadata/0/x"); code != http.StatusBadRequest {
		t.Errorf("a bad id: %d %s", code, body)
	}
	if code, body := get(on.AdminURL(), "/admin/v3/transactions/transactionMetadata/0/7"); code != http.StatusNotFound || !strings.Contains(body, notFound(txnID{Least: 7})) {
		t.Errorf("an unknown transaction: %d %s", code, body)
	}
	if code, body := get(on.AdminURL(), "/admin/v3/transactions/coordinatorStats?coordinatorId=0"); code != http.StatusOK || !strings.Contains(body, `"state":"Ready"`) {
		t.Errorf("coordinator 0's stats: %d %s", code, body)
	}
}
