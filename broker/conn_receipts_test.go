package broker_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// At fsync durability a connection reads on while its receipts wait for
// their fsync: two producers' pipelined SENDs on one connection still get
// their receipts in order, a send error and a CLOSE_PRODUCER answer come
// after the receipts of the SENDs before them, and every receipted message
// is readable.
func TestSyncReceiptsKeepOrderWhileTheConnectionReadsOn(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.Memory = false; o.DataDir = t.TempDir(); o.Sync = true })
	p := dial(t, c.ServiceURL())
	topics := []string{"persistent://public/default/sync-order-a", "persistent://public/default/sync-order-b"}
	pids := []uint64{p.producer(topics[0]), p.producer(topics[1])}
	const n = 300
	var frames []byte
	for i := uint64(0); i < n; i++ {
		for _, pid := range pids {
			frames = append(frames, sendFrame(pid, i, msg{payload: fmt.Sprint(pid, "-", i)})...)
		}
	}
	// A SEND refused at once (a transaction, with transactions off: (0,0)
	// is a transaction id like any other) after the others of pids[0].
	txn, err := pulsarwire.AppendPayloadCommand(nil, pulsarwire.Wrap(&pb.CommandSend{ProducerId: proto.Uint64(pids[0]),
		SequenceId: proto.Uint64(n), NumMessages: proto.Int32(1), TxnidMostBits: proto.Uint64(0), TxnidLeastBits: proto.Uint64(0)}),
		&pb.MessageMetadata{ProducerName: proto.String("test"), SequenceId: proto.Uint64(n), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}, []byte("txn"))
	if err != nil {
		t.Fatal(err)
	}
	frames = append(frames, txn...)
	rid := p.rid()
	closing, err := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(&pb.CommandCloseProducer{ProducerId: proto.Uint64(pids[0]), RequestId: proto.Uint64(rid)}))
	if err != nil {
		t.Fatal(err)
	}
	p.write(append(frames, closing...)) // all in one go: the broker has them all to read

	for k, pid := range pids {
		answerOf := func(c *pb.BaseCommand) bool {
			return (c.GetType() == pb.BaseCommand_SEND_RECEIPT && c.GetSendReceipt().GetProducerId() == pid) ||
				(c.GetType() == pb.BaseCommand_SEND_ERROR && c.GetSendError().GetProducerId() == pid) ||
				(k == 0 && c.GetType() == pb.BaseCommand_SUCCESS && c.GetSuccess().GetRequestId() == rid)
		}
		for i := uint64(0); i < n; i++ {
			f := p.expect("receipt", answerOf)
			if f.Cmd.GetType() != pb.BaseCommand_SEND_RECEIPT || f.Cmd.GetSendReceipt().GetSequenceId() != i {
				t.Fatalf("producer %d: answer %d is %v, want the receipt of sequence %d", pid, i, f.Cmd, i)
			}
			if e := f.Cmd.GetSendReceipt().GetMessageId().GetEntryId(); e != i {
				t.Fatalf("producer %d: receipt %d for entry %d", pid, i, e)
			}
		}
		if k != 0 {
			continue
		}
		if f := p.expect("send error", answerOf); f.Cmd.GetType() != pb.BaseCommand_SEND_ERROR || f.Cmd.GetSendError().GetSequenceId() != n {
			t.Fatalf("after the receipts: %v, want the send error of sequence %d", f.Cmd, n)
		}
		if f := p.expect("close success", answerOf); f.Cmd.GetType() != pb.BaseCommand_SUCCESS {
			t.Fatalf("after the send error: %v, want the CLOSE_PRODUCER success", f.Cmd)
		}
	}

	cid := p.subscribe(topics[1], "s", pb.CommandSubscribe_Exclusive, earliest)
	p.flow(cid, n)
	for i := 0; i < n; i++ {
		if m, want := p.receive(cid), fmt.Sprint(pids[1], "-", i); m.payload != want {
			t.Fatalf("message %d is %q, want %q", i, m.payload, want)
		}
	}
}

// At fsync durability SENDs one at a time (each waiting for its receipt)
// and in bursts mix on one connection: receipts stay in order with
// consecutive entries, and a consumer already waiting on the topic gets
// each message once its receipt's fsync is done.
func TestSyncReceiptsInOrderForSinglesAndBursts(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.Memory = false; o.DataDir = t.TempDir(); o.Sync = true })
	p := dial(t, c.ServiceURL())
	topic := "persistent://public/default/sync-singles-bursts"
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
	pid := p.producer(topic)
	const n = 90
	p.flow(cid, n)
	seq := uint64(0)
	next := func() {
		t.Helper()
		r := p.publish(pid, seq, msg{payload: fmt.Sprint("m-", seq)})
		if e := r.GetMessageId().GetEntryId(); e != seq {
			t.Fatalf("receipt of sequence %d for entry %d", seq, e)
		}
		if m := p.receive(cid); m.payload != fmt.Sprint("m-", seq) {
			t.Fatalf("after the receipt of %d the consumer got %q", seq, m.payload)
		}
		seq++
	}
	for round := 0; round < 3; round++ {
		// One at a time: each waits for its receipt before the next.
		for i := 0; i < 10; i++ {
			next()
		}
		// Then many in one write, then one alone again.
		var frames []byte
		first := seq
		for i := 0; i < 19; i++ {
			frames = append(frames, sendFrame(pid, seq+uint64(i), msg{payload: fmt.Sprint("m-", seq+uint64(i))})...)
		}
		p.write(frames)
		for i := uint64(0); i < 19; i++ {
			f := p.expect("receipt", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
			if r := f.Cmd.GetSendReceipt(); r.GetSequenceId() != first+i || r.GetMessageId().GetEntryId() != first+i {
				t.Fatalf("receipt %d of a burst: sequence %d entry %d, want %d", i, r.GetSequenceId(), r.GetMessageId().GetEntryId(), first+i)
			}
		}
		for i := uint64(0); i < 19; i++ {
			if m := p.receive(cid); m.payload != fmt.Sprint("m-", first+i) {
				t.Fatalf("burst message %d is %q", i, m.payload)
			}
		}
		seq += 19
		next()
	}
}
