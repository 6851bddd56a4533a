package pulsarwire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func sendFrame(t testing.TB, payload []byte) []byte {
	t.Helper()
	cmd := Wrap(&pb.CommandSend{ProducerId: proto.Uint64(7), SequenceId: proto.Uint64(42)})
	md := &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(42), PublishTime: proto.Uint64(1700000000000)}
	b, err := AppendPayloadCommand(nil, cmd, md, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSimpleFrameRoundTrip(t *testing.T) {
	b, err := AppendCommand(nil, Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(3), MessagePermits: proto.Uint32(1000)}))
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewReader(bytes.NewReader(b), MaxFrameSize(DefaultMaxMessageSize)).Next()
	if err != nil {
		t.Fatal(err)
	}
	if f.Cmd.GetType() != pb.BaseCommand_FLOW || f.Cmd.GetFlow().GetMessagePermits() != 1000 || f.HasPayload() {
		t.Fatalf("got %v", f.Cmd)
	}
	if Body(f.Cmd) == nil {
		t.Fatal("Body returned nil for a FLOW frame")
	}
}

func TestPayloadFrameRoundTripAndChecksum(t *testing.T) {
	b := sendFrame(t, []byte("hello"))
	f, err := ParseFrame(b[4:])
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Payload) != "hello" || f.Metadata.GetSequenceId() != 42 || f.Cmd.GetSend().GetProducerId() != 7 {
		t.Fatalf("decoded %+v", f)
	}
	// The stored entry re-sent as a MESSAGE decodes to the same message.
	msg := Wrap(&pb.CommandMessage{ConsumerId: proto.Uint64(1), MessageId: MessageID{Ledger: 1, Entry: 2, Partition: -1, BatchIndex: -1}.Proto()})
	b2, err := AppendEntryCommand(nil, msg, f.Entry)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := ParseFrame(b2[4:])
	if err != nil || string(f2.Payload) != "hello" {
		t.Fatalf("re-sent entry: %v %q", err, f2.Payload)
	}

	// Flip one payload byte: the checksum catches it, the command survives.
	b[len(b)-1] ^= 0xff
	f, err = ParseFrame(b[4:])
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("want ErrChecksum, got %v", err)
	}
	if f.Cmd.GetSend().GetSequenceId() != 42 {
		t.Fatal("command lost on checksum error")
	}
}

func TestReaderRefusesBadInput(t *testing.T) {
	good := sendFrame(t, bytes.Repeat([]byte("x"), 100))
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"truncated body", good[:len(good)-10], ErrTruncated},
		{"truncated size", good[:2], ErrTruncated},
		{"oversized", append([]byte{0x7f, 0, 0, 0}, good[4:]...), ErrFrameTooLarge},
		{"command size beyond frame", []byte{0, 0, 0, 8, 0, 0, 0, 9, 1, 2, 3, 4}, ErrCorrupt},
		{"garbage command", []byte{0, 0, 0, 8, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff}, ErrCorrupt},
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrFrameTooLarge},
		{"tiny total", []byte{0, 0, 0, 2, 0, 0}, ErrCorrupt},
	}
	for _, shared := range []bool{false, true} {
		newReader := func(in []byte, max int) *Reader {
			if !shared {
				return NewReader(bufio.NewReader(bytes.NewReader(in)), max)
			}
			r := NewReader(bytes.NewReader(in), max)
			r.ShareMessageBuffers()
			return r
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/shared=%v", c.name, shared), func(t *testing.T) {
				_, err := newReader(c.in, MaxFrameSize(DefaultMaxMessageSize)).Next()
				if !errors.Is(err, c.want) {
					t.Fatalf("want %v, got %v", c.want, err)
				}
			})
		}
		if _, err := newReader(nil, 100).Next(); !errors.Is(err, io.EOF) || errors.Is(err, ErrTruncated) {
			t.Fatalf("empty stream (shared=%v): want io.EOF, got %v", shared, err)
		}
	}
}

func TestUnknownCommandKindDecodes(t *testing.T) {
	// A topic-list watcher is outside what we implement, but a peer must
	// still be able to read the frame and answer it.
	b, err := AppendCommand(nil, &pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum()})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFrame(b[4:])
	if err != nil || f.Cmd.GetType() != pb.BaseCommand_WATCH_TOPIC_LIST || Body(f.Cmd) != nil {
		t.Fatalf("got %v %v", f.Cmd, err)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	var buf []byte
	var err error
	for i, p := range []string{"a", "", "ccc"} {
		smm := &pb.SingleMessageMetadata{PartitionKey: proto.String(strings.Repeat("k", i))}
		if buf, err = AppendBatchMessage(buf, smm, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := SplitBatch(buf, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || string(msgs[2].Payload) != "ccc" || msgs[1].Meta.GetPartitionKey() != "k" {
		t.Fatalf("got %+v", msgs)
	}
	if _, err := SplitBatch(buf, 4); !errors.Is(err, ErrTruncated) {
		t.Fatalf("count too high: %v", err)
	}
	if _, err := SplitBatch(buf, 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("count too low: %v", err)
	}
	if _, err := SplitBatch(buf, 1<<30); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("absurd count: %v", err)
	}
}

func TestCompressionRoundTrip(t *testing.T) {
	var c Codecs
	defer c.Close()
	src := bytes.Repeat([]byte("streamrun payload "), 500)
	for _, ct := range []pb.CompressionType{pb.CompressionType_NONE, pb.CompressionType_LZ4, pb.CompressionType_ZLIB, pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY} {
		t.Run(ct.String(), func(t *testing.T) {
			z, err := c.Compress(ct, nil, src)
			if err != nil {
				t.Fatal(err)
			}
			if ct != pb.CompressionType_NONE && len(z) >= len(src) {
				t.Fatalf("%s did not compress: %d >= %d", ct, len(z), len(src))
			}
			out, err := c.Decompress(ct, []byte("pre"), z, len(src), DefaultMaxMessageSize)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out[3:], src) || string(out[:3]) != "pre" {
				t.Fatal("round trip changed the data")
			}
			if _, err := c.Decompress(ct, nil, z, len(src)+1, DefaultMaxMessageSize); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("wrong stated size: want ErrCorrupt, got %v", err)
			}
			if _, err := c.Decompress(ct, nil, z, DefaultMaxMessageSize+1, DefaultMaxMessageSize); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("size over limit: want ErrCorrupt, got %v", err)
			}
		})
	}
}

// The literals-only block Compress falls back to when lz4 gives up must
// decode to its input at every length encoding (under 15, 15, 15+255k).
func TestLZ4Literals(t *testing.T) {
	var c Codecs
	defer c.Close()
	for _, n := range []int{1, 14, 15, 16, 269, 270, 271, 1000} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + i/3)
		}
		z := appendLZ4Literals([]byte("pre"), src)
		if string(z[:3]) != "pre" {
			t.Fatalf("%d: prefix overwritten", n)
		}
		out, err := c.Decompress(pb.CompressionType_LZ4, nil, z[3:], n, DefaultMaxMessageSize)
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		if !bytes.Equal(out, src) {
			t.Fatalf("%d: round trip changed the data", n)
		}
	}
}

func TestMessageIDText(t *testing.T) {
	longest := MessageID{Ledger: math.MaxUint64, Entry: math.MaxUint64 - 1, Partition: math.MaxInt32, BatchIndex: math.MaxInt32}
	for _, id := range []MessageID{{Ledger: 17, Entry: 4, Partition: -1, BatchIndex: -1}, {Ledger: 1, Entry: 0, Partition: 3, BatchIndex: 9}, Earliest, Latest, longest} {
		got, err := ParseMessageID(id.String())
		if err != nil || got != id {
			t.Fatalf("%s: got %v %v", id, got, err)
		}
		// AppendText appends String's text after what b holds.
		if b := id.AppendText([]byte("x")); string(b) != "x"+id.String() {
			t.Fatalf("%s: AppendText gave %q", id, b)
		}
		if back := MessageIDFromProto(id.Proto()); back != id {
			t.Fatalf("%s: proto round trip gave %v", id, back)
		}
	}
	for _, bad := range []string{"", "1", "a:b:c", "1:2:-5", "1:2:3:x"} {
		if _, err := ParseMessageID(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
	a := MessageID{Ledger: 1, Entry: 2, BatchIndex: 0}
	if s := longest.String(); len(s) > MaxMessageIDText || s != "18446744073709551615:18446744073709551614:2147483647:2147483647" {
		t.Fatalf("the longest id is %q (%d bytes, MaxMessageIDText %d)", s, len(s), MaxMessageIDText)
	}
	if s := (MessageID{Ledger: 17, Entry: 4, Partition: -1, BatchIndex: -1}).String(); s != "17:4:-1:-1" {
		t.Fatalf("text form %q", s)
	}
	if a.Compare(MessageID{Ledger: 1, Entry: 2, BatchIndex: 1}) >= 0 || a.Compare(MessageID{Ledger: 1, Entry: 1}) <= 0 {
		t.Fatal("Compare order wrong")
	}
}

func TestServerErrorsClassified(t *testing.T) {
	busy := NewServerError(pb.ServerError_ConsumerBusy, "exclusive consumer is already connected")
	if !errors.Is(busy, ErrConsumerBusy) || errors.Is(busy, ErrServiceNotReady) || !Retryable(busy) {
		t.Fatal("ConsumerBusy misclassified")
	}
	wrapped := errors.Join(errors.New("subscribe"), NewServerError(pb.ServerError_AuthorizationError, "no"))
	if Retryable(wrapped) || !errors.Is(wrapped, ErrAuthorizationError) {
		t.Fatal("AuthorizationError must be final and matchable through wrapping")
	}
	for _, final := range []*ServerError{ErrInvalidTopicName, ErrTopicNotFound, ErrIncompatibleSchema, ErrAuthenticationError} {
		if Retryable(final) {
			t.Fatalf("%s must be final", final)
		}
	}
	for _, again := range []error{ErrServiceNotReady, ErrTooManyRequests, ErrProducerBusy, ErrMetadataError, ErrTimeout, ErrConnectionClosed} {
		if !Retryable(again) {
			t.Fatalf("%s must be retryable", again)
		}
	}
	if code, ok := ServerCode(busy); !ok || code != pb.ServerError_ConsumerBusy {
		t.Fatal("ServerCode lost the code")
	}
}

func TestParseTopic(t *testing.T) {
	good := map[string]string{
		"orders":                       "persistent://public/default/orders",
		"acme/prod/orders":             "persistent://acme/prod/orders",
		"non-persistent://acme/prod/x": "non-persistent://acme/prod/x",
		"persistent://public/default/t-partition-3": "persistent://public/default/t-partition-3",
	}
	for in, want := range good {
		tp, err := ParseTopic(in)
		if err != nil || tp.String() != want {
			t.Fatalf("%q: got %v %v", in, tp, err)
		}
	}
	tp, _ := ParseTopic("t-partition-3")
	if i, base := tp.PartitionIndex(); i != 3 || base.Local != "t" || base.Partition(3) != tp {
		t.Fatalf("partition index: %d %v", i, base)
	}
	for _, bad := range []string{"", "kafka://a/b/c", "a/b", "a//c", "persistent://a/b/", "a b/c/d", "persistent://a/b/c/d", "x\x00y"} {
		if _, err := ParseTopic(bad); err == nil || !strings.Contains(err.Error(), "topic name") {
			t.Fatalf("%q: want an error naming the topic, got %v", bad, err)
		}
	}
}
