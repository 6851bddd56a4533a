package store

import (
	"bytes"
	"runtime"
	"testing"
)

// ReadInto with a ReadBuffer returns the same entries as Read, across
// segments and blocks, and once the buffer has grown a backlog read
// allocates no memory for the entries' data.
func TestReadIntoReusesItsBuffer(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, CacheBytes: 2 << 10})
	l := topic(t, s, tname)
	appendN(t, l, 0, 3000)
	var rb ReadBuffer
	var ents []Entry
	for _, max := range []int{1, 7, 100, 0} {
		for next := uint64(0); next < 3000; {
			var err error
			ents, err = l.ReadInto(ents[:0], &rb, next, max, 0)
			if err != nil || len(ents) == 0 {
				t.Fatalf("ReadInto(%d, max %d) = %d entries, %v", next, max, len(ents), err)
			}
			for _, e := range ents {
				if e.ID != next || e.PublishTime != int64(1000+e.ID) || !bytes.Equal(e.Data, payload(e.ID)) {
					t.Fatalf("entry %d (want %d): time %d data %q", e.ID, next, e.PublishTime, e.Data)
				}
				next++
			}
		}
	}
	// The first read sizes the buffer; later reads of the same shape reuse
	// it: what is left to allocate does not grow with the bytes read.
	read := func() {
		var err error
		if ents, err = l.ReadInto(ents[:0], &rb, 100, 200, 0); err != nil || len(ents) != 200 {
			t.Fatalf("ReadInto = %d entries, %v", len(ents), err)
		}
	}
	read()
	if n := testing.AllocsPerRun(20, read); n > 1 {
		t.Fatalf("ReadInto with a grown ReadBuffer: %.0f allocations per read of 200 entries, want at most 1", n)
	}
	noBuf := func() {
		if _, err := l.Read(100, 200, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(20, noBuf); n < 2 {
		t.Fatalf("Read without a buffer: %.0f allocations, expected blocks and a result slice (the test would prove nothing)", n)
	}
	// Caught up with the tail (the cache serves it), the reader holds no
	// buffer any more.
	if rb.buf == nil {
		t.Fatal("the buffer was dropped after a read from the files")
	}
	if ents, err := l.ReadInto(ents[:0], &rb, l.Next()-1, 1, 0); err != nil || len(ents) != 1 || rb.buf != nil {
		t.Fatalf("read of the tail: %d entries, %v, buffer of %d bytes kept", len(ents), err, len(rb.buf))
	}
}

// Entries of mixed sizes read one at a time, as dispatch reads a batched
// backlog: a record bigger than the mean outgrows the block sized for it,
// and the rest is read into the ReadBuffer too, not into fresh memory.
func TestReadIntoRecordsBiggerThanTheMean(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir(), SegmentBytes: 64 << 20, CacheBytes: -1})
	l := topic(t, s, tname)
	const n = 64
	var data [n][]byte
	for id := range uint64(n) {
		// Each record past the index's spacing, so that each starts a
		// point and a read skips none; every fourth three times the mean.
		size := 100 << 10
		if id%4 == 3 {
			size = 1 << 20
		}
		data[id] = bytes.Repeat([]byte{byte(id)}, size)
		if _, err := l.Append(int64(id), data[id]); err != nil {
			t.Fatal(err)
		}
	}
	var rb ReadBuffer
	var ents []Entry
	read := func(id uint64) {
		var err error
		ents, err = l.ReadInto(ents[:0], &rb, id, 1, 0)
		if err != nil || len(ents) != 1 || ents[0].ID != id || !bytes.Equal(ents[0].Data, data[id]) {
			t.Fatalf("ReadInto(%d, 1) = %d entries, %v", id, len(ents), err)
		}
	}
	for id := uint64(0); id < n; id++ {
		read(id)
	}
	// Count bytes, not allocations: a fresh block for the record is one
	// allocation of its whole size.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 20
	for range runs {
		read(n - 1)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per >= 256<<10 {
		t.Fatalf("reading a record of 1 MiB, bigger than the mean, allocates %d bytes per read, want it read into the ReadBuffer", per)
	}
}
