package pulsarwire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// hotCommands are the commands sent or read for every message or batch:
// what Wrap and Body cost on the hot paths of the client and the broker.
func hotCommands() []proto.Message {
	id := &pb.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(2)}
	return []proto.Message{
		&pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(2), NumMessages: proto.Int32(100)},
		&pb.CommandSendReceipt{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(2), MessageId: id},
		&pb.CommandMessage{ConsumerId: proto.Uint64(3), MessageId: id},
		&pb.CommandAck{ConsumerId: proto.Uint64(3), AckType: pb.CommandAck_Individual.Enum(), MessageId: []*pb.MessageIdData{id}},
		&pb.CommandFlow{ConsumerId: proto.Uint64(3), MessagePermits: proto.Uint32(500)},
		&pb.CommandPing{},
	}
}

// BenchmarkWrap: one hot command into its envelope.
func BenchmarkWrap(b *testing.B) {
	ms := hotCommands()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if Wrap(ms[i%len(ms)]) == nil {
			b.Fatal("nil")
		}
		i++
	}
}

// BenchmarkBody: the command out of a hot envelope.
func BenchmarkBody(b *testing.B) {
	var cs []*pb.BaseCommand
	for _, m := range hotCommands() {
		cs = append(cs, Wrap(m))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if Body(cs[i%len(cs)]) == nil {
			b.Fatal("nil")
		}
		i++
	}
}
