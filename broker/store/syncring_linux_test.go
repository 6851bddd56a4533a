package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// ringOrSkip makes a ring, or skips where io_uring is not available (the
// store then syncs with the system call, which other tests cover).
func ringOrSkip(t *testing.T) *syncRing {
	t.Helper()
	r, err := newSyncRing()
	if err != nil {
		t.Skipf("io_uring not available here (%v): the store falls back to fdatasync(2)", err)
	}
	t.Cleanup(r.close)
	return r
}

// A ring's fdatasync reports the call's own error (a bad descriptor) as
// the call's, not the ring's, and the ring goes on serving.
func TestSyncRingReportsTheCallsErrorAndGoesOn(t *testing.T) {
	r := ringOrSkip(t)
	p, w, err := os.Pipe()
	must(t, err)
	bad := p.Fd()
	p.Close()
	w.Close()
	callErr, ringErr := r.fdatasync(bad)
	if ringErr != nil || !errors.Is(callErr, unix.EBADF) {
		t.Fatalf("fdatasync of a closed descriptor: call %v, ring %v; want EBADF from the call", callErr, ringErr)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	must(t, err)
	defer f.Close()
	for i := range 3 {
		if _, err := f.WriteString("x"); err != nil {
			t.Fatal(err)
		}
		if callErr, ringErr := r.fdatasync(f.Fd()); callErr != nil || ringErr != nil {
			t.Fatalf("round %d: fdatasync of a file: call %v, ring %v", i, callErr, ringErr)
		}
	}
}

// A store at Sync runs SyncTo's fdatasyncs through rings, at most
// maxSyncRings of them however many topics sync at once, and every append
// reads back, there and after a reopen.
func TestSyncStoreSyncsThroughRingsAcrossTopics(t *testing.T) {
	ringOrSkip(t)
	dir := t.TempDir()
	opts := Options{Dir: dir, Sync: true, SegmentBytes: 8 << 10}
	s := open(t, opts)
	const topics, each = 12, 60
	var wg sync.WaitGroup
	errs := make(chan error, topics)
	for k := range topics {
		l := topic(t, s, fmt.Sprintf("t%d", k))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); i < each; i++ {
				if _, err := l.Append(int64(1000+i), payload(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s.rings.off.Load() {
		t.Fatal("the rings were turned off: a ring failed")
	}
	if n := s.rings.made.Load(); n < 1 || n > maxSyncRings {
		t.Fatalf("%d rings made, want 1 to %d", n, maxSyncRings)
	}
	for k := range topics {
		checkEntries(t, topic(t, s, fmt.Sprintf("t%d", k)), 0, each, 17)
	}
	must(t, s.Close())
	s = open(t, opts)
	for k := range topics {
		checkEntries(t, topic(t, s, fmt.Sprintf("t%d", k)), 0, each, 17)
	}
}

// Without rings (none made, or io_uring off after a failure) syncData is
// the system call, with its errors.
func TestSyncDataWithoutRingsIsTheSystemCall(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	must(t, err)
	off := newSyncRings()
	off.off.Store(true)
	for _, rs := range []*syncRings{nil, off} {
		if err := syncData(rs, f); err != nil {
			t.Fatalf("syncData: %v", err)
		}
	}
	if off.made.Load() != 0 {
		t.Fatal("a ring was made after io_uring was turned off")
	}
	f.Close()
	if err := syncData(nil, f); err == nil {
		t.Fatal("syncData of a closed file succeeded")
	}
}

// Raw writes at Sync only where writes never wait for writeback.
func TestRawWritesSafeOnlyWhereKnown(t *testing.T) {
	if rawWritesSafe("/proc") {
		t.Fatal("rawWritesSafe(/proc) = true: not a file system it knows")
	}
	if rawWritesSafe(filepath.Join(t.TempDir(), "missing")) {
		t.Fatal("rawWritesSafe of a missing directory = true")
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err == nil && st.Type == unix.TMPFS_MAGIC && !rawWritesSafe("/dev/shm") {
		t.Fatal("rawWritesSafe(tmpfs) = false")
	}
}

// A store at Sync in a directory it creates itself writes raw where that
// file system allows it: the check runs once the directory exists.
func TestSyncStoreInANewDirectoryChecksItsFileSystem(t *testing.T) {
	parent := t.TempDir()
	if !rawWritesSafe(parent) {
		t.Skipf("%s is not a file system known to never wait for writeback", parent)
	}
	s := open(t, Options{Dir: filepath.Join(parent, "new", "data"), Sync: true})
	if fmt.Sprintf("%p", s.writeAt) != fmt.Sprintf("%p", writeRecordAt) {
		t.Fatal("a new directory on a file system that never waits for writeback: records not written raw")
	}
}
