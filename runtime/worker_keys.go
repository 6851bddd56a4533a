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
// and as its lane was chosen (laneHash); a message without a key is held
// under its topic, so that those keep their order too. The ordering key,
// when there is one and it differs, is held beside it (guardKeys).
func guardKeys(it *item, f func(string)) {
	m := it.m
	switch {
	case m.Key != "":
		f(m.Key)
	default:
		f("\x00" + m.Topic)
	}
	if m.OrderingKey != "" && m.OrderingKey != m.Key {
		f("\x01" + m.OrderingKey)
	}
}

// overlaps says whether a message of items shares a key with a batch in
// flight.
func (g *keyGuard) overlaps(items []*item) bool {
	if len(g.busy) == 0 {
		return false
	}
	hit := false
	for _, it := range items {
		guardKeys(it, func(k string) {
			if g.busy[k] > 0 {
				hit = true
			}
		})
		if hit {
			return true
		}
	}
	return false
}

// hold counts the keys of items as in flight.
func (g *keyGuard) hold(items []*item) {
	for _, it := range items {
		guardKeys(it, func(k string) { g.busy[k]++ })
	}
}

// free is told that the batch of items has its answers applied.
func (g *keyGuard) free(items []*item) {
	for _, it := range items {
		guardKeys(it, func(k string) {
			if n := g.busy[k] - 1; n > 0 {
				g.busy[k] = n
			} else {
				delete(g.busy, k)
			}
		})
	}
}
