package store

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
)

// Entry is one record of a topic's log.
//
// Data is shared, not copied: it points into the tail cache (or into a buffer
// read for this call). It stays valid for as long as the caller keeps it,
// even after eviction, Trim or Close, but it must not be modified.
type Entry struct {
	ID          uint64
	PublishTime int64 // ms since the epoch, as given to Append
	Data        []byte
}

// Log is one topic: an append-only log of entries with ids 0, 1, 2, ... plus
// the topic's cursors. All methods are safe for concurrent use.
type Log struct {
	s      *Store
	name   string
	dir    string // "" in memory mode
	ledger uint64
	sync   bool

	// Lock order: curMu, trimMu, syncMu, mu.
	curMu   sync.Mutex // cursor writes, so the map matches the files
	cursors map[string][]byte
	trimMu  sync.Mutex // one Trim at a time
	syncMu  sync.Mutex // one fsync at a time (group commit)

	mu       sync.Mutex
	err      error // ErrClosed or ErrDeleted once shut
	failed   error // sticky: a write or fsync failed, the file can't be trusted
	segs     []*segment
	first    uint64 // oldest readable id
	next     uint64 // id of the next Append
	visible  uint64 // entries below it are readable: next, or with Sync the fsynced part
	cache    tailCache
	uncached bool // CacheTail(false): entries are not kept in the cache
}

func openLog(s *Store, te *topicEntry) (*Log, error) {
	l := &Log{
		s:       s,
		name:    te.name,
		dir:     te.dir,
		ledger:  te.ledger,
		sync:    s.opts.Sync,
		cursors: make(map[string][]byte),
	}
	if te.dir == "" {
		l.cache.limit = -1
		l.segs = []*segment{{indexed: true, maxTime: math.MinInt64}}
		return l, nil
	}
	l.cache.limit = s.opts.CacheBytes
	if err := l.recover(); err != nil {
		for _, sg := range l.segs {
			sg.destroy(false)
		}
		return nil, err
	}
	return l, nil
}

// recover finds the segments, drops those below the trim point, scans the
// last one (truncating a torn tail) and loads the cursors.
func (l *Log) recover() error {
	bases, err := l.segmentBases()
	if err != nil {
		return err
	}
	trim, err := l.readTrim()
	if err != nil {
		return err
	}
	// Segments wholly below the trim point are what a crash left between
	// writing the trim point and deleting them.
	for len(bases) > 1 && bases[1] <= trim {
		os.Remove(filepath.Join(l.dir, segName(bases[0])))
		bases = bases[1:]
	}
	for i, b := range bases {
		sg := &segment{base: b, path: filepath.Join(l.dir, segName(b))}
		if i < len(bases)-1 {
			fi, err := os.Stat(sg.path)
			if err != nil {
				return err
			}
			sg.size = fi.Size()
		}
		l.segs = append(l.segs, sg)
	}
	if err := l.recoverLast(); err != nil {
		return err
	}
	l.first = min(max(trim, l.segs[0].base), l.next)
	if l.cursors, err = readBlobDir(filepath.Join(l.dir, "cursors")); err != nil {
		return err
	}
	return nil
}

// segmentBases lists the segments' base ids in order, removing the
// temporary files a crash left.
func (l *Log) segmentBases() ([]uint64, error) {
	des, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, de := range des {
		if b, ok := parseSegName(de.Name()); ok {
			bases = append(bases, b)
		} else if len(de.Name()) > len(tmpPrefix) && de.Name()[:len(tmpPrefix)] == tmpPrefix {
			os.Remove(filepath.Join(l.dir, de.Name()))
		}
	}
	if len(bases) == 0 {
		return nil, &CorruptError{File: l.dir, Reason: "topic has no segment files"}
	}
	slices.Sort(bases)
	return bases, nil
}

// readTrim reads the trim point, 0 when none was written.
func (l *Log) readTrim() (uint64, error) {
	path := filepath.Join(l.dir, "trim")
	_, v, err := readBlob(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return bytesU64(path, v)
}

// recoverLast opens the last segment for appending: a blank header is
// rewritten, a torn tail truncated, and the log's next id set.
func (l *Log) recoverLast() error {
	last := l.segs[len(l.segs)-1]
	f, err := os.OpenFile(last.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	last.f = f
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if blankHeader(f, fi.Size()) {
		// A segment just rolled when the machine (not only the process)
		// went down without Sync: the rename reached the disk, the header
		// did not. It holds no records; give it its header back.
		l.s.log.Warn("store: rewriting blank segment header", "topic", l.name, "file", last.path)
		g, _, err := createSegment(l.dir, last.base, l.sync)
		if err != nil {
			return err
		}
		f.Close()
		last.f, f = g, g
		if fi, err = f.Stat(); err != nil {
			return err
		}
	}
	res, err := scanSegment(f, last.path, last.base, fi.Size(), true)
	if err != nil {
		return err
	}
	if res.torn {
		l.s.log.Warn("store: truncating torn tail", "topic", l.name, "file", last.path,
			"offset", res.end, "bytes", fi.Size()-res.end)
		if err := f.Truncate(res.end); err != nil {
			return err
		}
		if l.sync {
			if err := f.Sync(); err != nil {
				return err
			}
		}
	}
	last.size, last.index, last.maxTime, last.indexed = res.end, res.index, res.maxTime, true
	l.next = last.base + res.count
	l.visible = l.next
	l.cache.first = l.next
	return nil
}

// Name returns the topic's name.
func (l *Log) Name() string { return l.name }

// LedgerID identifies this incarnation of the topic: it never changes while
// the topic exists, and a topic deleted and created again gets a larger one.
// Ids are unique across the store.
func (l *Log) LedgerID() uint64 { return l.ledger }

// Next returns the id the next Append will get (with Sync and appends in
// flight: the id after the last entry readers can see).
func (l *Log) Next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.visible
}

// Size returns the bytes the log's segments hold: its entries with their
// record and segment headers. In memory mode: the bytes of the entries not
// trimmed, with record headers.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dir == "" {
		return l.cache.bytes
	}
	var n int64
	for _, sg := range l.segs {
		n += sg.size
	}
	return n
}

// First returns the oldest readable id: Next() for an empty log.
func (l *Log) First() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

func (l *Log) usable() error {
	if l.err != nil {
		return l.err
	}
	return l.failed
}

// fail makes every later Append fail: after a failed write or fsync the state
// of the file is unknown (the OS may have dropped dirty pages), so the topic
// has to be opened again, which recovers from what is really on disk.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = fmt.Errorf("store: topic %q failed, reopen the store: %w", l.name, err)
	}
	return l.failed
}

// Append adds an entry and returns its id. When it returns without error the
// entry is written to the OS and survives kill -9; with Options.Sync it is
// fsynced too. data is copied; the caller may reuse it.
func (l *Log) Append(publishTime int64, data []byte) (uint64, error) {
	id, err := l.Write(publishTime, data)
	if err != nil || !l.Syncs() {
		return id, err
	}
	if err := l.SyncTo(id + 1); err != nil {
		return 0, fmt.Errorf("store: append to %q: %w", l.name, err)
	}
	return id, nil
}

// Syncs reports whether entries wait for an fsync (Options.Sync, on disk)
// before they are durable and visible: then Write must be followed by
// SyncTo.
func (l *Log) Syncs() bool { return l.sync && l.dir != "" }

// Write is Append without waiting for the fsync: when it returns without
// error the entry is written to the OS (it survives kill -9). If Syncs, the
// entry is durable against a machine crash, and readable, only once
// SyncTo(id+1) has returned; a caller can go on writing meanwhile, and one
// fsync then covers everything written before it (group commit).
func (l *Log) Write(publishTime int64, data []byte) (uint64, error) {
	return l.write(publishTime, data, nil)
}

// knownSum is what a caller already knows of an entry's checksum: the
// crc32c of data[skip:].
type knownSum struct {
	skip int
	sum  uint32
}

// WriteKnownSum is Write for data whose crc32c from byte skip on the
// caller has computed and checked already (a message carries one): the
// record's checksum is derived from it instead of reading data again. A
// wrong restSum makes a record that fails its check when read.
func (l *Log) WriteKnownSum(publishTime int64, data []byte, skip int, restSum uint32) (uint64, error) {
	if skip < 0 || skip > len(data) || len(data)-skip < combineMinBytes {
		return l.write(publishTime, data, nil)
	}
	return l.write(publishTime, data, &knownSum{skip, restSum})
}

func (l *Log) write(publishTime int64, data []byte, known *knownSum) (uint64, error) {
	if len(data) > MaxEntryBytes {
		return 0, fmt.Errorf("store: append to %q: %d bytes: %w", l.name, len(data), ErrTooLarge)
	}
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	id := l.next
	a := l.segs[len(l.segs)-1]
	var stored []byte
	if l.dir == "" {
		stored = l.cache.alloc(len(data))
		copy(stored, data)
	} else {
		recLen := recHeaderSize + len(data)
		if a.size > segHeaderSize && a.size+int64(recLen) > l.s.opts.SegmentBytes {
			if err := l.roll(); err != nil {
				l.mu.Unlock()
				return 0, fmt.Errorf("store: append to %q: %w", l.name, noSpace(err))
			}
			a = l.segs[len(l.segs)-1]
		}
		var err error
		if stored, err = l.writeRecord(a, publishTime, data, known); err != nil {
			l.mu.Unlock()
			return 0, fmt.Errorf("store: append to %q: %w", l.name, noSpace(err))
		}
	}
	a.index = addToIndex(a.index, id, a.size, publishTime)
	a.maxTime = max(a.maxTime, publishTime)
	a.size += recHeaderSize + int64(len(data))
	l.next++
	if stored != nil {
		l.cache.push(publishTime, stored)
	} else {
		l.cache.pass()
	}
	if !l.sync || l.dir == "" {
		l.visible = l.next
	}
	l.mu.Unlock()
	return id, nil
}

// writeRecord writes data as a record at the end of segment a (its
// checksum from known when not nil); it returns
// the copy the tail cache keeps, nil when it keeps none. Called with l.mu
// held.
func (l *Log) writeRecord(a *segment, publishTime int64, data []byte, known *knownSum) ([]byte, error) {
	recLen := recHeaderSize + len(data)
	// The record is built where the cache keeps it, so the one copy of
	// data serves both the write and later reads; without the cache, data
	// is written from where it is, after a header of its own.
	cached := l.cache.limit != 0 && !l.uncached
	var hdr, body []byte
	var hdrBuf [recHeaderSize]byte
	if cached {
		rec := l.cache.alloc(recLen)
		copy(rec[recHeaderSize:], data)
		hdr, body = rec, nil
		data = rec[recHeaderSize:]
	} else {
		hdr, body = hdrBuf[:], data
	}
	if known != nil {
		putRecordHeaderKnown(hdr, publishTime, data, known.skip, known.sum)
	} else {
		putRecordHeader(hdr, publishTime, data)
	}
	// One write per record: a process killed mid-append leaves the
	// record whole or not at all in the page cache.
	if _, err := l.s.writeAt(a.f, hdr, body, a.size); err != nil {
		// Cut what part of the record was written (a full disk writes
		// what fits), so the next append starts clean.
		if terr := a.f.Truncate(a.size); terr != nil {
			l.fail(terr)
		}
		return nil, err
	}
	if !cached {
		return nil, nil
	}
	return data, nil
}

// CacheTail turns the tail cache on or off (it is on when a log opens).
// Entries written while it is off are read from the files; turning it off
// drops what it holds. A topic nobody reads from as it is written need not
// pay for copying each entry into memory (Apache Pulsar, too, caches
// entries only while the topic has active cursors). In memory mode the
// cache is the log: it stays on.
func (l *Log) CacheTail(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dir == "" || l.uncached == !on {
		return
	}
	l.uncached = !on
	if !on && l.err == nil {
		l.cache.reset(l.next)
	}
}

// roll seals the active segment and starts a new one at l.next. Called with
// l.mu held.
func (l *Log) roll() error {
	old := l.segs[len(l.segs)-1]
	if l.sync {
		// Entries of the old segment still waiting for SyncTo are covered
		// here, as SyncTo only fsyncs the newest file.
		if err := old.f.Sync(); err != nil {
			return l.fail(err)
		}
	}
	f, path, err := createSegment(l.dir, l.next, l.sync)
	if err != nil {
		return err
	}
	l.segs = append(l.segs, &segment{base: l.next, path: path, f: f, size: segHeaderSize,
		indexed: true, maxTime: math.MinInt64})
	return nil
}

// SyncTo returns once entries below n are fsynced and visible (at once when
// the log does not Sync). Callers that queue on syncMu while another fsyncs
// usually find their entries covered by that fsync, so concurrent writers
// share the cost (group commit).
func (l *Log) SyncTo(n uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.visible >= n {
		l.mu.Unlock()
		return nil
	}
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	target, f := l.next, l.segs[len(l.segs)-1].f
	l.mu.Unlock()
	// fdatasync, through io_uring where there is one (syncring_linux.go):
	// an append's data and the size it grew the file to.
	err := syncData(l.s.rings, f)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.fail(err)
	}
	if target > l.visible {
		l.visible = target
	}
	return nil
}

// readLimits applies Read's maxEntries and maxBytes (<= 0: no limit), always
// letting the first entry through.
type readLimits struct {
	maxEntries, maxBytes int
	n, bytes             int
}

func (r *readLimits) take(size int) bool {
	if r.n > 0 && ((r.maxEntries > 0 && r.n >= r.maxEntries) || (r.maxBytes > 0 && r.bytes+size > r.maxBytes)) {
		return false
	}
	r.n++
	r.bytes += size
	return true
}

// fits says whether take(size) would take it, without taking it.
func (r *readLimits) fits(size int) bool {
	return r.n == 0 || !((r.maxEntries > 0 && r.n >= r.maxEntries) || (r.maxBytes > 0 && r.bytes+size > r.maxBytes))
}

func (r *readLimits) full() bool {
	return (r.maxEntries > 0 && r.n >= r.maxEntries) || (r.maxBytes > 0 && r.bytes >= r.maxBytes)
}

// Read returns entries with consecutive ids from `from` on: at most maxEntries
// of them and at most maxBytes of Data in total (<= 0: no limit), but always
// at least one if any exists, however big. A from below First() reads from
// First(); a from at or past Next() returns nothing. Recent entries come from
// the tail cache without copying (see Entry for what that means for Data);
// older ones from the segment files, checking each record's crc.
func (l *Log) Read(from uint64, maxEntries, maxBytes int) ([]Entry, error) {
	return l.ReadAppend(nil, from, maxEntries, maxBytes)
}

// ReadAppend is Read appending to dst, so that a reader following the tail
// can reuse one slice and read without allocating. On error it returns dst
// unchanged.
func (l *Log) ReadAppend(dst []Entry, from uint64, maxEntries, maxBytes int) ([]Entry, error) {
	return l.ReadInto(dst, nil, from, maxEntries, maxBytes)
}

// ReadBuffer is memory a reader lends to ReadInto for the entries it reads
// from the segment files, so that a reader draining a backlog reuses it
// instead of allocating (and zeroing) fresh blocks for every read. The
// zero value is ready to use; one ReadBuffer serves one reader at a time.
type ReadBuffer struct {
	buf  []byte
	used int
}

// maxKeptReadBuffer bounds what a ReadBuffer keeps between reads; a read
// needing more gets the rest from fresh blocks that are not kept.
const maxKeptReadBuffer = 8 << 20

// reset starts a read: every block of the previous one may be reused.
func (rb *ReadBuffer) reset() { rb.used = 0 }

// block returns n bytes for file reads, from the kept buffer when it has
// room, else from a new one (kept for later reads up to maxKeptReadBuffer).
func (rb *ReadBuffer) block(n int) []byte {
	if rb == nil {
		return make([]byte, n)
	}
	if rb.used+n > len(rb.buf) {
		want := max(2*len(rb.buf), rb.used+n, 256<<10)
		if want > maxKeptReadBuffer {
			return make([]byte, n)
		}
		// The old buffer stays alive as long as entries of this read
		// point into it; the new one serves the rest and later reads.
		rb.buf, rb.used = make([]byte, want), 0
	}
	b := rb.buf[rb.used : rb.used+n : rb.used+n]
	rb.used += n
	return b
}

// ReadInto is ReadAppend reading the entries that come from segment files
// into rb (nil: fresh memory): their Data is then valid only until the next
// call with the same rb. Entries from the tail cache are shared as always.
// A read that needs no file lets go of rb's memory: a reader that has caught
// up with the tail holds none.
func (l *Log) ReadInto(dst []Entry, rb *ReadBuffer, from uint64, maxEntries, maxBytes int) ([]Entry, error) {
	if rb == nil {
		return l.readInto(dst, nil, from, maxEntries, maxBytes)
	}
	rb.reset()
	res, err := l.readInto(dst, rb, from, maxEntries, maxBytes)
	if rb.used == 0 {
		rb.buf = nil
	}
	return res, err
}

func (l *Log) readInto(dst []Entry, rb *ReadBuffer, from uint64, maxEntries, maxBytes int) ([]Entry, error) {
	lim := readLimits{maxEntries: maxEntries, maxBytes: maxBytes}
	res := dst
	for {
		l.mu.Lock()
		if l.err != nil {
			l.mu.Unlock()
			return dst, l.err
		}
		if len(res) > len(dst) && from < l.first {
			// Trimmed while this call read: end here, so one result never
			// skips ids; the next call starts at First().
			l.mu.Unlock()
			return res, nil
		}
		from = max(from, l.first)
		if from >= l.visible {
			l.mu.Unlock()
			return res, nil
		}
		if from >= l.cache.first {
			res = grow(res, l.visible-from, &lim)
			for id := from; id < l.visible; id++ {
				c := l.cache.at(id)
				if !lim.take(len(c.data)) {
					break
				}
				res = append(res, Entry{ID: id, PublishTime: c.publishTime, Data: c.data})
			}
			l.mu.Unlock()
			return res, nil
		}
		i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > from }) - 1
		sg := l.segs[i]
		end := min(l.visible, l.cache.first)
		if i+1 < len(l.segs) {
			end = min(end, l.segs[i+1].base)
		}
		sg.refs++
		indexed := sg.indexed
		var start indexPoint
		if indexed {
			k := sort.Search(len(sg.index), func(k int) bool { return sg.index[k].id > from }) - 1
			if k < 0 { // an indexed segment always has a point at its first record
				l.mu.Unlock()
				l.release(sg)
				return dst, &CorruptError{File: sg.path, Offset: segHeaderSize, Reason: fmt.Sprintf("no record for id %d", from)}
			}
			start = sg.index[k]
		}
		size := sg.size
		recs := l.next - sg.base
		if i+1 < len(l.segs) {
			recs = l.segs[i+1].base - sg.base
		}
		l.mu.Unlock()

		var err error
		done := false
		if !indexed {
			err = l.indexSegment(sg) // then go round again, now with an index
		} else {
			res = grow(res, end-from, &lim)
			avg := (size - segHeaderSize) / int64(recs)
			res, done, err = l.readSegment(res, rb, sg, start, from, end, size, avg, &lim)
			from = end
		}
		l.release(sg)
		if err != nil {
			return dst, err
		}
		if done {
			return res, nil
		}
	}
}

// grow makes room in res for the entries a read may add (up to n, within the
// limits), so that a fresh result is allocated once.
func grow(res []Entry, n uint64, lim *readLimits) []Entry {
	if lim.maxEntries > 0 {
		n = min(n, uint64(max(lim.maxEntries-lim.n, 0)))
	}
	return slices.Grow(res, int(min(n, 4096)))
}

// readSegment appends entries [from, end) of sg to res, starting the scan at
// index point start and reading no further than byte size; avg is the
// segment's mean record size, to size the reads. done reports that the limits
// stopped it before end. Blocks come from rb (see ReadInto).
func (l *Log) readSegment(res []Entry, rb *ReadBuffer, sg *segment, start indexPoint, from, end uint64, size, avg int64, lim *readLimits) ([]Entry, bool, error) {
	f, err := sg.file()
	if err != nil {
		return res, false, err
	}
	id, off := start.id, start.off
	for id < end {
		// Read what the limits will take, judged by the mean record size,
		// plus the records skipped before from; a short guess just costs
		// another block. Each block is memory of its own (Data points into
		// it), fresh or from rb.
		const minBlock, maxBlock = 4 << 10, 1 << 20
		skip := int64(0)
		if id < from {
			skip = int64(from-id) * avg
		}
		want := int64(min(end-max(id, from), maxBlock)) * avg
		if lim.maxEntries > 0 {
			want = min(want, int64(lim.maxEntries-lim.n)*avg)
		}
		if lim.maxBytes > 0 {
			want = min(want, int64(lim.maxBytes-lim.bytes)+avg)
		}
		// The margin is at least one mean record: reads of one or two
		// entries (dispatch of a batched topic) would otherwise widen
		// (a second pread) for every record above the mean.
		want = min(max(skip+want+max(want/8, avg)+recHeaderSize, minBlock), maxBlock)
		buf := rb.block(int(min(size-off, want)))
		if n, err := readAt(f, buf, off); err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
			return res, false, fmt.Errorf("store: read %s at %d: %w", sg.path, off, err)
		}
		pos := 0
		for id < end {
			if len(buf)-pos < recHeaderSize {
				if pos == 0 {
					return res, false, &CorruptError{File: sg.path, Offset: off, Reason: "short record header"}
				}
				break
			}
			hdr := buf[pos : pos+recHeaderSize]
			n := int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16 | uint32(hdr[3])<<24)
			at := off + int64(pos)
			if n > MaxEntryBytes || at+int64(recHeaderSize+n) > size {
				return res, false, &CorruptError{File: sg.path, Offset: at, Reason: "record length past end of segment"}
			}
			if len(buf)-pos < recHeaderSize+n {
				if pos > 0 && id < from {
					break // only skipped over: the next block starts at it
				}
				if pos > 0 && !lim.fits(n) {
					return res, true, nil // the limits end the read before it: none of its rest
				}
				// The record goes past the block: read only its rest,
				// not the block again from its start.
				if buf, err = l.widen(f, rb, buf[pos:], at, min(size-at, int64(recHeaderSize+n))); err != nil {
					return res, false, fmt.Errorf("store: read %s at %d: %w", sg.path, at, err)
				}
				off, pos = at, 0
				continue
			}
			data := buf[pos+recHeaderSize : pos+recHeaderSize+n : pos+recHeaderSize+n]
			if id >= from { // records only skipped over need no check
				if !recordOK(hdr, data) {
					return res, false, &CorruptError{File: sg.path, Offset: at, Reason: "checksum mismatch"}
				}
				if !lim.take(n) {
					return res, true, nil
				}
				pt := int64(uint64(hdr[8]) | uint64(hdr[9])<<8 | uint64(hdr[10])<<16 | uint64(hdr[11])<<24 |
					uint64(hdr[12])<<32 | uint64(hdr[13])<<40 | uint64(hdr[14])<<48 | uint64(hdr[15])<<56)
				res = append(res, Entry{ID: id, PublishTime: pt, Data: data})
			}
			pos += recHeaderSize + n
			id++
		}
		off += int64(pos)
	}
	return res, lim.full(), nil
}

// widen returns a block of n bytes from rb holding the file from off: the
// bytes of buf (read from off already) and the rest read after them. A
// record past the end of its block is common when entries vary in size;
// reading only the rest, into rb, costs neither a fresh (zeroed) block
// nor reading its start twice.
func (l *Log) widen(f *os.File, rb *ReadBuffer, buf []byte, off, n int64) ([]byte, error) {
	wide := rb.block(int(n))
	k := copy(wide, buf)
	if m, err := readAt(f, wide[k:], off+int64(k)); err != nil && !(errors.Is(err, io.EOF) && m == len(wide)-k) {
		return nil, err
	}
	return wide, nil
}

// indexSegment builds the sparse index of a sealed segment the first time it
// is needed, checking every record; the caller holds a reference.
func (l *Log) indexSegment(sg *segment) error {
	sg.fileMu.Lock()
	defer sg.fileMu.Unlock()
	l.mu.Lock()
	done, size := sg.indexed, sg.size
	want := uint64(0)
	if i := slices.Index(l.segs, sg); i >= 0 && i+1 < len(l.segs) {
		want = l.segs[i+1].base - sg.base
	}
	l.mu.Unlock()
	if done {
		return nil
	}
	if sg.f == nil {
		f, err := os.Open(sg.path)
		if err != nil {
			return err
		}
		sg.f = f
	}
	res, err := scanSegment(sg.f, sg.path, sg.base, size, false)
	if err != nil {
		return err
	}
	if want != 0 && res.count != want {
		return &CorruptError{File: sg.path, Offset: res.end,
			Reason: fmt.Sprintf("holds %d entries, the next segment starts %d ids later", res.count, want)}
	}
	l.mu.Lock()
	sg.index, sg.maxTime, sg.indexed = res.index, res.maxTime, true
	l.mu.Unlock()
	return nil
}

// release drops a reader's reference; the last one out closes (and for a
// trimmed segment deletes) the file.
func (l *Log) release(sg *segment) {
	l.mu.Lock()
	sg.refs--
	gone := sg.refs == 0 && (sg.removed || l.err != nil)
	l.mu.Unlock()
	if gone {
		sg.destroy(sg.removed)
	}
}

// SeekTime returns the first id whose PublishTime is >= ms, or Next() if
// there is none. Publish times need not be monotonic: blocks of the sparse
// index carry their largest time, so the search skips blocks and segments
// that end too early and reads only the block holding the answer. It can fail
// only by reading a corrupt or unreadable segment.
func (l *Log) SeekTime(ms int64) (uint64, error) {
	type block struct {
		from, end uint64
		maxTime   int64
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return 0, l.err
	}
	segs := slices.Clone(l.segs)
	for _, sg := range segs {
		sg.refs++
	}
	l.mu.Unlock()
	defer func() {
		for _, sg := range segs {
			l.release(sg)
		}
	}()
	for i, sg := range segs {
		l.mu.Lock()
		first, visible, indexed := l.first, l.visible, sg.indexed
		end := visible
		if i+1 < len(segs) {
			end = segs[i+1].base
		}
		l.mu.Unlock()
		if end <= first {
			continue
		}
		if !indexed {
			if err := l.indexSegment(sg); err != nil {
				return 0, err
			}
		}
		l.mu.Lock()
		var blocks []block
		if sg.maxTime >= ms {
			for k, p := range sg.index {
				b := block{from: max(p.id, first), end: end, maxTime: p.maxTime}
				if k+1 < len(sg.index) {
					b.end = min(end, sg.index[k+1].id)
				}
				if b.from < b.end && b.maxTime >= ms {
					blocks = append(blocks, b)
				}
			}
		}
		l.mu.Unlock()
		for _, b := range blocks {
			ents, err := l.Read(b.from, int(b.end-b.from), 0)
			if err != nil {
				return 0, err
			}
			for _, e := range ents {
				if e.ID < b.end && e.PublishTime >= ms {
					return e.ID, nil
				}
			}
		}
	}
	return l.Next(), nil
}

// Trim makes entries below `before` unreadable: First() becomes before
// (capped at Next()) and stays so after a restart. Disk space comes back a
// whole segment at a time, once every entry of a segment is below First()
// and no reader is still using the file.
func (l *Log) Trim(before uint64) error {
	l.trimMu.Lock()
	defer l.trimMu.Unlock()
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	before = min(before, l.visible)
	if before <= l.first {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	// The trim point is durable before any file goes; recovery finishes a
	// trim cut short by a crash.
	if l.dir != "" {
		if err := writeBlob(l.dir, "trim", "trim", u64bytes(before), l.sync); err != nil {
			return fmt.Errorf("store: trim %q: %w", l.name, err)
		}
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	l.first = max(l.first, before)
	l.cache.dropBefore(l.first)
	var gone []*segment
	for len(l.segs) > 1 && l.segs[1].base <= l.first {
		sg := l.segs[0]
		sg.removed = true
		if sg.refs == 0 {
			gone = append(gone, sg)
		}
		l.segs = l.segs[1:]
	}
	l.mu.Unlock()
	for _, sg := range gone {
		sg.destroy(true)
	}
	if len(gone) > 0 && l.sync {
		if err := syncDir(l.dir); err != nil {
			return fmt.Errorf("store: trim %q: %w", l.name, err)
		}
	}
	return nil
}

// SaveCursor stores a cursor's state, replacing the previous one atomically;
// when it returns the state survives kill -9 (with Sync, a machine crash).
func (l *Log) SaveCursor(name string, state []byte) error {
	if name == "" {
		return fmt.Errorf("store: empty cursor name")
	}
	l.curMu.Lock()
	defer l.curMu.Unlock()
	if err := l.closedErr(); err != nil {
		return err
	}
	if l.dir != "" {
		if err := writeBlob(filepath.Join(l.dir, "cursors"), escape(name), name, state, l.sync); err != nil {
			return fmt.Errorf("store: save cursor %q of %q: %w", name, l.name, err)
		}
	}
	l.cursors[name] = slices.Clone(state)
	return nil
}

// Cursors returns copies of all cursor states by name.
func (l *Log) Cursors() (map[string][]byte, error) {
	l.curMu.Lock()
	defer l.curMu.Unlock()
	if err := l.closedErr(); err != nil {
		return nil, err
	}
	m := maps.Clone(l.cursors)
	for k, v := range m {
		m[k] = slices.Clone(v)
	}
	return m, nil
}

// DeleteCursor removes a cursor; a missing one is not an error.
func (l *Log) DeleteCursor(name string) error {
	l.curMu.Lock()
	defer l.curMu.Unlock()
	if err := l.closedErr(); err != nil {
		return err
	}
	if _, ok := l.cursors[name]; !ok {
		return nil
	}
	if l.dir != "" {
		if err := removeFile(filepath.Join(l.dir, "cursors"), escape(name), l.sync); err != nil {
			return fmt.Errorf("store: delete cursor %q of %q: %w", name, l.name, err)
		}
	}
	delete(l.cursors, name)
	return nil
}

func (l *Log) closedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// shut closes the log for good (store closed or topic deleted): every
// method returns why, files close once no reader holds them.
func (l *Log) shut(why error) {
	l.curMu.Lock()
	defer l.curMu.Unlock()
	l.trimMu.Lock()
	defer l.trimMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = why
	l.cache.reset(l.cache.first)
	var idle []*segment
	for _, sg := range l.segs {
		if sg.refs == 0 {
			idle = append(idle, sg)
		}
	}
	l.mu.Unlock()
	for _, sg := range idle {
		sg.destroy(false)
	}
}
