package pulsarwire

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// putFrame builds a frame with PutSendHeader the way a producer does:
// room first, payload after it.
func putFrame(t testing.TB, h *SendHeader, payload []byte) []byte {
	t.Helper()
	room := SendHeaderRoom(h)
	buf := make([]byte, room, room+len(payload))
	buf = append(buf, payload...)
	frame, err := PutSendHeader(buf, room, h)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

func TestSingleMessagesDecodeAsABatch(t *testing.T) {
	msgs := []MessageFields{
		{SequenceID: 10},
		{SequenceID: 11, Key: "k1", OrderingKey: "ok", EventTime: 1700000000123,
			Properties: map[string]string{"b": "2", "a": "1", "c": ""}},
		{SequenceID: 1 << 40, Key: "ключ"},
	}
	payloads := [][]byte{[]byte("hello"), nil, bytes.Repeat([]byte{0}, 300)}
	var b []byte
	for i := range msgs {
		before := len(b)
		b = AppendSingleMessage(b, &msgs[i], payloads[i])
		if got, bound := len(b)-before, SingleMessageSize(&msgs[i], len(payloads[i])); got > bound {
			t.Errorf("message %d: %d bytes, bound said %d", i, got, bound)
		}
	}
	out, err := SplitBatch(b, len(msgs))
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range out {
		want := msgs[i]
		if !bytes.Equal(m.Payload, payloads[i]) || m.Meta.GetSequenceId() != want.SequenceID ||
			m.Meta.GetPartitionKey() != want.Key || string(m.Meta.GetOrderingKey()) != want.OrderingKey ||
			m.Meta.GetEventTime() != want.EventTime || len(m.Meta.GetProperties()) != len(want.Properties) {
			t.Errorf("message %d: got %v", i, m.Meta)
		}
		for _, kv := range m.Meta.GetProperties() {
			if want.Properties[kv.GetKey()] != kv.GetValue() {
				t.Errorf("message %d: property %s=%s", i, kv.GetKey(), kv.GetValue())
			}
		}
	}
	// Properties are sorted, so the bytes are what proto.Marshal of the
	// same metadata (properties in key order) gives.
	smm := &pb.SingleMessageMetadata{
		Properties:   []*pb.KeyValue{kv("a", "1"), kv("b", "2"), kv("c", "")},
		PartitionKey: proto.String("k1"), EventTime: proto.Uint64(1700000000123),
		OrderingKey: []byte("ok"), SequenceId: proto.Uint64(11),
	}
	ref, err := AppendBatchMessage(nil, smm, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := AppendSingleMessage(nil, &msgs[1], nil)
	if !proto.Equal(mustSMM(t, ref), mustSMM(t, got)) {
		t.Fatalf("hand-encoded metadata differs from protobuf's")
	}
}

func mustSMM(t *testing.T, b []byte) *pb.SingleMessageMetadata {
	out, err := SplitBatch(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Meta
}

func kv(k, v string) *pb.KeyValue { return &pb.KeyValue{Key: proto.String(k), Value: proto.String(v)} }

func TestPutSendHeaderMakesAFrameParseFrameReads(t *testing.T) {
	var batch []byte
	for i := 0; i < 3; i++ {
		batch = AppendSingleMessage(batch, &MessageFields{SequenceID: uint64(100 + i)}, []byte(fmt.Sprint("m", i)))
	}
	cases := []struct {
		name    string
		h       SendHeader
		payload []byte
	}{
		{"batch", SendHeader{ProducerID: 3, SequenceID: 100, HighestSequenceID: 102, NumMessages: 3, Batch: true,
			ProducerName: "standalone-0-7", PublishTime: 1700000000000, Message: MessageFields{Key: "first", OrderingKey: "\x01\x02"}}, batch},
		{"one message", SendHeader{ProducerID: 1 << 33, SequenceID: 5, NumMessages: 1, ProducerName: "p",
			PublishTime: 1, Message: MessageFields{Key: "k", EventTime: 9, Properties: map[string]string{"x": "y", "a": "b"}}}, []byte("solo")},
		{"compressed", SendHeader{ProducerID: 2, SequenceID: 0, NumMessages: 1, Batch: true, ProducerName: "p",
			PublishTime: 2, Compression: pb.CompressionType_LZ4, UncompressedSize: 77}, []byte("not really lz4")},
		{"in a transaction", SendHeader{ProducerID: 4, SequenceID: 100, HighestSequenceID: 102, NumMessages: 3, Batch: true,
			ProducerName: "p", PublishTime: 3, Txn: &TxnID{Most: 1 << 40, Least: 1<<64 - 1}}, batch},
		{"in transaction (0,0)", SendHeader{ProducerID: 5, SequenceID: 7, NumMessages: 1, ProducerName: "p",
			PublishTime: 4, Txn: &TxnID{}}, []byte("solo")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkPutSendHeader(t, &c.h, c.payload) })
	}
}

// checkPutSendHeader puts h and payload in a frame and checks that
// ParseFrame reads them back, as the protobuf path writes them.
func checkPutSendHeader(t *testing.T, h *SendHeader, payload []byte) {
	frame := putFrame(t, h, payload)
	f, err := ParseFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	s := f.Cmd.GetSend()
	md := f.Metadata
	if f.Cmd.GetType() != pb.BaseCommand_SEND || s.GetProducerId() != h.ProducerID ||
		s.GetSequenceId() != h.SequenceID || s.GetNumMessages() != h.NumMessages {
		t.Fatalf("command %v", f.Cmd)
	}
	if h.HighestSequenceID > h.SequenceID && s.GetHighestSequenceId() != h.HighestSequenceID {
		t.Fatalf("highest sequence id %d", s.GetHighestSequenceId())
	}
	if md.GetProducerName() != h.ProducerName || md.GetSequenceId() != h.SequenceID ||
		md.GetPublishTime() != h.PublishTime || md.GetPartitionKey() != h.Message.Key ||
		md.GetCompression() != h.Compression || string(md.GetOrderingKey()) != h.Message.OrderingKey {
		t.Fatalf("metadata %v", md)
	}
	if h.Batch != (md.NumMessagesInBatch != nil) {
		t.Fatalf("num_messages_in_batch %v for batch=%v", md.NumMessagesInBatch, h.Batch)
	}
	if !h.Batch && (md.GetEventTime() != h.Message.EventTime || len(md.GetProperties()) != len(h.Message.Properties)) {
		t.Fatalf("single message fields lost: %v", md)
	}
	if h.Txn != nil && (s.TxnidMostBits == nil || s.TxnidLeastBits == nil || md.TxnidMostBits == nil || md.TxnidLeastBits == nil ||
		s.GetTxnidMostBits() != h.Txn.Most || s.GetTxnidLeastBits() != h.Txn.Least ||
		md.GetTxnidMostBits() != h.Txn.Most || md.GetTxnidLeastBits() != h.Txn.Least) {
		t.Fatalf("transaction %v: command %v, metadata %v", h.Txn, s, md)
	}
	if h.Txn == nil && (s.TxnidMostBits != nil || md.TxnidMostBits != nil) {
		t.Fatalf("transaction fields without a transaction: command %v, metadata %v", s, md)
	}
	if h.Compression != pb.CompressionType_NONE && md.GetUncompressedSize() != h.UncompressedSize {
		t.Fatalf("uncompressed size %d", md.GetUncompressedSize())
	}
	if !bytes.Equal(f.Payload, payload) {
		t.Fatalf("payload %q", f.Payload)
	}
	// Byte for byte what the protobuf path writes for the same frame.
	ref, err := AppendPayloadCommand(nil, f.Cmd, f.Metadata, f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	rf, _ := ParseFrame(ref[4:])
	if !proto.Equal(rf.Cmd, f.Cmd) || !proto.Equal(rf.Metadata, f.Metadata) || len(ref) != len(frame) {
		t.Fatal("differs from AppendPayloadCommand")
	}
}

func TestPutSendHeaderRefusesTooLittleRoom(t *testing.T) {
	h := &SendHeader{ProducerID: 1, NumMessages: 1, ProducerName: "a-rather-long-producer-name"}
	buf := make([]byte, 20, 30)
	if _, err := PutSendHeader(buf, 10, h); err == nil {
		t.Fatal("no error with 10 bytes of room")
	}
	if _, err := PutSendHeader(buf, 25, h); err == nil {
		t.Fatal("no error with the payload start past the buffer")
	}
}

func TestHandEncodingDoesNotAllocate(t *testing.T) {
	m := MessageFields{SequenceID: 7, Key: "key", EventTime: 5, Properties: map[string]string{"a": "1", "b": "2"}}
	payload := make([]byte, 100)
	buf := make([]byte, 0, 4096)
	h := &SendHeader{ProducerID: 1, SequenceID: 7, NumMessages: 1, Batch: true, ProducerName: "p", PublishTime: 1}
	allocs := testing.AllocsPerRun(100, func() {
		b := append(buf[:0], make([]byte, 256)...)
		b = AppendSingleMessage(b, &m, payload)
		if _, err := PutSendHeader(b, 256, h); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

func BenchmarkAppendSingleMessage(b *testing.B) {
	m := MessageFields{Key: "key-1", Properties: map[string]string{"a": "1"}}
	payload := make([]byte, 100)
	buf := make([]byte, 0, 1<<20)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if len(buf) > 1<<19 {
			buf = buf[:0]
		}
		m.SequenceID = uint64(i)
		buf = AppendSingleMessage(buf, &m, payload)
	}
}
