package wire

import (
	"bytes"
	"testing"
)

// A recycling reader reads into a chunk again only once every frame of
// it is released: a frame still held keeps its bytes.
func TestRecycledChunksWaitForTheirFrames(t *testing.T) {
	big := bytes.Repeat([]byte("a"), chunkSize-FrameHeader) // one frame fills a chunk
	var stream []byte
	for _, c := range []byte("abc") {
		body := bytes.Repeat([]byte{c}, len(big))
		var err error
		if stream, err = AppendFrame(stream, raw(body)); err != nil {
			t.Fatal(err)
		}
	}
	fr := NewRecyclingFrameReader(bytes.NewReader(stream), 1<<20)
	first, c1, err := fr.NextChunk()
	if err != nil || c1 == nil {
		t.Fatalf("first frame: chunk %v, error %v", c1, err)
	}
	second, c2, err := fr.NextChunk()
	if err != nil || c2 == nil || c2 == c1 {
		t.Fatalf("second frame: chunk %p (first's %p), error %v", c2, c1, err)
	}
	// first is still held: its chunk must not be read into.
	if first[0] != 'a' || second[0] != 'b' {
		t.Fatalf("frames start %q and %q, want a and b", first[0], second[0])
	}
	c1.Release()
	third, c3, err := fr.NextChunk()
	if err != nil {
		t.Fatal(err)
	}
	if c3 != c1 {
		t.Errorf("the third frame is in a new chunk, not the released first one")
	}
	if third[0] != 'c' || second[0] != 'b' {
		t.Errorf("frames start %q and %q, want c and b (the held second frame untouched)", third[0], second[0])
	}
	c2.Release()
	c3.Release()
}
