package store

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Options configures a Store. The zero value is a working memory-only store.
type Options struct {
	// Dir holds the data. Empty: memory only, nothing survives Close, with
	// the same semantics otherwise.
	Dir string
	// Sync makes Append, SaveCursor, PutMeta and the like fsync before they
	// return, so data survives a crash of the machine. Default false: data
	// is handed to the OS before the call returns, which survives a crash of
	// the process (kill -9) but not of the machine.
	Sync bool
	// SegmentBytes is the size at which a topic's log starts a new segment
	// file; Trim frees disk space a whole segment at a time. Default 64 MiB.
	SegmentBytes int64
	// CacheBytes bounds the tail cache of each topic: the newest entries
	// kept in memory so that readers following the tail never read the
	// file. Default 8 MiB; negative: no cache. Memory mode keeps everything
	// and ignores it.
	CacheBytes int64
	// Logger receives recovery notes (a torn tail truncated). Default: none.
	Logger *slog.Logger
}

const (
	defaultSegmentBytes = 64 << 20
	defaultCacheBytes   = 8 << 20
)

// Store is the set of topics and metadata of one broker. All methods are safe
// for concurrent use.
type Store struct {
	opts Options
	log  *slog.Logger
	lock *os.File // flock on Dir/LOCK; nil in memory mode

	mu         sync.Mutex
	closed     bool
	topics     map[string]*topicEntry
	nextLedger uint64

	metaMu sync.Mutex // serializes meta writes so the map matches the disk
	meta   map[string][]byte

	// writeAt writes a record (its header, then data; data may be
	// empty when hdr holds the whole record) to a segment at an offset:
	// writeRecordAt, or a failing one in tests (a full disk without a
	// full disk).
	writeAt func(f *os.File, hdr, data []byte, off int64) (int, error)

	// rings run Log.SyncTo's fdatasyncs (syncring_linux.go); nil
	// without Sync.
	rings *syncRings
}

type topicEntry struct {
	name   string
	dir    string // "" in memory mode
	ledger uint64
	log    *Log // nil until first opened with Topic
}

// Layout of Dir:
//
//	LOCK                      flock against a second store on the same Dir
//	ledger                    blob: the next ledger id to hand out
//	meta/<key>                blob per meta key
//	topics/<name>/topic       blob: the topic's real name and ledger id
//	topics/<name>/trim        blob: First() as set by Trim (absent: 0)
//	topics/<name>/<id>.seg    segments, named by their first entry id
//	topics/<name>/cursors/<c> blob per cursor
//	tmp/                      scratch for creating and deleting topics
//
// <name>, <key> and <c> are made file-safe by escape.
func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.opts.Dir}, elem...)...)
}

// Open opens (creating if needed) the store in opts.Dir, or a memory store
// when Dir is empty. It reads topic names and metadata; each topic's log is
// recovered when Topic first opens it.
func Open(opts Options) (*Store, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = defaultSegmentBytes
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = defaultCacheBytes
	}
	if opts.CacheBytes < 0 {
		opts.CacheBytes = 0
	}
	s := &Store{
		opts:       opts,
		log:        opts.Logger,
		topics:     make(map[string]*topicEntry),
		meta:       make(map[string][]byte),
		nextLedger: 1,
		writeAt:    writeRecordAt,
	}
	if opts.Sync {
		s.rings = newSyncRings()
		s.writeAt = writeRecordAtSynced
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if opts.Dir == "" {
		return s, nil
	}
	if err := s.openDir(); err != nil {
		if s.lock != nil {
			s.lock.Close()
		}
		return nil, fmt.Errorf("store: open %s: %w", opts.Dir, err)
	}
	// At Sync the fdatasyncs run on io_uring workers, so a raw pwritev
	// leaves an append's round with no call the runtime sees (each would
	// wake its monitor thread), where writes never wait for writeback
	// (rawWritesSafe; asked once the directory exists).
	if opts.Sync && rawWritesSafe(s.path("topics")) {
		s.writeAt = writeRecordAt
	}
	return s, nil
}

func (s *Store) openDir() error {
	for _, d := range []string{"", "meta", "topics"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return err
		}
	}
	var err error
	if s.lock, err = lockDir(s.opts.Dir); err != nil {
		return err
	}
	// Whatever is in tmp/ is a topic half created or half deleted by a
	// crash: neither is visible, so it all goes.
	if err := os.RemoveAll(s.path("tmp")); err != nil {
		return err
	}
	if err := os.Mkdir(s.path("tmp"), 0o755); err != nil {
		return err
	}
	if s.meta, err = readBlobDir(s.path("meta")); err != nil {
		return err
	}
	if _, v, err := readBlob(s.path("ledger")); err == nil {
		if s.nextLedger, err = bytesU64(s.path("ledger"), v); err != nil {
			return err
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	des, err := os.ReadDir(s.path("topics"))
	if err != nil {
		return err
	}
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		dir := s.path("topics", de.Name())
		name, v, err := readBlob(filepath.Join(dir, "topic"))
		if err != nil {
			return fmt.Errorf("topic directory %s: %w", dir, err)
		}
		ledger, err := bytesU64(filepath.Join(dir, "topic"), v)
		if err != nil {
			return err
		}
		s.topics[name] = &topicEntry{name: name, dir: dir, ledger: ledger}
		// The counter file is written before any topic that uses it, but
		// take the maximum anyway so ledger ids can never repeat.
		s.nextLedger = max(s.nextLedger, ledger+1)
	}
	return nil
}

// Topic opens the named topic's log, creating the topic if it does not exist.
// The name is an opaque non-empty string (such as
// "persistent://public/default/t-partition-0"). The first Topic call for an
// existing topic recovers its log: it scans the last segment and truncates a
// torn tail record left by a crash.
func (s *Store) Topic(name string) (*Log, error) {
	if name == "" {
		return nil, fmt.Errorf("store: empty topic name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	te := s.topics[name]
	if te != nil && te.log != nil {
		return te.log, nil
	}
	if te == nil {
		var err error
		if te, err = s.createTopic(name); err != nil {
			return nil, fmt.Errorf("store: create topic %q: %w", name, err)
		}
		s.topics[name] = te
	}
	l, err := openLog(s, te)
	if err != nil {
		return nil, fmt.Errorf("store: open topic %q: %w", name, err)
	}
	te.log = l
	return l, nil
}

// createTopic builds the topic's directory in tmp/ and renames it into
// place, so after a crash the topic either exists whole or not at all.
func (s *Store) createTopic(name string) (*topicEntry, error) {
	ledger := s.nextLedger
	te := &topicEntry{name: name, ledger: ledger}
	if s.opts.Dir == "" {
		s.nextLedger++
		return te, nil
	}
	// The counter goes to disk before the ledger id is used anywhere.
	if err := writeBlob(s.opts.Dir, "ledger", "ledger", u64bytes(ledger+1), s.opts.Sync); err != nil {
		return nil, err
	}
	s.nextLedger++
	te.dir = s.path("topics", escape(name))
	if _, err := os.Lstat(te.dir); err == nil {
		return nil, fmt.Errorf("directory %s exists already", te.dir)
	}
	tmp, err := os.MkdirTemp(s.path("tmp"), "new-")
	if err != nil {
		return nil, err
	}
	err = os.Mkdir(filepath.Join(tmp, "cursors"), 0o755)
	if err == nil {
		err = writeBlob(tmp, "topic", name, u64bytes(ledger), s.opts.Sync)
	}
	if err == nil {
		var f *os.File
		if f, _, err = createSegment(tmp, 0, s.opts.Sync); err == nil {
			f.Close()
		}
	}
	if err == nil {
		err = os.Rename(tmp, te.dir)
	}
	if err == nil && s.opts.Sync {
		err = syncDir(s.path("topics"))
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return te, nil
}

// Topics lists the names of all topics, sorted.
func (s *Store) Topics() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.topics))
}

// HasTopic reports whether a topic exists, without listing them all.
func (s *Store) HasTopic(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.topics[name]
	return ok
}

// DeleteTopic removes a topic: its log and its cursors. The topic's open Log,
// if any, returns ErrDeleted from then on. A topic created again under the
// same name gets a new, larger LedgerID.
func (s *Store) DeleteTopic(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	te := s.topics[name]
	if te == nil {
		return fmt.Errorf("store: delete topic %q: %w", name, ErrNotFound)
	}
	if te.log != nil {
		te.log.shut(ErrDeleted)
		te.log = nil
	}
	if te.dir != "" {
		// One rename makes the deletion atomic; the removal of the files
		// can then fail or be cut short by a crash without harm, as Open
		// empties tmp/.
		trash := s.path("tmp", fmt.Sprintf("del-%d", te.ledger))
		if err := os.Rename(te.dir, trash); err != nil {
			return fmt.Errorf("store: delete topic %q: %w", name, err)
		}
		if s.opts.Sync {
			if err := syncDir(s.path("topics")); err != nil {
				return fmt.Errorf("store: delete topic %q: %w", name, err)
			}
		}
		if err := os.RemoveAll(trash); err != nil {
			s.log.Warn("store: removing deleted topic's files", "topic", name, "err", err)
		}
	}
	delete(s.topics, name)
	return nil
}

// PutMeta stores val under key, replacing any previous value atomically.
// Meant for small values (partition counts, topic policies): all of them are
// kept in memory too.
func (s *Store) PutMeta(key string, val []byte) error {
	if key == "" {
		return fmt.Errorf("store: empty meta key")
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.checkOpen(); err != nil {
		return err
	}
	if s.opts.Dir != "" {
		if err := writeBlob(s.path("meta"), escape(key), key, val, s.opts.Sync); err != nil {
			return fmt.Errorf("store: put meta %q: %w", key, err)
		}
	}
	s.meta[key] = slices.Clone(val)
	return nil
}

// GetMeta returns a copy of the value under key.
func (s *Store) GetMeta(key string) ([]byte, bool, error) {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.checkOpen(); err != nil {
		return nil, false, err
	}
	v, ok := s.meta[key]
	return slices.Clone(v), ok, nil
}

// ListMeta returns copies of all values whose key starts with prefix.
func (s *Store) ListMeta(prefix string) (map[string][]byte, error) {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	m := make(map[string][]byte)
	for k, v := range s.meta {
		if strings.HasPrefix(k, prefix) {
			m[k] = slices.Clone(v)
		}
	}
	return m, nil
}

// DeleteMeta removes key; a missing key is not an error.
func (s *Store) DeleteMeta(key string) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.checkOpen(); err != nil {
		return err
	}
	if _, ok := s.meta[key]; !ok {
		return nil
	}
	if s.opts.Dir != "" {
		if err := removeFile(s.path("meta"), escape(key), s.opts.Sync); err != nil {
			return fmt.Errorf("store: delete meta %q: %w", key, err)
		}
	}
	delete(s.meta, key)
	return nil
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Close closes every open topic (their methods return ErrClosed afterwards)
// and releases the directory. Entries appended before Close are on disk
// (fsynced only with Sync).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, te := range s.topics {
		if te.log != nil {
			te.log.shut(ErrClosed)
		}
	}
	// Every log is shut, so no SyncTo holds a ring.
	s.rings.closeAll()
	if s.lock != nil {
		return s.lock.Close()
	}
	return nil
}
