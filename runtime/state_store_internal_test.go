package runtime

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/subscribe"
)

// spillKeys is how many keys the tests below keep, in a cache bounded to
// a twentieth of them.
const spillKeys = 2000

func spillBound() int64 { return spillKeys / 20 * cachedSize("key-0000", []byte("12")) }

// counter counts each key of keys up by one through entries and apply,
// as a handler would, in batches of 100.
// Under exactly_once, commit says whether each batch's transaction
// commits.
func counter(t *testing.T, s *keyedState, keys []string, commit bool) {
	t.Helper()
	for lo := 0; lo < len(keys); lo += 100 {
		hi := min(lo+100, len(keys))
		items := make([]*item, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			items = append(items, &item{m: &subscribe.Message{Key: k}})
		}
		vals := map[string]int{}
		for _, e := range mustEntries(t, s, items) {
			if _, dup := vals[e.Key]; dup {
				t.Fatalf("key %s sent twice in one batch", e.Key)
			}
			n, err := strconv.Atoi(string(e.Value))
			if err != nil {
				t.Fatalf("%s: %q", e.Key, e.Value)
			}
			vals[e.Key] = n
		}
		res := make([]plugin.Result, len(items))
		for i, it := range items {
			k := it.m.Key
			vals[k]++
			res[i] = plugin.Result{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: k, Value: []byte(strconv.Itoa(vals[k]))}}
		}
		s.apply(items, res)
		if s.eo && commit {
			s.committed(items)
		}
		if s.vals.limit > 0 && s.vals.used > s.vals.limit {
			t.Fatalf("the cache holds %d bytes, past its bound of %d", s.vals.used, s.vals.limit)
		}
	}
}

// A batch holding each of its keys twice, its values read back from the
// spill and evicted again while the batch's values are read, is sent
// each key's value once, and both changes of each key are kept.
func TestKeyedStateSpillSendsABatchsKeyOnce(t *testing.T) {
	for _, eo := range []bool{false, true} {
		t.Run(fmt.Sprintf("eo=%v", eo), func(t *testing.T) {
			s := newKeyedState("changelog", 0, eo, spillBound(), t.TempDir(), slog.New(slog.DiscardHandler))
			defer s.close()
			names := spillKeyNames()
			var keys []string
			for lo := 0; lo < len(names); lo += 50 {
				half := names[lo:min(lo+50, len(names))]
				keys = append(append(keys, half...), half...)
			}
			for range 3 {
				counter(t, s, keys, true)
			}
			if s.vals.evicted == 0 {
				t.Fatal("nothing was evicted: the test tests nothing")
			}
			for _, k := range names {
				if got := string(s.value(k)); got != "6" {
					t.Fatalf("key %s = %q, want 6", k, got)
				}
			}
		})
	}
}

func spillKeyNames() []string {
	keys := make([]string, spillKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%04d", i)
	}
	return keys
}

func spillFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+spillSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// With a cache bound far smaller than its keys, the state keeps every
// value right (counted three times over), its memory under the bound,
// the rest in a spill file in its directory; a removal reaches a value
// on disk; closing removes the file.
func TestKeyedStateSpillsPastItsBound(t *testing.T) {
	for _, eo := range []bool{false, true} {
		t.Run(fmt.Sprintf("eo=%v", eo), func(t *testing.T) {
			dir := t.TempDir()
			s := newKeyedState("changelog", 0, eo, spillBound(), dir, slog.New(slog.DiscardHandler))
			keys := spillKeyNames()
			for range 3 {
				counter(t, s, keys, true)
			}
			if got := s.Len(); got != spillKeys {
				t.Fatalf("%d keys, want %d", got, spillKeys)
			}
			if f := spillFiles(t, dir); len(f) != 1 {
				t.Fatalf("spill files %v, want one", f)
			}
			if s.vals.onDisk < spillKeys/2 {
				t.Errorf("%d keys on disk, want most of %d", s.vals.onDisk, spillKeys)
			}
			for _, k := range keys {
				if v := s.value(k); string(v) != "3" {
					t.Fatalf("%s = %q, want 3", k, v)
				}
			}
			// Remove the first 100 keys.
			items := make([]*item, 100)
			res := make([]plugin.Result, 100)
			for i := range items {
				items[i] = &item{m: &subscribe.Message{Key: keys[i]}}
				res[i] = plugin.Result{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: keys[i], Delete: true}}
			}
			mustEntries(t, s, items)
			s.apply(items, res)
			if eo {
				s.committed(items)
			}
			for i, k := range keys {
				if _, ok := s.lookup(k); ok != (i >= 100) {
					t.Fatalf("%s has a value: %v, want %v", k, ok, i >= 100)
				}
			}
			if got := s.Len(); got != spillKeys-100 {
				t.Fatalf("%d keys, want %d", got, spillKeys-100)
			}
			all := 0
			s.mu.Lock()
			for range s.vals.all() {
				all++
			}
			s.unlock()
			if all != spillKeys-100 {
				t.Errorf("%d keys listed, want %d", all, spillKeys-100)
			}
			s.close()
			if f := spillFiles(t, dir); len(f) != 0 {
				t.Errorf("spill files %v left after close", f)
			}
		})
	}
}

// Under exactly_once, an abort takes every change of its transaction
// back, those whose values went to disk meanwhile too.
func TestKeyedStateRollbackRestoresSpilledValues(t *testing.T) {
	s := newKeyedState("changelog", 0, true, spillBound(), t.TempDir(), slog.New(slog.DiscardHandler))
	defer s.close()
	keys := spillKeyNames()
	counter(t, s, keys, true)
	counter(t, s, keys, false) // pending: taken back below
	s.rollback(func() {})
	for _, k := range keys {
		if v := s.value(k); string(v) != "1" {
			t.Fatalf("%s = %q after the rollback, want 1", k, v)
		}
	}
	if got := s.Len(); got != spillKeys {
		t.Fatalf("%d keys, want %d", got, spillKeys)
	}
}

// A value on disk keeps the time it was set: past the TTL, it is not
// sent.
func TestKeyedStateTTLOfSpilledValues(t *testing.T) {
	s := newKeyedState("changelog", time.Hour, false, spillBound(), t.TempDir(), slog.New(slog.DiscardHandler))
	defer s.close()
	keys := spillKeyNames()
	now := time.Now()
	s.mu.Lock()
	for i, k := range keys {
		at := now
		if i%2 == 1 {
			at = now.Add(-2 * time.Hour)
		}
		s.set(k, []byte("v"), false, at)
	}
	s.unlock()
	if s.vals.onDisk < spillKeys/2 {
		t.Fatalf("%d keys on disk, want most of %d", s.vals.onDisk, spillKeys)
	}
	items := make([]*item, len(keys))
	for i, k := range keys {
		items[i] = &item{m: &subscribe.Message{Key: k}}
	}
	got := map[string]bool{}
	for _, e := range mustEntries(t, s, items) {
		got[e.Key] = true
	}
	for i, k := range keys {
		if got[k] != (i%2 == 0) {
			t.Fatalf("%s sent: %v, want %v (set %v ago, TTL 1h)", k, got[k], i%2 == 0, map[bool]string{true: "now", false: "2h"}[i%2 == 0])
		}
	}
}

// Reading the changelog back starts from an empty spill; a spill file
// no store holds (its host died) is removed when the next is made,
// and one in use is left alone.
func TestKeyedStateSpillIsRemovedWhenRebuilt(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	a := newKeyedState("changelog", 0, false, spillBound(), dir, log)
	defer a.close()
	counter(t, a, spillKeyNames(), false)
	files := spillFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("spill files %v, want one", files)
	}
	stale := filepath.Join(dir, "state-dead"+spillSuffix)
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b := newKeyedState("changelog", 0, false, spillBound(), dir, log)
	defer b.close()
	counter(t, b, spillKeyNames(), false)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a dead host's spill was left: %v", err)
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Errorf("the spill in use was removed: %v", err)
	}
	a.mu.Lock()
	a.vals.reset()
	a.mu.Unlock()
	if _, err := os.Stat(files[0]); !os.IsNotExist(err) {
		t.Errorf("the spill stayed after the state was emptied to be read back: %v", err)
	}
	if a.Len() != 0 {
		t.Errorf("%d keys after reset", a.Len())
	}
}
