package store

import (
	"errors"
	"fmt"
	"os"
)

// Preallocation (Options.Sync only). An append that makes a file longer
// changes its size, so the fsync after it writes the inode as well as the
// data: on ext4 a second, synchronous disk write per fsync round, plus
// the block allocation that delayed allocation does at that moment
// (docs/benchmarks.md, "Broker CPU at the sync level"). A segment that
// fsyncs therefore has its space written with zeros ahead of the appends,
// preallocChunk at a time, and that made durable (size and extents) by an
// fsync before any record goes there. An append then only overwrites
// blocks that already exist, and fdatasync(2) (syncData) has data pages to
// write and nothing else.
//
// The zeros are written with O_DIRECT (zeroRange): through the page cache
// they cost as much CPU as the fsyncs they save. Each record's write is
// padded with zeros to the end of its page, so that no page the zeros went
// past the cache for is ever written in part (which would make the kernel
// read it from the disk first). Where O_DIRECT is refused (tmpfs, other
// systems) the log appends as before.
//
// A preallocated segment's file is longer than its records: recovery finds
// the end of the log from the records themselves (scanSegment), and a
// segment is cut to its records when the log rolls to the next one.

// preallocChunk is how much a preallocating segment grows by at once.
const preallocChunk = 4 << 20

// pageSize is the unit the zeros and the padding are aligned to; O_DIRECT
// needs the file system's block size, which is at most this on the
// systems it is used on.
const pageSize = 4096

// zeroPage is the padding written after a record; never modified.
var zeroPage [pageSize]byte

// errNoPrealloc means this system or file system cannot preallocate the
// way the store needs (see zeroRange).
var errNoPrealloc = errors.New("preallocation not supported")

func alignUp(n int64) int64 { return (n + pageSize - 1) &^ (pageSize - 1) }

// preallocate makes sure segment a's file holds zeros, durably, up to at
// least alignUp(end): it writes the next chunk (no further than the
// segment's size limit, unless one record needs more) and fsyncs. On
// failure the log stops preallocating (it appends as before); nothing is
// lost, as the region beyond a.size holds zeros or nothing. Called with
// l.mu held.
func (l *Log) preallocate(a *segment, end int64) {
	from := a.alloc
	if from == 0 {
		from = alignUp(a.size)
	}
	to := max(from+preallocChunk, alignUp(end))
	if limit := alignUp(l.s.opts.SegmentBytes); to > limit {
		to = max(limit, alignUp(end))
	}
	err := zeroRange(a.path, from, to-from)
	if err == nil {
		err = a.f.Sync() // the size and extents, before records rely on them
	}
	if err != nil {
		if !errors.Is(err, errNoPrealloc) {
			l.s.log.Warn("store: preallocating segment failed; appending without", "topic", l.name, "file", a.path, "err", err)
		}
		l.prealloc = false
		a.alloc = -1 // the file may be longer than its records
		return
	}
	a.alloc = to
}

// padFor returns the zero bytes to write after a record ending at end in
// segment a: up to its page's end when that is preallocated, else none.
func padFor(a *segment, end int64) int {
	if p := alignUp(end); a.alloc >= p {
		return int(p - end)
	}
	return 0
}

// sealFile cuts a segment the log is rolling away from to its records, when
// its file may be longer (preallocated), so that a sealed segment's size is
// its records' and a crash cannot leave zeros between two segments. The cut
// is fsynced whatever the log's Sync: it happens once per segment.
func sealFile(a *segment) error {
	if a.alloc == 0 {
		return nil
	}
	if err := a.f.Truncate(a.size); err != nil {
		return fmt.Errorf("cut preallocated segment %s: %w", a.path, err)
	}
	a.alloc = 0
	return a.f.Sync()
}

// syncFile is what SyncTo calls: syncData where there is one.
func syncFile(f *os.File) error { return syncData(f) }
