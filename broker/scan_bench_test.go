package broker

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// BenchmarkScanEntry: what dispatch reads of every stored entry's
// metadata (batch size, keys, times).
func BenchmarkScanEntry(b *testing.B) {
	md, err := proto.Marshal(&pb.MessageMetadata{ProducerName: proto.String("standalone-0-1"), SequenceId: proto.Uint64(7),
		PublishTime: proto.Uint64(1700000000000), NumMessagesInBatch: proto.Int32(100), PartitionKey: proto.String("key"),
		OrderingKey: []byte("ok"), UncompressedSize: proto.Uint32(12000)})
	if err != nil {
		b.Fatal(err)
	}
	entry := append([]byte{0, 0, 0, byte(len(md))}, md...)
	entry = append(entry, make([]byte, 100)...)
	b.ReportAllocs()
	for b.Loop() {
		if info, err := scanEntry(entry); err != nil || info.numMessages != 100 {
			b.Fatal(info, err)
		}
	}
}
