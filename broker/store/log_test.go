package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const tname = "persistent://public/default/t-partition-0"

func TestAppendReadRoundTripAcrossSegments(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		s := open(t, opts)
		l := topic(t, s, tname)
		if l.Next() != 0 || l.First() != 0 {
			t.Fatalf("empty log: First %d Next %d, want 0 0", l.First(), l.Next())
		}
		if ents, err := l.Read(0, 10, 0); err != nil || len(ents) != 0 {
			t.Fatalf("Read of empty log = %d entries, %v", len(ents), err)
		}
		appendN(t, l, 0, 500)
		if opts.Dir != "" {
			if n := len(segFiles(t, opts.Dir, tname)); n < 10 {
				t.Fatalf("%d segment files, want the log to roll many times", n)
			}
		}
		for _, max := range []int{1, 7, 100, 0} {
			checkEntries(t, l, 0, 500, max)
		}
		checkEntries(t, l, 321, 500, 13)
		if ents, _ := l.Read(500, 10, 0); len(ents) != 0 {
			t.Fatalf("Read(Next()) = %d entries, want none", len(ents))
		}
	})
}

func TestReadLimits(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		l := topic(t, open(t, opts), tname)
		big := bytes.Repeat([]byte("x"), 3000)
		for i := range 20 {
			d := []byte{byte(i)}
			if i == 10 {
				d = big
			}
			if _, err := l.Append(int64(i), d); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			from         uint64
			maxE, maxB   int
			wantN, first int
		}{
			{0, 5, 0, 5, 0},
			{0, 0, 4, 4, 0},      // 1 byte each
			{8, 0, 100, 2, 8},    // stops before the big one
			{10, 0, 100, 1, 10},  // the big one alone, although over maxBytes
			{10, 0, 3005, 6, 10}, // big one plus five
			{15, 100, 0, 5, 15},  // to the end
			{25, 100, 0, 0, 0},   // past the end
		} {
			ents, err := l.Read(tc.from, tc.maxE, tc.maxB)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != tc.wantN || (len(ents) > 0 && ents[0].ID != uint64(tc.first)) {
				t.Errorf("Read(%d, %d, %d): %d entries, want %d from %d", tc.from, tc.maxE, tc.maxB, len(ents), tc.wantN, tc.first)
			}
		}
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 8 << 10, CacheBytes: 4 << 10}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	l := topic(t, s, tname)
	other := topic(t, s, "persistent://public/default/other")
	appendN(t, l, 0, 300)
	appendN(t, other, 0, 3)
	ledger := l.LedgerID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(0, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}

	s = open(t, opts)
	if got := s.Topics(); !slices.Equal(got, []string{"persistent://public/default/other", tname}) {
		t.Fatalf("Topics() = %q", got)
	}
	if !s.HasTopic(tname) || s.HasTopic("persistent://public/default/never") {
		t.Fatal("HasTopic disagrees with Topics")
	}
	l = topic(t, s, tname)
	if l.LedgerID() != ledger {
		t.Fatalf("LedgerID changed over reopen: %d, was %d", l.LedgerID(), ledger)
	}
	checkEntries(t, l, 0, 300, 50)
	appendN(t, l, 300, 350) // appends go on with the next id
	checkEntries(t, l, 0, 350, 0)
	checkEntries(t, topic(t, s, "persistent://public/default/other"), 0, 3, 0)
}

func TestSecondOpenOfADirectoryFails(t *testing.T) {
	dir := t.TempDir()
	open(t, Options{Dir: dir})
	if s, err := Open(Options{Dir: dir}); err == nil {
		s.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
}

// lastRecordOffset returns the offset of the last record in the topic's last
// segment, for tests that damage it.
func lastSegment(t *testing.T, dir string) (path string, recOffsets []int64) {
	t.Helper()
	segs := segFiles(t, dir, tname)
	path = segs[len(segs)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(segHeaderSize); off < int64(len(b)); {
		recOffsets = append(recOffsets, off)
		off += recHeaderSize + int64(uint32(b[off])|uint32(b[off+1])<<8|uint32(b[off+2])<<16|uint32(b[off+3])<<24)
	}
	return path, recOffsets
}

func TestTornTailRecoversToLastWholeRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, last int64, size int64)
		want   uint64 // Next() after recovery
	}{
		{"cut mid data", func(t *testing.T, path string, last, size int64) { truncate(t, path, size-3) }, 49},
		{"cut mid header", func(t *testing.T, path string, last, size int64) { truncate(t, path, last+7) }, 49},
		{"cut after header", func(t *testing.T, path string, last, size int64) { truncate(t, path, last+recHeaderSize) }, 49},
		{"garbage appended", func(t *testing.T, path string, last, size int64) {
			appendBytes(t, path, []byte("this is not a record, just noise left by a crash"))
		}, 50},
		{"zeros appended", func(t *testing.T, path string, last, size int64) { appendBytes(t, path, make([]byte, 4096)) }, 50},
		{"last record's checksum bad", func(t *testing.T, path string, last, size int64) { flip(t, path, size-1) }, 49},
		{"small length noise", func(t *testing.T, path string, last, size int64) {
			appendBytes(t, path, []byte{3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
		}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 1 << 20}
			s, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, topic(t, s, tname), 0, 50)
			s.Close()

			path, offs := lastSegment(t, dir)
			fi, _ := os.Stat(path)
			tc.damage(t, path, offs[len(offs)-1], fi.Size())

			s = open(t, opts)
			l := topic(t, s, tname)
			checkEntries(t, l, 0, tc.want, 0)
			// The tail is gone from the file, and appending goes on from there.
			appendN(t, l, tc.want, 60)
			s.Close()
			s = open(t, opts)
			checkEntries(t, topic(t, s, tname), 0, 60, 0)
		})
	}
}

func TestCorruptRecordInTheMiddleIsAnError(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 1 << 20}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, topic(t, s, tname), 0, 50)
	s.Close()
	path, offs := lastSegment(t, dir)
	flip(t, path, offs[20]+recHeaderSize+2) // a data byte of entry 20

	s = open(t, opts)
	_, err = s.Topic(tname)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Topic on a corrupt log: %v, want a *CorruptError", err)
	}
	if ce.File != path || ce.Offset != offs[20] {
		t.Fatalf("CorruptError names %s at %d, want %s at %d", ce.File, ce.Offset, path, offs[20])
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, fmt.Sprint(offs[20])) {
		t.Fatalf("error %q does not name the file and offset", msg)
	}
}

func TestCorruptSealedSegmentIsAnErrorOnRead(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 4 << 10, CacheBytes: -1}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, topic(t, s, tname), 0, 200)
	s.Close()
	first := segFiles(t, dir, tname)[0]
	flip(t, first, segHeaderSize+recHeaderSize+30*recHeaderSize)

	s = open(t, opts)
	l := topic(t, s, tname) // sealed segments are checked when first read
	_, err = l.Read(0, 0, 0)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != first {
		t.Fatalf("Read of a corrupt sealed segment: %v, want a *CorruptError naming %s", err, first)
	}
	// Later segments are still readable.
	segs := segFiles(t, dir, tname)
	second, _ := parseSegName(filepath.Base(segs[1]))
	checkEntries(t, l, second, 200, 0)
}

func TestSeekTime(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		l := topic(t, open(t, opts), tname)
		// Times rise by 10 but with a dip: id 150 has an early time.
		for i := range 400 {
			pt := int64(10 * i)
			if i == 150 {
				pt = 5
			}
			if _, err := l.Append(pt, payload(uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			ms   int64
			want uint64
		}{
			{-1, 0}, {0, 0}, {1, 1}, {10, 1}, {11, 2}, {1495, 151}, {1500, 151},
			{2345, 235}, {3990, 399}, {3991, 400}, {1 << 40, 400},
		} {
			got, err := l.SeekTime(tc.ms)
			if err != nil || got != tc.want {
				t.Errorf("SeekTime(%d) = %d, %v; want %d", tc.ms, got, err, tc.want)
			}
		}
		if err := l.Trim(200); err != nil {
			t.Fatal(err)
		}
		if got, _ := l.SeekTime(0); got != 200 {
			t.Errorf("SeekTime(0) after Trim(200) = %d, want 200", got)
		}
	})
}

func TestTrim(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		s := open(t, opts)
		l := topic(t, s, tname)
		appendN(t, l, 0, 300)
		var before int
		if opts.Dir != "" {
			before = len(segFiles(t, opts.Dir, tname))
		}
		if err := l.Trim(170); err != nil {
			t.Fatal(err)
		}
		if l.First() != 170 {
			t.Fatalf("First() = %d after Trim(170)", l.First())
		}
		ents, err := l.Read(3, 1, 0)
		if err != nil || len(ents) != 1 || ents[0].ID != 170 {
			t.Fatalf("Read below First = %v, %v; want entry 170", ents, err)
		}
		checkEntries(t, l, 170, 300, 0)
		if err := l.Trim(100); err != nil || l.First() != 170 {
			t.Fatalf("Trim backwards: First() = %d, %v", l.First(), err)
		}
		if opts.Dir == "" {
			return
		}
		after := len(segFiles(t, opts.Dir, tname))
		if after >= before {
			t.Fatalf("Trim deleted no segment file: %d before, %d after", before, after)
		}
		s.Close()
		s = open(t, opts)
		l = topic(t, s, tname)
		if l.First() != 170 {
			t.Fatalf("First() = %d after reopen, want 170", l.First())
		}
		checkEntries(t, l, 170, 300, 0)
		if err := l.Trim(1000); err != nil || l.First() != 300 || l.Next() != 300 {
			t.Fatalf("Trim past the end: First %d Next %d, %v; want 300 300", l.First(), l.Next(), err)
		}
		appendN(t, l, 300, 310)
		checkEntries(t, l, 300, 310, 0)
	})
}

func TestCursorsAndMetaSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Sync: true}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	l := topic(t, s, tname)
	must(t, l.SaveCursor("sub-a", []byte("pos 1")))
	must(t, l.SaveCursor("sub-a", []byte("pos 2"))) // replaces
	must(t, l.SaveCursor("Sub/B", []byte("b")))
	must(t, l.SaveCursor("sub-b", []byte("lower b"))) // distinct from Sub/B even on case-insensitive file systems
	must(t, l.SaveCursor("gone", []byte("x")))
	must(t, l.DeleteCursor("gone"))
	must(t, l.DeleteCursor("never was"))
	must(t, s.PutMeta("partitions/persistent://public/default/p", []byte("4")))
	must(t, s.PutMeta("partitions/persistent://public/default/q", []byte("2")))
	must(t, s.PutMeta("policies/public/default", []byte("{}")))
	must(t, s.PutMeta("partitions/old", []byte("1")))
	must(t, s.DeleteMeta("partitions/old"))
	s.Close()

	s = open(t, opts)
	l = topic(t, s, tname)
	curs, err := l.Cursors()
	must(t, err)
	want := map[string]string{"sub-a": "pos 2", "Sub/B": "b", "sub-b": "lower b"}
	if len(curs) != len(want) {
		t.Fatalf("Cursors() = %q, want %q", curs, want)
	}
	for k, v := range want {
		if string(curs[k]) != v {
			t.Fatalf("cursor %q = %q, want %q", k, curs[k], v)
		}
	}
	parts, err := s.ListMeta("partitions/")
	must(t, err)
	if len(parts) != 2 || string(parts["partitions/persistent://public/default/p"]) != "4" ||
		string(parts["partitions/persistent://public/default/q"]) != "2" {
		t.Fatalf("ListMeta = %q", parts)
	}
	v, ok, err := s.GetMeta("policies/public/default")
	if err != nil || !ok || string(v) != "{}" {
		t.Fatalf("GetMeta = %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.GetMeta("partitions/old"); ok {
		t.Fatal("a deleted meta key came back")
	}
}

func TestDeleteTopicThenCreateGetsLargerLedger(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		s := open(t, opts)
		l := topic(t, s, tname)
		other := topic(t, s, "other")
		appendN(t, l, 0, 20)
		must(t, l.SaveCursor("sub", []byte("x")))
		old := l.LedgerID()

		must(t, s.DeleteTopic(tname))
		if _, err := l.Read(0, 1, 0); !errors.Is(err, ErrDeleted) {
			t.Fatalf("Read of a deleted topic: %v, want ErrDeleted", err)
		}
		if slices.Contains(s.Topics(), tname) {
			t.Fatal("deleted topic still listed")
		}
		if s.HasTopic(tname) {
			t.Fatal("HasTopic reports a deleted topic")
		}
		if err := s.DeleteTopic(tname); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second DeleteTopic: %v, want ErrNotFound", err)
		}

		l = topic(t, s, tname)
		if l.LedgerID() <= old || l.LedgerID() <= other.LedgerID() {
			t.Fatalf("new LedgerID %d, want above %d and %d", l.LedgerID(), old, other.LedgerID())
		}
		if l.Next() != 0 {
			t.Fatalf("recreated topic has Next() = %d", l.Next())
		}
		if c, _ := l.Cursors(); len(c) != 0 {
			t.Fatalf("recreated topic has cursors %q", c)
		}
		if opts.Dir == "" {
			return
		}
		newer := l.LedgerID()
		must(t, s.DeleteTopic(tname))
		s.Close()
		s = open(t, opts)
		if got := topic(t, s, tname).LedgerID(); got <= newer {
			t.Fatalf("LedgerID after delete, reopen and create: %d, want above %d", got, newer)
		}
	})
}

func TestSyncModeConcurrentAppenders(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Sync: true, SegmentBytes: 4 << 10}
	s := open(t, opts)
	l := topic(t, s, tname)
	const writers, each = 4, 50
	var wg sync.WaitGroup
	ids := make(chan uint64, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id, err := l.Append(int64(w), fmt.Appendf(nil, "%d/%d", w, i))
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[uint64]bool{}
	for id := range ids {
		seen[id] = true
	}
	if len(seen) != writers*each || l.Next() != writers*each {
		t.Fatalf("%d distinct ids, Next() = %d; want %d", len(seen), l.Next(), writers*each)
	}
	s.Close()
	s = open(t, opts)
	ents, err := topic(t, s, tname).Read(0, 0, 0)
	if err != nil || len(ents) != writers*each {
		t.Fatalf("after reopen: %d entries, %v", len(ents), err)
	}
}

func TestConcurrentReadersWithAppender(t *testing.T) {
	modes(t, func(t *testing.T, opts Options) {
		s := open(t, opts)
		l := topic(t, s, tname)
		const total = 3000
		var wg sync.WaitGroup
		// Readers follow the tail by polling; one of them starts late and
		// reads old segments while appends go on.
		for r := range 4 {
			wg.Go(func() {
				next := uint64(0)
				if r == 3 {
					<-waitFor(l, 1000)
				}
				for next < total {
					ents, err := l.Read(next, 1+r*17, 2000)
					if err != nil {
						t.Error(err)
						return
					}
					for _, e := range ents {
						if e.ID != next || !bytes.Equal(e.Data, payload(e.ID)) {
							t.Errorf("reader %d: got entry %d %q, want %d", r, e.ID, e.Data, next)
							return
						}
						next++
					}
					if len(ents) == 0 {
						time.Sleep(pollGap)
					}
				}
			})
		}
		wg.Go(func() { // SeekTime racing with the appender
			for i := range 50 {
				if _, err := l.SeekTime(int64(1000 + i*50)); err != nil {
					t.Error(err)
					return
				}
			}
		})
		appendN(t, l, 0, total)
		wg.Wait()
	})
}

// pollGap is how long a test reader at the tail waits before it reads again.
const pollGap = 100 * time.Microsecond

// waitFor returns a channel closed once the log holds n entries.
func waitFor(l *Log, n uint64) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l.Next() < n {
			time.Sleep(pollGap)
		}
	}()
	return done
}

func TestTopicNamesAreEscapedSafely(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		"persistent://public/default/t",
		"persistent://public/default/T",
		"../../etc/passwd",
		".",
		"..",
		"a%2Fb",
		"a/b",
		"ünïcødé/日本",
		strings.Repeat("long-name/", 100) + "1",
		strings.Repeat("long-name/", 100) + "2",
		"with\x00nul",
	}
	s, err := Open(Options{Dir: dir})
	must(t, err)
	for i, n := range names {
		l := topic(t, s, n)
		if _, err := l.Append(int64(i), []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open(t, Options{Dir: dir})
	if got := s.Topics(); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Fatalf("Topics() after reopen = %q", got)
	}
	for _, n := range names {
		ents, err := topic(t, s, n).Read(0, 0, 0)
		if err != nil || len(ents) != 1 || string(ents[0].Data) != n {
			t.Fatalf("topic %q: %v %v", n, ents, err)
		}
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if !slices.Contains([]string{"LOCK", "ledger", "meta", "topics", "tmp"}, de.Name()) {
			t.Fatalf("unexpected entry %q in the store directory", de.Name())
		}
	}
}

func TestAppendTooLarge(t *testing.T) {
	l := topic(t, open(t, Options{}), tname)
	if _, err := l.Append(0, make([]byte, MaxEntryBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Append over MaxEntryBytes: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	must(t, os.Truncate(path, size))
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write(b)
	must(t, err)
	must(t, f.Close())
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	must(t, err)
	b[0] ^= 0x5a
	_, err = f.WriteAt(b, off)
	must(t, err)
}

func TestDiskReadsOfBigAndStraddlingRecords(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 4 << 20, CacheBytes: -1}
	s := open(t, opts)
	l := topic(t, s, tname)
	appendN(t, l, 0, 3000) // ~0.5 MiB in one segment, read in blocks that cut records
	// Entries far bigger than a read block.
	sizes := []int{300 << 10, 1, 2 << 20, 0, 700 << 10}
	for i, n := range sizes {
		if _, err := l.Append(int64(i), bytes.Repeat([]byte{byte(i + 1)}, n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, maxBytes := range []int{1, 1000, 100_000, 0} {
		next := uint64(0)
		for next < 3000 {
			ents, err := l.Read(next, 0, maxBytes)
			must(t, err)
			for _, e := range ents {
				if e.ID >= 3000 {
					break
				}
				if e.ID != next || !bytes.Equal(e.Data, payload(e.ID)) {
					t.Fatalf("maxBytes %d: entry %d, want %d", maxBytes, e.ID, next)
				}
				next++
			}
		}
	}
	for i, n := range sizes {
		ents, err := l.Read(3000+uint64(i), 1, 1)
		must(t, err)
		if len(ents) != 1 || len(ents[0].Data) != n || (n > 0 && ents[0].Data[n-1] != byte(i+1)) {
			t.Fatalf("big entry %d: %d entries", i, len(ents))
		}
	}
	ents, err := l.Read(2999, 0, 0)
	must(t, err)
	if len(ents) != 1+len(sizes) {
		t.Fatalf("Read to the end: %d entries, want %d", len(ents), 1+len(sizes))
	}
}

// Trim deletes segments while readers are inside them: a reader gets whole,
// correct entries, skipping forward to First() when it falls behind.
func TestTrimWhileReading(t *testing.T) {
	opts := Options{Dir: t.TempDir(), SegmentBytes: 2 << 10, CacheBytes: -1}
	l := topic(t, open(t, opts), tname)
	const total = 3000
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			next := uint64(0)
			for next < total {
				ents, err := l.Read(next, 5+r, 0)
				if err != nil {
					t.Error(err)
					return
				}
				for i, e := range ents {
					if e.ID < next || (i > 0 && e.ID != ents[i-1].ID+1) || !bytes.Equal(e.Data, payload(e.ID)) {
						t.Errorf("reader %d asked from %d, got entry %d", r, next, e.ID)
						return
					}
				}
				if len(ents) == 0 {
					time.Sleep(pollGap)
					continue
				}
				next = ents[len(ents)-1].ID + 1
			}
		})
	}
	for i := uint64(0); i < total; i++ {
		appendN(t, l, i, i+1)
		if i%50 == 0 && i > 200 {
			must(t, l.Trim(i-200))
		}
	}
	wg.Wait()
	if n := len(segFiles(t, opts.Dir, tname)); n > 200 {
		t.Fatalf("%d segment files left after trimming", n)
	}
}

// Without Sync a power cut soon after a roll can leave the new segment with
// neither its header nor its records (the rename reached the disk, the data
// did not): the topic opens with Next() at that segment's base.
func TestBlankLastSegmentIsRecreated(t *testing.T) {
	for _, blank := range []func(t *testing.T, path string){
		func(t *testing.T, path string) { truncate(t, path, 0) },
		func(t *testing.T, path string) { truncate(t, path, 0); truncate(t, path, 4096) }, // zeros
	} {
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentBytes: 2 << 10}
		s, err := Open(opts)
		must(t, err)
		appendN(t, topic(t, s, tname), 0, 100)
		s.Close()
		segs := segFiles(t, dir, tname)
		base, _ := parseSegName(filepath.Base(segs[len(segs)-1]))
		blank(t, segs[len(segs)-1])

		s = open(t, opts)
		l := topic(t, s, tname)
		checkEntries(t, l, 0, base, 0)
		appendN(t, l, base, base+50)
		s.Close()
		s = open(t, opts)
		checkEntries(t, topic(t, s, tname), 0, base+50, 0)
	}
}

// With the tail cache off entries go to the files only and are read back
// from them; turned on again it caches what is written from then on.
func TestCacheTailOffWritesFilesOnly(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 8 << 10}
	s := open(t, opts)
	l := topic(t, s, tname)
	appendN(t, l, 0, 100)
	if l.cache.len() == 0 {
		t.Fatal("the cache holds nothing while on")
	}
	l.CacheTail(false)
	if n := l.cache.len(); n != 0 {
		t.Fatalf("the cache holds %d entries after CacheTail(false)", n)
	}
	appendN(t, l, 100, 300)
	if n := l.cache.len(); n != 0 {
		t.Fatalf("the cache holds %d entries written while off", n)
	}
	checkEntries(t, l, 0, 300, 7)
	l.CacheTail(true)
	appendN(t, l, 300, 400)
	if n, first := l.cache.len(), l.cache.first; n != 100 || first != 300 {
		t.Fatalf("the cache holds %d entries from %d, want 100 from 300", n, first)
	}
	checkEntries(t, l, 0, 400, 0)
	s.Close()
	s = open(t, opts)
	checkEntries(t, topic(t, s, tname), 0, 400, 50)
}
