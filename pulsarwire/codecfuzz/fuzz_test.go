package codecfuzz_test

import (
	"bytes"
	"testing"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// FuzzDecompress feeds the five codecs' decoders arbitrary bytes and
// stated sizes: none may panic or allocate past the limit, and what
// decodes has exactly the stated size. Seeds live in
// testdata/fuzz/FuzzDecompress/ (committed) besides those below.
func FuzzDecompress(f *testing.F) {
	var c pulsarwire.Codecs
	src := bytes.Repeat([]byte("abc"), 100)
	for ct := range 5 {
		z, _ := c.Compress(pb.CompressionType(ct), nil, src)
		f.Add(uint8(ct), z, len(src))
	}
	// One Codecs for the worker's life, as a connection keeps one: making
	// a zstd decoder per input cost more than decoding it, and reuse also
	// checks that a bad input leaves the Codecs fit for the next one.
	f.Cleanup(c.Close)
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, ct uint8, z []byte, size int) {
		out, err := c.Decompress(pb.CompressionType(ct%6), nil, z, size, limit)
		if err == nil && len(out) != size {
			t.Fatalf("got %d bytes, stated %d", len(out), size)
		}
		if err == nil && size > limit {
			t.Fatalf("%d bytes decoded over the limit of %d", size, limit)
		}
	})
}
