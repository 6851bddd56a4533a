package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// stateStore holds a pipeline's keyed state values: in memory up to a
// bound (pipelines.State.CacheBytes), the rest in a spill file, an
// embedded B+tree (bbolt) under the host's state directory
// (Options.StateDir). The changelog is the source of truth: the spill is
// never read back after a restart, only rebuilt by reading the
// changelog, so it is written without syncing and removed when the
// pipeline stops, when the state is read back, and (left by a host that
// died) when another spill file is made in the directory.
//
// A key is in memory, on disk, or both (a value read from disk is kept
// in memory, clean, until evicted). What memory holds shadows the disk:
// a key removed while the disk holds it stays in memory as a tombstone
// until evicted, when the disk's copy is deleted. Past the bound, keys
// taken in the map's own order (a random one: Go's map iteration starts
// anywhere) are evicted down to half of it, their dirty values written
// in one transaction, in key order (bbolt rewrites every page a
// transaction touches: evicting down to 90 % made restoring 1 000 000
// keys through a 100 000-key cache 2x slower, BenchmarkKeyedStateHeap). Random eviction keeps, of keys that
// come round in turn (a counter over more keys than fit), the share that
// fits; least-recently-used would keep none.
//
// All under the keyed state's mu.
type stateStore struct {
	// mem holds pointers, so that a batch's lookup (keyedState.entries)
	// is also where its answer's change goes (update), without a second
	// lookup of a key that is cold in the cache by then.
	mem  map[string]*cachedValue
	used int64 // accounted bytes in mem (cachedSize)
	n    int   // keys with a value, in memory or on disk
	// limit is the bound of used, 0 for none.
	limit int64

	dir     string // where the spill file is made
	log     *slog.Logger
	db      *bolt.DB // nil until the first eviction
	path    string
	rtx     *bolt.Tx // read transaction open for the lookups of one call (release)
	onDisk  int      // keys whose value is on disk only or in both: for the stats
	evicted int64    // evictions, for the stats
	broken  bool     // the spill could not be made or written: memory only
	keyBuf  []byte

	// gen counts the entries taken out of mem: an entry's pointer is
	// still mem's while gen is what it was when the pointer was had.
	gen uint64
}

// cachedValue is a key's entry in memory.
type cachedValue struct {
	stateValue
	disk  bool // the spill holds a value for the key (maybe an older one)
	dirty bool // memory's value (or tombstone) is not the spill's
	gone  bool // a tombstone: the key has no value
	// stamp is the last keyedState.entries call that sent its value, so
	// that a key twice in a batch is sent once.
	stamp uint64
}

// cachedOverhead is what an entry costs in memory besides its key's and
// value's bytes: the map's slot (key header and cachedValue, with the
// map's spare room) and the rounding of the two allocations; measured by
// BenchmarkKeyedStateHeap (docs/benchmarks/keyed-state.md).
const cachedOverhead = 160

func cachedSize(k string, v []byte) int64 { return int64(len(k)+len(v)) + cachedOverhead }

// stateBucket is the spill's one bucket.
var stateBucket = []byte("state")

func newStateStore(limit int64, dir string, log *slog.Logger) *stateStore {
	return &stateStore{mem: map[string]*cachedValue{}, limit: limit, dir: dir, log: log}
}

// get is key k's value, from memory or the spill; one read from the
// spill is kept in memory.
func (st *stateStore) get(k string) (stateValue, bool, error) {
	c, _, err := st.entry(k)
	if c == nil || c.gone {
		return stateValue{}, false, err
	}
	return c.stateValue, true, nil
}

// entry is key k's entry, read from the spill into memory when only the
// spill has it; nil when neither has it. With mem, the pointer is
// memory's until gen moves; without, the entry read from the spill was
// evicted at once, making room. It fails as read does.
func (st *stateStore) entry(k string) (c *cachedValue, mem bool, err error) {
	if c, ok := st.mem[k]; ok {
		return c, true, nil
	}
	sv, ok, err := st.read(k)
	if !ok {
		return nil, false, err
	}
	c = &cachedValue{stateValue: sv, disk: true}
	st.mem[sv.key] = c
	st.used += cachedSize(sv.key, sv.v)
	gen := st.gen
	st.bound()
	return c, st.gen == gen || st.mem[sv.key] == c, nil
}

// read looks key k up in the spill; the value is copied out of it. It
// fails when the spill cannot be read (its read transaction cannot
// begin: the file closed, or its mapping lost); nothing is changed then.
func (st *stateStore) read(k string) (stateValue, bool, error) {
	if st.db == nil {
		return stateValue{}, false, nil
	}
	if st.rtx == nil {
		tx, err := st.db.Begin(false)
		if err != nil {
			return stateValue{}, false, fmt.Errorf("state: read key %q from the spill %s: %w", k, st.path, err)
		}
		st.rtx = tx
	}
	st.keyBuf = append(st.keyBuf[:0], k...)
	raw := st.rtx.Bucket(stateBucket).Get(st.keyBuf)
	if raw == nil {
		return stateValue{}, false, nil
	}
	return decodeSpilled(k, raw), true, nil
}

// release ends the read transaction of a call's lookups: a write to the
// spill (or its growth) waits for every read transaction to end.
func (st *stateStore) release() {
	if st.rtx != nil {
		_ = st.rtx.Rollback()
		st.rtx = nil
	}
}

// old is key k's entry before a change: in memory, or looked up on disk.
func (st *stateStore) old(k string) (c cachedValue, inMem bool, err error) {
	if c, ok := st.mem[k]; ok {
		return *c, true, nil
	}
	sv, ok, err := st.read(k)
	if err != nil {
		return cachedValue{}, false, err
	}
	if ok {
		return cachedValue{stateValue: sv, disk: true}, false, nil
	}
	return cachedValue{gone: true}, false, nil
}

// put sets key k's value to a copy of v (with inPlace, into the old
// value's array when it fits). When the spill cannot be read, nothing
// is changed.
func (st *stateStore) put(k string, v []byte, at time.Time, inPlace bool) error {
	if c, ok := st.mem[k]; ok {
		st.update(c, v, at, inPlace)
		return nil
	}
	c, _, err := st.old(k)
	if err != nil {
		return err
	}
	if c.gone {
		st.n++
	}
	var nv []byte
	if inPlace && !c.gone && cap(c.v) >= len(v) {
		nv = append(c.v[:0], v...)
	} else {
		nv = append([]byte(nil), v...)
	}
	key := c.key // memory's own, or a copy read from disk
	if key == "" {
		key = strings.Clone(k)
	}
	st.mem[key] = &cachedValue{stateValue: stateValue{key: key, v: nv, at: at}, disk: c.disk, dirty: true}
	st.used += cachedSize(key, nv)
	st.bound()
	return nil
}

// update sets the value of c, an entry of mem, to a copy of v (with
// inPlace, into the old value's array when it fits).
func (st *stateStore) update(c *cachedValue, v []byte, at time.Time, inPlace bool) {
	if c.gone {
		st.n++
	}
	st.used -= cachedSize(c.key, c.v)
	if inPlace && !c.gone && cap(c.v) >= len(v) {
		c.v = append(c.v[:0], v...)
	} else {
		c.v = append([]byte(nil), v...)
	}
	c.at, c.dirty, c.gone = at, true, false
	st.used += cachedSize(c.key, c.v)
	st.bound()
}

// del removes key k's value; as put, it changes nothing when the spill
// cannot be read.
func (st *stateStore) del(k string) error {
	c, inMem, err := st.old(k)
	if err != nil {
		return err
	}
	if !c.gone {
		st.n--
	}
	if inMem {
		st.used -= cachedSize(c.key, c.v)
	}
	if !c.disk {
		if inMem {
			delete(st.mem, k)
			st.gen++
		}
		return nil
	}
	key := c.key
	if key == "" {
		key = strings.Clone(k)
	}
	if inMem {
		// The entry itself: a pointer to it may be held (entry).
		c := st.mem[k]
		c.v, c.at, c.dirty, c.gone = nil, time.Time{}, true, true
	} else {
		st.mem[key] = &cachedValue{stateValue: stateValue{key: key}, disk: true, dirty: true, gone: true}
	}
	st.used += cachedSize(key, nil)
	st.bound()
	return nil
}

// bound evicts down to half the limit once used is past it.
func (st *stateStore) bound() {
	if st.limit <= 0 || st.used <= st.limit || st.broken {
		return
	}
	if err := st.evict(st.limit / 2); err != nil {
		// Memory grows past the bound rather than losing a value.
		st.broken = true
		st.log.Error("state: spilling values to disk failed; all are kept in memory from now on", "spill", st.path, "err", err)
	}
}

// evict writes entries out of memory until used is at most to.
func (st *stateStore) evict(to int64) error {
	st.release()
	if st.db == nil {
		if err := st.open(); err != nil {
			return err
		}
	}
	var out []string
	freed := int64(0)
	for k, c := range st.mem {
		if st.used-freed <= to {
			break
		}
		out = append(out, k)
		freed += cachedSize(k, c.v)
	}
	slices.Sort(out)
	err := st.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(stateBucket)
		// Keys come sorted: pages filled full split least.
		b.FillPercent = 0.9
		// bbolt keeps what Put is given until the commit: the values are
		// encoded one after the other into one array (a larger one, when
		// it grows, leaves those before where they were).
		var enc []byte
		for _, k := range out {
			c := st.mem[k]
			if !c.dirty {
				continue
			}
			var err error
			if c.gone {
				err = b.Delete([]byte(k))
			} else {
				at := len(enc)
				enc = encodeSpilled(enc, c.stateValue)
				err = b.Put([]byte(k), enc[at:len(enc):len(enc)])
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write spill %s: %w", st.path, err)
	}
	for _, k := range out {
		c := st.mem[k]
		if !c.disk && !c.gone {
			st.onDisk++
		} else if c.disk && c.gone {
			st.onDisk--
		}
		delete(st.mem, k)
	}
	st.gen++
	st.used -= freed
	st.evicted += int64(len(out))
	return nil
}

// encodeSpilled is a value as the spill holds it: the time it was set
// (Unix nanoseconds, 0 for none), then the value.
func encodeSpilled(dst []byte, sv stateValue) []byte {
	var at int64
	if !sv.at.IsZero() {
		at = sv.at.UnixNano()
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(at))
	return append(dst, sv.v...)
}

func decodeSpilled(k string, raw []byte) stateValue {
	sv := stateValue{key: strings.Clone(k), v: bytes.Clone(raw[8:])}
	if sv.v == nil {
		sv.v = []byte{}
	}
	if at := int64(binary.BigEndian.Uint64(raw)); at != 0 {
		sv.at = time.Unix(0, at)
	}
	return sv
}

// open makes the spill file, having removed those of hosts gone.
func (st *stateStore) open() error {
	if st.dir == "" {
		return errors.New("no state directory")
	}
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return err
	}
	sweepSpills(st.dir)
	f, err := os.CreateTemp(st.dir, "state-*"+spillSuffix)
	if err != nil {
		return err
	}
	st.path = f.Name()
	_ = f.Close()
	db, err := bolt.Open(st.path, 0o600, &bolt.Options{
		// Nothing is read back after a crash (the changelog is).
		NoSync: true, NoGrowSync: true, NoFreelistSync: true,
		FreelistType: bolt.FreelistMapType,
		Timeout:      time.Second,
	})
	if err != nil {
		_ = os.Remove(st.path)
		return err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(stateBucket)
		return err
	}); err != nil {
		_ = db.Close()
		_ = os.Remove(st.path)
		return err
	}
	st.db = db
	st.log.Info("state: values past the cache's bound spill to disk", "spill", st.path, "bound_bytes", st.limit)
	return nil
}

const spillSuffix = ".spill"

// sweepSpills removes the spill files in dir that no open store holds
// (each holds its file's lock): those of a host that died.
func sweepSpills(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "state-*"+spillSuffix))
	for _, name := range names {
		db, err := bolt.Open(name, 0o600, &bolt.Options{Timeout: 10 * time.Millisecond, ReadOnly: true})
		if errors.Is(err, bolterrors.ErrTimeout) {
			continue // in use
		}
		if err == nil {
			_ = db.Close()
		}
		_ = os.Remove(name)
	}
}

// reset empties the store, the spill file removed.
func (st *stateStore) reset() {
	st.close()
	clear(st.mem)
	st.gen++
	st.used, st.n, st.onDisk = 0, 0, 0
	st.broken = false
}

// close removes the spill file.
func (st *stateStore) close() {
	st.release()
	if st.db == nil {
		return
	}
	if err := st.db.Close(); err != nil {
		st.log.Warn("state: close spill", "spill", st.path, "err", err)
	}
	if err := os.Remove(st.path); err != nil {
		st.log.Warn("state: remove spill", "spill", st.path, "err", err)
	}
	st.db, st.path = nil, ""
}

// all is every key with its value, memory's first, then the spill's
// (those memory does not shadow).
func (st *stateStore) all() iter.Seq2[string, stateValue] {
	return func(yield func(string, stateValue) bool) {
		for k, c := range st.mem {
			if !c.gone && !yield(k, c.stateValue) {
				return
			}
		}
		if st.db == nil {
			return
		}
		st.release()
		_ = st.db.View(func(tx *bolt.Tx) error {
			cur := tx.Bucket(stateBucket).Cursor()
			for k, raw := cur.First(); k != nil; k, raw = cur.Next() {
				if _, ok := st.mem[string(k)]; ok {
					continue
				}
				if !yield(string(k), decodeSpilled(string(k), raw)) {
					return nil
				}
			}
			return nil
		})
	}
}
