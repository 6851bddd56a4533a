package runtime

import "hash/maphash"

// keyGuard lets a worker of a keyed-state pipeline send its instance the
// next batch while the last is still out, as long as the two hold no key
// in common (docs/benchmarks/keyed-state.md): a batch's keys' values are
// read when it is sent, so a batch that shares a key with one in flight
// waits until that one's changes are applied, and each key's messages
// still reach the handler one batch after the other, in order. Only the
// worker's run goroutine uses it.
//
// Keys are held by a 64-bit hash of theirs, worked out once for a
// message (item.guard): a map by the key itself took a string's hash and
// compare for each of a message's four lookups (overlaps, hold, and
// free's two), about a tenth of keyed state's host CPU in
// BenchmarkKeyedStateCounter (docs/benchmarks/keyed-state.md). Two keys
// with one hash only make a batch wait that need not: never the other
// way.
type keyGuard struct {
	seed maphash.Seed
	// busy counts, by key's hash, the messages of the batches in flight.
	busy map[uint64]int32
}

func newKeyGuard() *keyGuard {
	return &keyGuard{seed: maphash.MakeSeed(), busy: map[uint64]int32{}}
}

// hash is the hash of what it is held under: its key, as the handler's
// state sees it (no steps run before the handler of a guarded worker),
// and as its lane was chosen (laneHash, by key in a keyed-state
// pipeline); a message without a key is held under its topic (after a
// zero byte), so that those keep their order too. The ordering key is
// not held: a keyed-state pipeline keeps order per key, and the ordering
// key does not split one (docs/pipelines.md, "Keyed state").
func (g *keyGuard) hash(it *item) uint64 {
	if !it.guardSet {
		if it.m.Key != "" {
			it.guard = maphash.String(g.seed, it.m.Key)
		} else {
			var h maphash.Hash
			h.SetSeed(g.seed)
			_ = h.WriteByte(0)
			_, _ = h.WriteString(it.m.Topic)
			it.guard = h.Sum64()
		}
		it.guardSet = true
	}
	return it.guard
}

// overlaps says whether a message of items shares a key with a batch in
// flight.
func (g *keyGuard) overlaps(items []*item) bool {
	if len(g.busy) == 0 {
		return false
	}
	for _, it := range items {
		if g.busy[g.hash(it)] > 0 {
			return true
		}
	}
	return false
}

// hold counts the keys of items as in flight.
func (g *keyGuard) hold(items []*item) {
	for _, it := range items {
		g.busy[g.hash(it)]++
	}
}

// free is told that the batch of items has its answers applied.
func (g *keyGuard) free(items []*item) {
	for _, it := range items {
		k := g.hash(it)
		if n := g.busy[k] - 1; n > 0 {
			g.busy[k] = n
		} else {
			delete(g.busy, k)
		}
	}
}
