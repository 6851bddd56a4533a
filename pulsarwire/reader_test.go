package pulsarwire

import (
	"bytes"
	"testing"
)

// With ReuseMessageBuffers, message frames share the reader's buffer: each
// frame is whole when returned, the next one overwrites it, and a frame
// above the reuse limit gets a buffer of its own.
func TestReaderReuseMessageBuffers(t *testing.T) {
	small1 := bytes.Repeat([]byte("a"), 100)
	small2 := bytes.Repeat([]byte("b"), 100)
	big := bytes.Repeat([]byte("c"), maxReused+1)
	var in []byte
	for _, p := range [][]byte{small1, small2, big, small1} {
		in = append(in, sendFrame(t, p)...)
	}
	r := NewReader(bytes.NewReader(in), MaxFrameSize(DefaultMaxMessageSize))
	r.ReuseMessageBuffers()
	next := func(want []byte) Frame {
		t.Helper()
		f, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Payload, want) {
			t.Fatalf("payload of %d bytes, want %d bytes of %q", len(f.Payload), len(want), want[:1])
		}
		return f
	}
	first := next(small1)
	next(small2)
	if !bytes.Equal(first.Payload, small2) {
		t.Fatalf("second frame did not reuse the first one's buffer: first payload now %q...", first.Payload[:1])
	}
	third := next(big)
	next(small1)
	if !bytes.Equal(third.Payload, big) {
		t.Fatal("a frame above the reuse limit was overwritten by the next one")
	}
}

// Without the option a message frame keeps its own buffer.
func TestReaderMessageBufferOwned(t *testing.T) {
	in := append(sendFrame(t, []byte("one")), sendFrame(t, []byte("two"))...)
	r := NewReader(bytes.NewReader(in), MaxFrameSize(DefaultMaxMessageSize))
	f1, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if string(f1.Payload) != "one" {
		t.Fatalf("first payload became %q", f1.Payload)
	}
}
