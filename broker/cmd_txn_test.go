package broker_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// With transactions off (the default, as Apache Pulsar's
// transactionCoordinatorEnabled=false), every coordinator command is
// refused with an ERROR NotAllowedError, and a transactional SEND or ACK
// in its own reply; the messages are Apache Pulsar 4.0.8's, word for word.
// The coordinators' topic has no partitions, so a client finds none.
func TestTransactionsOffAnswerAsApachePulsar(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	rid := p.rid()
	md := p.request(&pb.CommandPartitionedTopicMetadata{Topic: proto.String("persistent://pulsar/system/transaction_coordinator_assign"), RequestId: proto.Uint64(rid)}, rid)
	if n := md.GetPartitionMetadataResponse().GetPartitions(); n != 0 || errOf(md) != nil {
		t.Fatalf("coordinators' topic: %d partitions, %v", n, errOf(md))
	}
	for _, m := range []proto.Message{
		&pb.CommandTcClientConnectRequest{TcId: proto.Uint64(0)},
		&pb.CommandNewTxn{TxnTtlSeconds: proto.Uint64(60000)},
		&pb.CommandAddPartitionToTxn{TxnidMostBits: proto.Uint64(0), TxnidLeastBits: proto.Uint64(1), Partitions: []string{"t"}},
		&pb.CommandAddSubscriptionToTxn{TxnidMostBits: proto.Uint64(0), TxnidLeastBits: proto.Uint64(1),
			Subscription: []*pb.Subscription{{Topic: proto.String("t"), Subscription: proto.String("s")}}},
		&pb.CommandEndTxn{TxnidMostBits: proto.Uint64(0), TxnidLeastBits: proto.Uint64(1), TxnAction: pb.TxnAction_COMMIT.Enum()},
	} {
		cmd := pulsarwire.Wrap(m)
		rid := p.rid()
		pulsarwire.SetRequestID(cmd, rid)
		got := p.request(pulsarwire.Body(cmd), rid)
		e := got.GetError()
		if got.GetType() != pb.BaseCommand_ERROR || e.GetError() != pb.ServerError_NotAllowedError || e.GetMessage() != "Transactions are not enabled." {
			t.Errorf("%s: got %v", cmd.GetType(), got)
		}
	}

	topic := brokertest.TopicName(t)
	pid := p.producer(topic)
	send, err := pulsarwire.AppendPayloadCommand(nil, pulsarwire.Wrap(&pb.CommandSend{ProducerId: proto.Uint64(pid), SequenceId: proto.Uint64(0),
		NumMessages: proto.Int32(1), TxnidMostBits: proto.Uint64(0), TxnidLeastBits: proto.Uint64(0)}),
		&pb.MessageMetadata{ProducerName: proto.String("test"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli()))}, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	p.write(send)
	f := p.expect("SEND_ERROR", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_ERROR })
	if e := f.Cmd.GetSendError(); e.GetError() != pb.ServerError_NotAllowedError || e.GetMessage() != "Transaction buffer disable!" {
		t.Errorf("transactional SEND: got %v", e)
	}

	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(cid, 10)
	r := p.publish(pid, 1, msg{payload: "plain"})
	got := p.receive(cid)
	rid = p.rid()
	ack := p.request(&pb.CommandAck{ConsumerId: proto.Uint64(cid), AckType: pb.CommandAck_Individual.Enum(),
		MessageId: []*pb.MessageIdData{r.GetMessageId()}, TxnidMostBits: proto.Uint64(0), TxnidLeastBits: proto.Uint64(1), RequestId: proto.Uint64(rid)}, rid)
	const want = "org.apache.pulsar.broker.service.BrokerServiceException$NotAllowedException: Server don't support transaction ack!"
	if a := ack.GetAckResponse(); a.GetError() != pb.ServerError_NotAllowedError || a.GetMessage() != want {
		t.Errorf("transactional ACK of %v: got %v", got, a)
	}
}
