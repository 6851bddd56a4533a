package store

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The combined checksum equals the one computed over the whole, for every
// split and length, including empty parts.
func TestCRC32CCombineMatchesTheDirectChecksum(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 5, 6, 7, 31, 32, 33, 1000, 4096, 70000, 1 << 20} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		want := crc32.Checksum(data, castagnoli)
		for _, split := range []int{0, min(1, n), min(6, n), n / 2, n} {
			a, b := crc32.Checksum(data[:split], castagnoli), crc32.Checksum(data[split:], castagnoli)
			if got := crc32cCombine(a, b, uint64(n-split)); got != want {
				t.Fatalf("len %d split %d: combined %08x, direct %08x", n, split, got, want)
			}
		}
	}
}

// A record header from a known sum is the same as one computed over the
// data, and a wrong known sum makes a record that fails its check.
func TestRecordHeaderFromAKnownSum(t *testing.T) {
	data := make([]byte, 9000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var want, got [recHeaderSize]byte
	putRecordHeader(want[:], 1234, data)
	putRecordHeaderKnown(got[:], 1234, data, 6, crc32.Checksum(data[6:], castagnoli))
	if got != want {
		t.Fatalf("header from a known sum %x, computed %x", got, want)
	}
	putRecordHeaderKnown(got[:], 1234, data, 6, crc32.Checksum(data[7:], castagnoli))
	if recordOK(got[:], data) {
		t.Fatal("a record made with a wrong known sum passes its check")
	}
}

// Entries written with a known sum read back from the files, where every
// record's checksum is checked, after a reopen.
func TestWriteKnownSumRecordsPassTheirCheck(t *testing.T) {
	opts := Options{Dir: t.TempDir(), SegmentBytes: 64 << 10}
	s := open(t, opts)
	l := topic(t, s, tname)
	var want [][]byte
	for i := range 20 {
		data := make([]byte, 3000+i*997)
		for j := range data {
			data[j] = byte(i + j*13)
		}
		if _, err := l.WriteKnownSum(int64(i), data, 6, crc32.Checksum(data[6:], castagnoli)); err != nil {
			t.Fatal(err)
		}
		want = append(want, data)
	}
	s.Close()
	l = topic(t, open(t, opts), tname)
	ents, err := l.Read(0, 0, 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(ents) != len(want) {
		t.Fatalf("read %d entries, want %d", len(ents), len(want))
	}
	for i, e := range ents {
		if string(e.Data) != string(want[i]) {
			t.Fatalf("entry %d differs", i)
		}
	}
}
