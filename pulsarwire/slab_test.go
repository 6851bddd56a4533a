package pulsarwire

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// pattern returns n bytes of a pattern that differs with seed, so that a
// payload overwritten by a later frame shows.
func pattern(seed, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seed*7 + i%251)
	}
	return p
}

// With ShareMessageBuffers, frames of every size come out whole however
// the stream is cut into reads; every payload read stays as it was after
// later frames (including ones read into a recycled buffer), and appending
// to one does not write over the next.
func TestReaderShareMessageBuffers(t *testing.T) {
	sizes := []int{0, 1, 100, 1000, 60 << 10, 300 << 10, slabSize - 40, slabSize + 1, 2 << 20, 5, 100 << 10}
	var in []byte
	var want [][]byte // nil: a command alone
	for i := 0; i < 3; i++ {
		for j, n := range sizes {
			p := pattern(i*len(sizes)+j, n)
			in = append(in, sendFrame(t, p)...)
			want = append(want, p)
			flow, err := AppendCommand(nil, Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(uint64(j)), MessagePermits: proto.Uint32(9)}))
			if err != nil {
				t.Fatal(err)
			}
			in = append(in, flow...)
			want = append(want, nil)
		}
	}
	for _, cut := range []struct {
		name string
		r    func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"halves", iotest.HalfReader},
		{"bytes", iotest.OneByteReader},
	} {
		t.Run(cut.name, func(t *testing.T) {
			r := NewReader(cut.r(bytes.NewReader(in)), MaxFrameSize(DefaultMaxMessageSize))
			r.ShareMessageBuffers()
			var got []Frame
			for i, w := range want {
				f, err := r.Next()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if w == nil {
					if f.HasPayload() || f.Cmd.GetFlow().GetMessagePermits() != 9 {
						t.Fatalf("frame %d: want a FLOW, got %s", i, f.Cmd.GetType())
					}
					continue
				}
				if !bytes.Equal(f.Payload, w) {
					t.Fatalf("frame %d: payload of %d bytes differs from the %d sent", i, len(f.Payload), len(w))
				}
				if cap(f.Payload) != len(f.Payload) || cap(f.Entry) != len(f.Entry) {
					t.Fatalf("frame %d: capacity runs past the frame (payload %d of %d, entry %d of %d)", i, len(f.Payload), cap(f.Payload), len(f.Entry), cap(f.Entry))
				}
				got = append(got, f)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("after the last frame: want io.EOF, got %v", err)
			}
			runtime.GC() // recycled buffers must not be among those still referenced
			runtime.GC()
			k := 0
			for _, w := range want {
				if w == nil {
					continue
				}
				f := got[k]
				k++
				_ = append(f.Payload, 0xee) // must not touch the next frame
				if !bytes.Equal(f.Payload, w) {
					t.Fatalf("payload %d changed after later frames", k-1)
				}
			}
		})
	}
}

// A buffer of slabSize goes back to the pool once nothing refers to it,
// and never while a payload read into it is referenced.
func TestReaderRecyclesOnlyUnreferencedBuffers(t *testing.T) {
	frame := sendFrame(t, pattern(1, 200<<10))
	var in []byte
	for i := 0; i < 64; i++ { // about 12 buffers of slabSize
		in = append(in, frame...)
	}
	r := NewReader(bytes.NewReader(in), MaxFrameSize(DefaultMaxMessageSize))
	r.ShareMessageBuffers()
	var kept []byte
	for i := 0; i < 64; i++ {
		f, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if i == 40 { // well past the growth from 64 KiB: in a buffer of slabSize
			kept = f.Payload
		}
	}
	pool := r.slab.pool
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC() // finalizers of unreferenced buffers run after a collection
		pool.mu.Lock()
		n := len(pool.free)
		pool.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no buffer came back to the pool within 10 s of collections")
		}
		time.Sleep(time.Millisecond)
	}
	pool.mu.Lock()
	if len(pool.free) > poolSlabs {
		t.Errorf("%d buffers pooled, at most %d kept", len(pool.free), poolSlabs)
	}
	for _, s := range pool.free {
		// Free for reuse: scribbling over it must not touch the payload
		// still referenced.
		for i := range s {
			s[i] = 0xaa
		}
	}
	pool.mu.Unlock()
	if !bytes.Equal(kept, pattern(1, 200<<10)) {
		t.Fatal("the buffer of a referenced payload came back to the pool")
	}
	runtime.KeepAlive(kept)
}

func ExampleReader_ShareMessageBuffers() {
	b, _ := AppendPayloadCommand(nil, Wrap(&pb.CommandSend{ProducerId: proto.Uint64(1), SequenceId: proto.Uint64(1)}),
		&pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1), PublishTime: proto.Uint64(1)}, []byte("hello"))
	r := NewReader(bytes.NewReader(b), MaxFrameSize(DefaultMaxMessageSize))
	r.ShareMessageBuffers()
	f, err := r.Next()
	fmt.Println(string(f.Payload), err)
	// Output: hello <nil>
}
