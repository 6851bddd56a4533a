package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// cursor is where a subscription stands on its topic: every entry below
// markDelete is acknowledged; acked holds the acknowledged entries above
// it; batchAcks the partly acknowledged batches (a set bit is a message
// still unacknowledged); readPos is the next entry never dispatched;
// replay the entries to send again (redelivered, or handed back by a
// consumer that left), in id order; pending maps each dispatched,
// unacknowledged entry to its consumer; redeliveries counts how often an
// entry was redelivered. dirty says the durable part (markDelete, acked,
// batchAcks) changed since it was last saved.
//
// A cursor is guarded by its subscription's mutex. It knows nothing of
// subscription kinds: what is kept beside it (Key_Shared's hash
// bookkeeping, the consumers' unacked counts) follows through hooks.
type cursor struct {
	markDelete   uint64
	readPos      uint64
	acked        rangeSet
	batchAcks    map[uint64][]int64
	replay       idQueue
	pending      map[uint64]pendingEntry
	redeliveries map[uint64]uint32
	dirty        bool

	hooks cursorHooks
}

// cursorHooks are told what leaves a cursor.
type cursorHooks interface {
	// released: a pending entry is no longer at its consumer.
	released(id uint64, pe pendingEntry)
	// unqueued: an entry left the replay queue.
	unqueued(id uint64)
}

func newCursor(start uint64, hooks cursorHooks) cursor {
	return cursor{
		markDelete:   start,
		readPos:      start,
		batchAcks:    map[uint64][]int64{},
		pending:      map[uint64]pendingEntry{},
		redeliveries: map[uint64]uint32{},
		hooks:        hooks,
	}
}

// isAcked reports whether entry id is acknowledged (wholly).
func (c *cursor) isAcked(id uint64) bool { return id < c.markDelete || c.acked.contains(id) }

// release forgets a pending entry.
func (c *cursor) release(id uint64, pe pendingEntry) {
	delete(c.pending, id)
	c.hooks.released(id, pe)
}

// queue adds id to the replay queue; false when it is there already.
func (c *cursor) queue(id uint64) bool {
	if c.replay.contains(id) {
		return false
	}
	c.replay.add(id)
	return true
}

// unqueue takes id out of the replay queue.
func (c *cursor) unqueue(id uint64) {
	if c.replay.remove(id) {
		c.hooks.unqueued(id)
	}
}

// ack acknowledges a whole entry; false when it already was.
func (c *cursor) ack(id uint64) bool {
	if c.isAcked(id) {
		return false
	}
	if pe, ok := c.pending[id]; ok {
		c.release(id, pe)
	}
	c.unqueue(id)
	delete(c.redeliveries, id)
	delete(c.batchAcks, id)
	c.dirty = true
	if id != c.markDelete {
		c.acked.add(id)
		return true
	}
	c.markDelete = c.acked.advance(id + 1)
	c.readPos = max(c.readPos, c.markDelete)
	return true
}

// ackPart records a partial acknowledgement of a batch (ackSet: a bit set
// for each message still unacknowledged). It reports whether that
// acknowledged the whole entry.
func (c *cursor) ackPart(id uint64, ackSet []int64) bool {
	if c.isAcked(id) {
		return false
	}
	cur, ok := c.batchAcks[id]
	if !ok {
		cur = slices.Clone(ackSet)
	} else {
		for i := range cur {
			if i < len(ackSet) {
				cur[i] &= ackSet[i]
			} else {
				cur[i] = 0
			}
		}
	}
	for _, w := range cur {
		if w != 0 {
			c.batchAcks[id] = cur
			c.dirty = true
			return false
		}
	}
	return c.ack(id)
}

// ackUpTo acknowledges every entry up to and including id (or up to id,
// with a partial ack of id itself). It reports whether entry id itself
// was acknowledged by the partial ack.
func (c *cursor) ackUpTo(id uint64, ackSet []int64) bool {
	upTo := id + 1
	if len(ackSet) > 0 {
		upTo = id
	}
	if upTo > c.markDelete {
		c.forgetBelow(upTo)
	}
	return len(ackSet) > 0 && c.ackPart(id, ackSet)
}

// forgetBelow acknowledges every entry below upTo.
func (c *cursor) forgetBelow(upTo uint64) {
	for pid, pe := range c.pending {
		if pid < upTo {
			c.release(pid, pe)
		}
	}
	c.markDelete = upTo
	c.acked.trimBelow(upTo)
	// The replay queue is sorted: tell of its head, then cut it in one go.
	for _, id := range c.replay.ids {
		if id >= upTo {
			break
		}
		c.hooks.unqueued(id)
	}
	c.replay.trimBelow(upTo)
	maps.DeleteFunc(c.redeliveries, func(k uint64, _ uint32) bool { return k < upTo })
	maps.DeleteFunc(c.batchAcks, func(k uint64, _ []int64) bool { return k < upTo })
	c.markDelete = c.acked.advance(c.markDelete)
	c.readPos = max(c.readPos, c.markDelete)
	c.dirty = true
}

// moveTo puts the cursor at entry pos (a seek): everything before it is
// acknowledged, nothing after it is; in-flight state is forgotten (the
// replay queue without telling: the caller forgets all of it).
func (c *cursor) moveTo(pos uint64) {
	for id, pe := range c.pending {
		c.release(id, pe)
	}
	c.markDelete, c.readPos = pos, pos
	c.acked.clear()
	c.replay.clear()
	clear(c.batchAcks)
	clear(c.redeliveries)
	c.dirty = true
}

// backlog counts the entries below next not yet acknowledged.
func (c *cursor) backlog(next uint64) int64 {
	if next <= c.markDelete {
		return 0
	}
	return int64(next - c.markDelete - c.acked.count())
}

// Cursor state, version 1: markDelete, the subscription type, the acked
// spans (each as gap from the previous end and length) and partial batch
// acks.
const cursorVersion = 1

// encode is the durable part of the cursor, with the subscription's type.
func (c *cursor) encode(typ uint64) []byte {
	b := []byte{cursorVersion}
	b = binary.AppendUvarint(b, c.markDelete)
	b = binary.AppendUvarint(b, typ)
	b = binary.AppendUvarint(b, uint64(len(c.acked.s)))
	prev := c.markDelete
	for _, sp := range c.acked.s {
		b = binary.AppendUvarint(b, sp.lo-prev)
		b = binary.AppendUvarint(b, sp.hi-sp.lo)
		prev = sp.hi
	}
	keys := slices.Sorted(maps.Keys(c.batchAcks))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		words := c.batchAcks[k]
		b = binary.AppendUvarint(b, k)
		b = binary.AppendUvarint(b, uint64(len(words)))
		for _, w := range words {
			b = binary.AppendUvarint(b, uint64(w))
		}
	}
	return b
}

var errBadCursor = errors.New("corrupt cursor state")

// cursorReader reads the varints of an encoded cursor.
type cursorReader struct{ b []byte }

func (r *cursorReader) next() (uint64, bool) {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, false
	}
	r.b = r.b[n:]
	return v, true
}

// decode reads what encode wrote into c (made by newCursor) and returns
// the subscription type; readPos is left at markDelete.
func (c *cursor) decode(b []byte) (typ uint64, err error) {
	if len(b) == 0 || b[0] != cursorVersion {
		return 0, fmt.Errorf("cursor version %v: %w", b[:min(1, len(b))], errBadCursor)
	}
	r := &cursorReader{b: b[1:]}
	md, ok1 := r.next()
	typ, ok2 := r.next()
	nr, ok3 := r.next()
	if !ok1 || !ok2 || !ok3 || nr > uint64(len(r.b)) {
		return 0, errBadCursor
	}
	c.markDelete, c.readPos = md, md
	prev := md
	for i := uint64(0); i < nr; i++ {
		gap, ok1 := r.next()
		n, ok2 := r.next()
		if !ok1 || !ok2 {
			return 0, errBadCursor
		}
		lo := prev + gap
		c.acked.s = append(c.acked.s, span{lo, lo + n})
		prev = lo + n
	}
	return typ, c.decodeBatchAcks(r)
}

func (c *cursor) decodeBatchAcks(r *cursorReader) error {
	nb, ok := r.next()
	if !ok || nb > uint64(len(r.b)) {
		return errBadCursor
	}
	for i := uint64(0); i < nb; i++ {
		k, ok1 := r.next()
		nw, ok2 := r.next()
		if !ok1 || !ok2 || nw > uint64(len(r.b)) {
			return errBadCursor
		}
		words := make([]int64, nw)
		for j := range words {
			w, ok := r.next()
			if !ok {
				return errBadCursor
			}
			words[j] = int64(w)
		}
		c.batchAcks[k] = words
	}
	return nil
}

// startAt moves a decoded cursor past entries trimmed from the log
// meanwhile (first is the first entry left).
func (c *cursor) startAt(first uint64) {
	if c.markDelete < first {
		c.markDelete = first
		c.acked.trimBelow(first)
		c.markDelete = c.acked.advance(c.markDelete)
	}
	c.readPos = c.markDelete
}
