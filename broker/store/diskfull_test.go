package store

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// A full disk fails the append that does not fit with ErrNoSpace; the part
// of the record that was written is cut off, so what came before reads back
// intact, the next append gets the next id once space returns, and a
// restart finds exactly the entries whose appends succeeded.
func TestAppendOnAFullDiskFailsCleanlyAndResumes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 4 << 10, CacheBytes: 2 << 10}
	s := open(t, opts)
	l := topic(t, s, "t")
	appendN(t, l, 0, 30) // crosses segments
	full := true
	s.writeAt = func(f *os.File, hdr, data []byte, off int64) (int, error) {
		b := append(hdr[:len(hdr):len(hdr)], data...)
		if !full {
			return f.WriteAt(b, off)
		}
		// What a full file system does: write what fits, then fail.
		n, _ := f.WriteAt(b[:len(b)/2], off)
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	for range 3 {
		_, err := l.Append(2000, payload(30))
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v, want ErrNoSpace", err)
		}
	}
	if got := l.Next(); got != 30 {
		t.Fatalf("Next() = %d after failed appends, want 30", got)
	}
	checkEntries(t, l, 0, 30, 7)
	full = false
	appendN(t, l, 30, 40)
	checkEntries(t, l, 0, 40, 7)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, opts)
	checkEntries(t, topic(t, s, "t"), 0, 40, 7)
}

// ENOSPC, however wrapped, is ErrNoSpace; other errors are not.
func TestNoSpaceMarksOnlyAFullDevice(t *testing.T) {
	err := noSpace(&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	if !errors.Is(err, ErrNoSpace) || err.Error() == "" {
		t.Fatalf("noSpace: %v", err)
	}
	if got := noSpace(os.ErrPermission); errors.Is(got, ErrNoSpace) {
		t.Fatalf("noSpace(%v) says disk full", os.ErrPermission)
	}
}
