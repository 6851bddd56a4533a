package pulsarwire_test

import (
	"hash/crc32"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func TestEntryChecksumIsTheCRCOfTheCoveredBytes(t *testing.T) {
	entry, err := pulsarwire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)}, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	sum, ok := pulsarwire.EntryChecksum(entry)
	if !ok {
		t.Fatal("no checksum found in an entry made with one")
	}
	if want := crc32.Checksum(entry[pulsarwire.EntryChecksumSkip:], crc32.MakeTable(crc32.Castagnoli)); sum != want {
		t.Fatalf("checksum %08x, crc32c of the covered bytes %08x", sum, want)
	}
	if _, ok := pulsarwire.EntryChecksum(entry[pulsarwire.EntryChecksumSkip:]); ok {
		t.Fatal("a checksum found in an entry without one")
	}
}
