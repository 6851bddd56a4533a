package pulsarwire

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The fuzz targets feed every decoder arbitrary bytes: none may panic or
// allocate without bound, and what decodes must re-encode consistently.
// Seeds live in testdata/fuzz/<target>/ (committed) besides those below.

func FuzzReader(f *testing.F) {
	f.Add(sendFrame(f, []byte("hello")))
	f.Fuzz(func(t *testing.T, in []byte) {
		// Both ways of reading must return the same frames and the same
		// kind of end.
		r := NewReader(bytes.NewReader(in), MaxFrameSize(64<<10))
		shared := NewReader(bytes.NewReader(in), MaxFrameSize(64<<10))
		shared.ShareMessageBuffers()
		for i := 0; i < 8; i++ {
			f, err := r.Next()
			g, gerr := shared.Next()
			if (err == nil) != (gerr == nil) || !bytes.Equal(f.Entry, g.Entry) || f.Cmd.GetType() != g.Cmd.GetType() {
				t.Fatalf("frame %d: %v, %v with shared buffers (entries of %d and %d bytes)", i, err, gerr, len(f.Entry), len(g.Entry))
			}
			if err != nil {
				return
			}
		}
	})
}

func FuzzParseFrame(f *testing.F) {
	f.Add(sendFrame(f, []byte("hello"))[4:])
	f.Fuzz(func(t *testing.T, body []byte) {
		fr, err := ParseFrame(body)
		if err != nil {
			return
		}
		Body(fr.Cmd)
		if fr.HasPayload() {
			out, err := AppendEntryCommand(nil, fr.Cmd, fr.Entry)
			if err != nil {
				return // a command missing required fields cannot be re-sent
			}
			again, err := ParseFrame(out[4:])
			if err != nil || !bytes.Equal(again.Payload, fr.Payload) {
				t.Fatalf("re-encoded entry differs: %v", err)
			}
		}
	})
}

func FuzzSplitBatch(f *testing.F) {
	b, _ := AppendBatchMessage(nil, &pb.SingleMessageMetadata{}, []byte("one"))
	b, _ = AppendBatchMessage(b, &pb.SingleMessageMetadata{}, []byte("two"))
	f.Add(b, 2)
	f.Fuzz(func(t *testing.T, payload []byte, n int) {
		msgs, err := SplitBatch(payload, n)
		if err == nil && len(msgs) != n {
			t.Fatalf("%d messages for n=%d", len(msgs), n)
		}
	})
}

func FuzzDecompress(f *testing.F) {
	var c Codecs
	src := bytes.Repeat([]byte("abc"), 100)
	for ct := range 5 {
		z, _ := c.Compress(pb.CompressionType(ct), nil, src)
		f.Add(uint8(ct), z, len(src))
	}
	f.Fuzz(func(t *testing.T, ct uint8, z []byte, size int) {
		var c Codecs
		defer c.Close()
		out, err := c.Decompress(pb.CompressionType(ct%6), nil, z, size, 1<<20)
		if err == nil && len(out) != size {
			t.Fatalf("got %d bytes, stated %d", len(out), size)
		}
	})
}

func FuzzParseMessageID(f *testing.F) {
	f.Add("1:2:-1:-1")
	f.Add("earliest")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseMessageID(s)
		if err != nil {
			return
		}
		again, err := ParseMessageID(id.String())
		if err != nil || again != id {
			t.Fatalf("%q -> %v -> %v %v", s, id, again, err)
		}
	})
}

func FuzzParseTopic(f *testing.F) {
	f.Add("persistent://public/default/t")
	f.Add("t-partition-1")
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTopic(s)
		if err != nil {
			return
		}
		again, err := ParseTopic(tp.String())
		if err != nil || again != tp {
			t.Fatalf("%q -> %v -> %v %v", s, tp, again, err)
		}
	})
}

func FuzzParseEntry(f *testing.F) {
	entry, err := AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(2)}, []byte("hello"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(entry)
	f.Add(entry[6:]) // without the checksum
	f.Fuzz(func(t *testing.T, entry []byte) {
		md, payload, err := ParseEntry(entry)
		if err != nil && !errors.Is(err, ErrChecksum) {
			if md != nil || payload != nil {
				t.Fatalf("error %v with metadata or payload", err)
			}
			return
		}
		if md == nil {
			t.Fatalf("no metadata and no error")
		}
		// What decodes re-encodes to an entry carrying the same payload.
		again, err := AppendEntry(nil, md, payload)
		if err != nil {
			return // metadata missing required fields cannot be re-sent
		}
		_, p2, err := ParseEntry(again)
		if err != nil || !bytes.Equal(p2, payload) {
			t.Fatalf("re-encoded entry: %v, payload %q, want %q", err, p2, payload)
		}
	})
}

func FuzzConsumeField(f *testing.F) {
	f.Add(protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), []byte("x")))
	f.Add(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 300))
	f.Add(protowire.AppendFixed32(protowire.AppendTag(nil, 2, protowire.Fixed32Type), 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Walk the buffer as the hand decoders do: every step consumes at
		// least one byte and never runs past the end.
		for len(b) > 0 {
			_, typ, _, body, n := ConsumeField(b)
			if n < 0 {
				return
			}
			if n == 0 || n > len(b) {
				t.Fatalf("consumed %d of %d bytes", n, len(b))
			}
			if typ == protowire.BytesType && len(body) > n {
				t.Fatalf("body of %d bytes in a field of %d", len(body), n)
			}
			b = b[n:]
		}
	})
}
