package broker_test

import (
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Well-formed commands with arbitrary ids and values, in arbitrary order,
// never crash the broker, and it keeps serving a bystander.
func TestArbitraryCommandsNeverPanic(t *testing.T) {
	logs := &brokertest.SyncBuffer{}
	c := brokertest.Start(t, func(o *broker.Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	rng := rand.New(rand.NewPCG(7, 7))
	u64 := func() uint64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return ^uint64(0)
		case 2:
			return uint64(rng.IntN(8))
		}
		return rng.Uint64()
	}
	id := func() *pb.MessageIdData {
		m := &pb.MessageIdData{LedgerId: proto.Uint64(u64()), EntryId: proto.Uint64(u64())}
		if rng.IntN(2) == 0 {
			m.BatchIndex = proto.Int32(int32(rng.IntN(5)) - 1)
			m.AckSet = []int64{int64(rng.Uint64()), int64(rng.Uint64())}
		}
		return m
	}
	topics := []string{"r1", "r2", "persistent://public/default/r1", "bad//name", ""}
	gens := []func(p *peer) proto.Message{
		func(p *peer) proto.Message {
			return &pb.CommandSubscribe{Topic: proto.String(topics[rng.IntN(len(topics))]), Subscription: proto.String([]string{"a", "b", ""}[rng.IntN(3)]),
				SubType: pb.CommandSubscribe_SubType(rng.IntN(5)).Enum(), ConsumerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64()),
				Durable: proto.Bool(rng.IntN(2) == 0), StartMessageId: id(), InitialPosition: pb.CommandSubscribe_InitialPosition(rng.IntN(2)).Enum(),
				KeySharedMeta: &pb.KeySharedMeta{KeySharedMode: pb.KeySharedMode(rng.IntN(2)).Enum(), HashRanges: []*pb.IntRange{{Start: proto.Int32(int32(rng.IntN(70000)) - 100), End: proto.Int32(int32(rng.IntN(70000)))}}}}
		},
		func(p *peer) proto.Message {
			return &pb.CommandProducer{Topic: proto.String(topics[rng.IntN(len(topics))]), ProducerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64()),
				ProducerAccessMode: pb.ProducerAccessMode(rng.IntN(4)).Enum()}
		},
		func(p *peer) proto.Message {
			return &pb.CommandFlow{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), MessagePermits: proto.Uint32(uint32(u64()))}
		},
		func(p *peer) proto.Message {
			return &pb.CommandAck{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), AckType: pb.CommandAck_AckType(rng.IntN(2)).Enum(), MessageId: []*pb.MessageIdData{id(), id()}, RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), MessageIds: []*pb.MessageIdData{id()}, ConsumerEpoch: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			m := &pb.CommandSeek{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64())}
			if rng.IntN(2) == 0 {
				m.MessageId = id()
			} else {
				m.MessagePublishTime = proto.Uint64(u64())
			}
			return m
		},
		func(p *peer) proto.Message {
			return &pb.CommandUnsubscribe{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64()), Force: proto.Bool(rng.IntN(2) == 0)}
		},
		func(p *peer) proto.Message {
			return &pb.CommandCloseConsumer{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandCloseProducer{ProducerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandConsumerStats{ConsumerId: proto.Uint64(uint64(rng.IntN(4))), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandLookupTopic{Topic: proto.String(topics[rng.IntN(len(topics))]), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandPartitionedTopicMetadata{Topic: proto.String(topics[rng.IntN(len(topics))]), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandGetTopicsOfNamespace{Namespace: proto.String([]string{"public/default", "", "x"}[rng.IntN(3)]), RequestId: proto.Uint64(u64())}
		},
		func(p *peer) proto.Message {
			return &pb.CommandGetSchema{Topic: proto.String(topics[rng.IntN(len(topics))]), RequestId: proto.Uint64(u64()), SchemaVersion: []byte{byte(rng.IntN(3))}}
		},
	}
	for round := 0; round < 20; round++ {
		p := dial(t, c.ServiceURL())
		for i := 0; i < 200; i++ {
			p.send(gens[rng.IntN(len(gens))](p))
		}
		// Well-formed commands never cost the connection: it answers.
		const marker = 1<<63 + 12345
		p.send(&pb.CommandLookupTopic{Topic: proto.String("marker"), RequestId: proto.Uint64(marker)})
		p.response(marker)
		p.close()
	}
	bystander := dial(t, c.ServiceURL())
	cid := bystander.subscribe("calm", "s", pb.CommandSubscribe_Exclusive)
	bystander.flow(cid, 10)
	pid := bystander.producer("calm")
	bystander.publish(pid, 0, msg{payload: "still"})
	if m := bystander.receive(cid); m.payload != "still" {
		t.Fatalf("got %q", m.payload)
	}
	if strings.Contains(logs.String(), "BUG") {
		t.Fatalf("the broker logged a bug:\n%s", logs.String())
	}
}
