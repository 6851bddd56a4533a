package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type raw []byte

func (r raw) Size() int              { return len(r) }
func (r raw) Append(b []byte) []byte { return append(b, r...) }

// Frames come back whole and unchanged however the socket splits them,
// and a frame handed out is never overwritten by the reads after it (a
// decoded batch aliases its frame).
func TestFramesCrossWholeAndStayPut(t *testing.T) {
	bodies := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte("b"), chunkSize+10), []byte("last")}
	var stream []byte
	for _, b := range bodies {
		var err error
		if stream, err = AppendFrame(stream, raw(b)); err != nil {
			t.Fatal(err)
		}
	}
	readers := map[string]func() io.Reader{
		"whole":      func() io.Reader { return bytes.NewReader(stream) },
		"byte-wise":  func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half reads": func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
	}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			fr := NewFrameReader(r(), 1<<20)
			var got [][]byte
			for range bodies {
				b, err := fr.Next()
				if err != nil {
					t.Fatalf("frame %d: %v", len(got), err)
				}
				got = append(got, b)
			}
			for i, b := range got {
				if !bytes.Equal(b, bodies[i]) {
					t.Errorf("frame %d: %d bytes %.10q, want %d bytes %.10q", i, len(b), b, len(bodies[i]), bodies[i])
				}
			}
			if _, err := fr.Next(); err != io.EOF {
				t.Errorf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestABadStreamIsAnError(t *testing.T) {
	whole, _ := AppendFrame(nil, raw("0123456789"))
	cases := map[string]struct {
		stream []byte
		max    int
		want   string
	}{
		"cut in the body":   {whole[:7], 100, io.ErrUnexpectedEOF.Error()},
		"cut in the length": {whole[:2], 100, io.ErrUnexpectedEOF.Error()},
		"above the limit":   {whole, 9, "a frame of 10 bytes, above the limit of 9"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewFrameReader(bytes.NewReader(c.stream), c.max).Next()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	if _, err := NewFrameReader(iotest.ErrReader(errors.New("reset")), 100).Next(); err == nil || err.Error() != "reset" {
		t.Fatalf("a failed read: %v", err)
	}
}
