package runtime

// keyGuard lets a worker of a keyed-state pipeline send its instance the
// next batch while the last is still out, as long as the two hold no key
// in common (docs/benchmarks/keyed-state.md): a batch's keys' values are
// read when it is sent, so a batch that shares a key with one in flight
// waits until that one's changes are applied, and each key's messages
// still reach the handler one batch after the other, in order. Only the
// worker's run goroutine uses it.
type keyGuard struct {
	// busy counts, by key, the messages of the batches in flight.
	busy map[string]int
}

// guardKey is what a message is held under: its key, as the handler's
// state sees it (no steps run before the handler of a guarded worker),
// and as its lane was chosen (laneHash, by key in a keyed-state
// pipeline); a message without a key is held under its topic, so that
// those keep their order too. The ordering key is not held: a keyed-state
// pipeline keeps order per key, and the ordering key does not split one
// (docs/pipelines.md, "Keyed state").
func guardKey(it *item) string {
	if it.m.Key != "" {
		return it.m.Key
	}
	return "\x00" + it.m.Topic
}

// overlaps says whether a message of items shares a key with a batch in
// flight.
func (g *keyGuard) overlaps(items []*item) bool {
	if len(g.busy) == 0 {
		return false
	}
	for _, it := range items {
		if g.busy[guardKey(it)] > 0 {
			return true
		}
	}
	return false
}

// hold counts the keys of items as in flight.
func (g *keyGuard) hold(items []*item) {
	for _, it := range items {
		g.busy[guardKey(it)]++
	}
}

// free is told that the batch of items has its answers applied.
func (g *keyGuard) free(items []*item) {
	for _, it := range items {
		k := guardKey(it)
		if n := g.busy[k] - 1; n > 0 {
			g.busy[k] = n
		} else {
			delete(g.busy, k)
		}
	}
}
