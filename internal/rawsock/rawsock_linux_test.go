package rawsock

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// WriteBuffers writes every byte of its buffers in order: more buffers
// than one writev(2) takes, empty ones among them, and more bytes than
// the socket's buffer holds, so that it waits on the poller part way
// through a buffer.
func TestWriteBuffersWritesEverythingInOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	w := NewBuffersWriter(c)
	if w == nil {
		t.Fatal("no raw writer for a TCP conn")
	}
	r := rand.New(rand.NewPCG(1, 2))
	var bufs [][]byte
	var want []byte
	for i := 0; i < 3000; i++ {
		n := r.IntN(4000)
		if i%7 == 0 {
			n = 0
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	if err := w.WriteBuffers(bufs); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("read %d bytes, not the %d written in order", len(b), len(want))
	}
}
