package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field's short path (one-byte tags, one- or two-byte values and
// lengths) reads every input as protowire does, malformed ones included,
// and the short appends write what protowire writes.
func TestTheShortPathsAreProtowires(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		b := make([]byte, r.IntN(8))
		for k := range b {
			b[k] = byte(r.IntN(256))
		}
		if i%2 == 0 && len(b) > 0 { // many plausible tags, not only noise
			b[0] = byte(r.IntN(16))<<3 | byte(r.IntN(3))
		}
		num, typ, v, body, rest, err := Field(b)
		wnum, wtyp, wv, wbody, wrest, werr := fieldSlow(b)
		if (err == nil) != (werr == nil) || err == nil && (num != wnum || typ != wtyp || v != wv ||
			!bytes.Equal(body, wbody) || !bytes.Equal(rest, wrest)) {
			t.Fatalf("% x: got %d %d %d % x % x %v, protowire %d %d %d % x % x %v",
				b, num, typ, v, body, rest, err, wnum, wtyp, wv, wbody, wrest, werr)
		}
	}
	for _, num := range []protowire.Number{1, 15, 16, 2000} {
		for _, n := range []int{0, 1, 127, 128, 16383, 16384, 70000} {
			want := protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.BytesType), uint64(n))
			if got := AppendLen(nil, num, n); !bytes.Equal(got, want) {
				t.Errorf("AppendLen(%d, %d) = % x, protowire % x", num, n, got, want)
			}
			if got, want := SizeBytes(n), 1+protowire.SizeVarint(uint64(n))+n; got != want {
				t.Errorf("SizeBytes(%d) = %d, want %d", n, got, want)
			}
			if n == 0 {
				continue
			}
			want = protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), uint64(n))
			if got := AppendVarint(nil, num, uint64(n)); !bytes.Equal(got, want) {
				t.Errorf("AppendVarint(%d, %d) = % x, protowire % x", num, n, got, want)
			}
		}
	}
}
