package pulsarwire

import (
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func flowBytes(t testing.TB, id uint64, permits uint32) []byte {
	t.Helper()
	b, err := proto.Marshal(Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(id), MessagePermits: proto.Uint32(permits)}))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkFlowDecode asserts that whatever decodeFlow accepts, proto.Unmarshal
// decodes to the same command; it reports whether decodeFlow accepted.
func checkFlowDecode(t *testing.T, b []byte) bool {
	t.Helper()
	fast, ok := decodeFlow(b)
	if !ok {
		return false
	}
	slow := new(pb.BaseCommand)
	if err := proto.Unmarshal(b, slow); err != nil {
		t.Fatalf("decodeFlow accepted %x, proto.Unmarshal refuses it: %v", b, err)
	}
	if !proto.Equal(fast, slow) {
		t.Fatalf("decodeFlow(%x) = %v, proto.Unmarshal = %v", b, fast, slow)
	}
	return true
}

func TestDecodeFlowMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := []uint64{0, 1, 127, 128, math.MaxUint32, math.MaxUint64}
	grants := []uint32{0, 1, 500, 1000, math.MaxUint32}
	for _, id := range ids {
		for _, g := range grants {
			if b := flowBytes(t, id, g); !checkFlowDecode(t, b) {
				t.Fatalf("decodeFlow refused a FLOW as proto.Marshal encodes it: id %d permits %d (%x)", id, g, b)
			}
		}
	}
	// Encodings proto.Marshal does not produce: reordered, non-minimal
	// varints, repeated or extra fields, other types, overflowing permits.
	tag := protowire.AppendTag
	body := func(id, g uint64) []byte {
		b := protowire.AppendVarint(tag(nil, fieldFlowGrant, protowire.VarintType), g)
		return protowire.AppendVarint(tag(b, fieldFlowID, protowire.VarintType), id)
	}
	cmd := func(typ uint64, flow []byte) []byte {
		b := protowire.AppendBytes(tag(nil, fieldBaseFlow, protowire.BytesType), flow)
		return protowire.AppendVarint(tag(b, fieldBaseType, protowire.VarintType), typ)
	}
	odd := [][]byte{
		cmd(uint64(pb.BaseCommand_FLOW), body(7, 9)),                                                             // fields in reverse order
		cmd(uint64(pb.BaseCommand_FLOW), body(7, math.MaxUint32+1)),                                              // permits past uint32: refused, proto truncates
		cmd(uint64(pb.BaseCommand_ACK), body(7, 9)),                                                              // not a FLOW
		cmd(uint64(pb.BaseCommand_FLOW), append(body(7, 9), 0x08, 1)),                                            // consumer id twice
		append(cmd(uint64(pb.BaseCommand_FLOW), body(7, 9)), 0x08, 11),                                           // type twice
		cmd(uint64(pb.BaseCommand_FLOW), protowire.AppendVarint(tag(nil, fieldFlowID, protowire.VarintType), 7)), // no permits
		{0x08, 0x8b, 0x80, 0x00, 0x5a, 0x04, 0x08, 0x07, 0x10, 0x09},                                             // non-minimal type varint
		{},
	}
	for _, b := range odd {
		checkFlowDecode(t, b)
	}
	// Random damage to FLOWs: flipped, cut, lengthened.
	accepted := 0
	for i := 0; i < 200000; i++ {
		b := flowBytes(t, r.Uint64()>>uint(r.IntN(64)), r.Uint32())
		switch r.IntN(3) {
		case 0:
			b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
		case 1:
			b = b[:r.IntN(len(b))]
		default:
			b = append(b, byte(r.IntN(256)), byte(r.IntN(256)))
		}
		if checkFlowDecode(t, b) {
			accepted++
		}
	}
	t.Logf("%d of 200000 damaged FLOWs still decoded (each as proto.Unmarshal does)", accepted)
}

func BenchmarkParseFrameFlow(b *testing.B) {
	cmd := flowBytes(b, 3, 500)
	frame := append([]byte{0, 0, 0, byte(len(cmd))}, cmd...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseFrame(frame); err != nil {
			b.Fatal(err)
		}
	}
}
