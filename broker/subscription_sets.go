package broker

import "sort"

// span is the half-open range of entry ids [lo, hi).
type span struct{ lo, hi uint64 }

// rangeSet is a set of entry ids kept as sorted, disjoint, non-adjacent
// spans: acknowledgements mostly arrive in runs, so it stays small.
type rangeSet struct{ s []span }

func (r *rangeSet) contains(x uint64) bool {
	i := sort.Search(len(r.s), func(i int) bool { return r.s[i].hi > x })
	return i < len(r.s) && r.s[i].lo <= x
}

func (r *rangeSet) add(x uint64) {
	i := sort.Search(len(r.s), func(i int) bool { return r.s[i].hi >= x })
	switch {
	case i < len(r.s) && r.s[i].lo <= x && x < r.s[i].hi:
		return
	case i < len(r.s) && r.s[i].hi == x:
		r.s[i].hi = x + 1
		if i+1 < len(r.s) && r.s[i+1].lo == x+1 {
			r.s[i].hi = r.s[i+1].hi
			r.s = append(r.s[:i+1], r.s[i+2:]...)
		}
	case i < len(r.s) && r.s[i].lo == x+1:
		r.s[i].lo = x
	default:
		r.s = append(r.s, span{})
		copy(r.s[i+1:], r.s[i:])
		r.s[i] = span{x, x + 1}
	}
}

// trimBelow forgets ids below x.
func (r *rangeSet) trimBelow(x uint64) {
	i := 0
	for i < len(r.s) && r.s[i].hi <= x {
		i++
	}
	r.s = r.s[i:]
	if len(r.s) > 0 && r.s[0].lo < x {
		r.s[0].lo = x
	}
}

// advance returns the first id at or after x that is not in the set,
// dropping the span it skipped over.
func (r *rangeSet) advance(x uint64) uint64 {
	if len(r.s) > 0 && r.s[0].lo <= x && x < r.s[0].hi {
		x = r.s[0].hi
		r.s = r.s[1:]
	}
	return x
}

// count is how many ids the set holds.
func (r *rangeSet) count() uint64 {
	var n uint64
	for _, s := range r.s {
		n += s.hi - s.lo
	}
	return n
}

func (r *rangeSet) clear() { r.s = nil }

// idQueue is a sorted set of entry ids (the replay queue).
type idQueue struct{ ids []uint64 }

func (q *idQueue) len() int { return len(q.ids) }

func (q *idQueue) add(x uint64) {
	i := sort.Search(len(q.ids), func(i int) bool { return q.ids[i] >= x })
	if i < len(q.ids) && q.ids[i] == x {
		return
	}
	q.ids = append(q.ids, 0)
	copy(q.ids[i+1:], q.ids[i:])
	q.ids[i] = x
}

func (q *idQueue) remove(x uint64) bool {
	i := sort.Search(len(q.ids), func(i int) bool { return q.ids[i] >= x })
	if i < len(q.ids) && q.ids[i] == x {
		q.ids = append(q.ids[:i], q.ids[i+1:]...)
		return true
	}
	return false
}

func (q *idQueue) contains(x uint64) bool {
	i := sort.Search(len(q.ids), func(i int) bool { return q.ids[i] >= x })
	return i < len(q.ids) && q.ids[i] == x
}

// first copies up to n of the smallest ids.
func (q *idQueue) first(n int) []uint64 {
	n = min(n, len(q.ids))
	return append([]uint64(nil), q.ids[:n]...)
}

// trimBelow drops ids below x.
func (q *idQueue) trimBelow(x uint64) {
	i := sort.Search(len(q.ids), func(i int) bool { return q.ids[i] >= x })
	q.ids = q.ids[i:]
}

func (q *idQueue) clear() { q.ids = nil }
