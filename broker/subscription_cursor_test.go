package broker

import (
	"errors"
	"slices"
	"testing"
)

// hookLog records what a cursor tells its subscription.
type hookLog struct {
	releasedIDs []uint64
	unqueuedIDs []uint64
}

func (h *hookLog) released(id uint64, pe pendingEntry) {
	h.releasedIDs = append(h.releasedIDs, id)
	pe.c.unacked.Add(-int64(pe.msgs))
}

func (h *hookLog) unqueued(id uint64) { h.unqueuedIDs = append(h.unqueuedIDs, id) }

func newTestCursor(start uint64) (*cursor, *hookLog) {
	h := &hookLog{}
	c := newCursor(start, h)
	return &c, h
}

func TestCursorAcksInOrderMoveMarkDeleteAndGapsWait(t *testing.T) {
	c, _ := newTestCursor(10)
	if c.backlog(15) != 5 {
		t.Fatalf("backlog %d, want 5", c.backlog(15))
	}
	for _, id := range []uint64{12, 11, 14} {
		if !c.ack(id) {
			t.Fatalf("ack %d: not acknowledged", id)
		}
	}
	if c.markDelete != 10 || !c.isAcked(12) || c.isAcked(13) || c.backlog(15) != 2 {
		t.Fatalf("after acks of 11, 12, 14: markDelete %d, backlog %d", c.markDelete, c.backlog(15))
	}
	if c.ack(12) {
		t.Fatal("a second ack of 12 acknowledged something")
	}
	c.ack(10) // closes the gap up to 13
	if c.markDelete != 13 || c.readPos != 13 || len(c.acked.s) != 1 {
		t.Fatalf("markDelete %d, readPos %d, acked %v", c.markDelete, c.readPos, c.acked.s)
	}
	c.ack(13)
	if c.markDelete != 15 || c.backlog(15) != 0 || !c.dirty {
		t.Fatalf("markDelete %d, backlog %d, dirty %v", c.markDelete, c.backlog(15), c.dirty)
	}
}

func TestCursorAckReleasesThePendingEntryAndItsReplay(t *testing.T) {
	c, h := newTestCursor(0)
	cons := &consumer{}
	cons.unacked.Add(3)
	c.pending[1] = pendingEntry{c: cons, msgs: 3, hash: -1}
	c.queue(1)
	c.queue(2)
	c.redeliveries[1] = 2
	c.ack(1)
	if _, ok := c.pending[1]; ok || cons.unacked.Load() != 0 || c.replay.contains(1) || c.redeliveries[1] != 0 {
		t.Fatalf("pending %v, unacked %d, replay %v", c.pending, cons.unacked.Load(), c.replay.ids)
	}
	if !slices.Equal(h.releasedIDs, []uint64{1}) || !slices.Equal(h.unqueuedIDs, []uint64{1}) {
		t.Fatalf("hooks: released %v, unqueued %v", h.releasedIDs, h.unqueuedIDs)
	}
	if c.queue(2) {
		t.Fatal("2 queued twice")
	}
}

func TestCursorBatchAcksMergeUntilTheWholeEntryIsAcked(t *testing.T) {
	c, _ := newTestCursor(0)
	if c.ackPart(0, []int64{0b1110}) || c.isAcked(0) { // message 0 acked
		t.Fatal("a partial ack acknowledged the entry")
	}
	if c.ackPart(0, []int64{0b1011}) { // message 2 acked; 1 and 3 left
		t.Fatal("a second partial ack acknowledged the entry")
	}
	if got := c.batchAcks[0]; len(got) != 1 || got[0] != 0b1010 {
		t.Fatalf("batch acks %b, want 1010", got)
	}
	if !c.ackPart(0, []int64{0b0101}) || !c.isAcked(0) || c.markDelete != 1 || len(c.batchAcks) != 0 {
		t.Fatalf("the last part: markDelete %d, batch acks %v", c.markDelete, c.batchAcks)
	}
}

func TestCursorCumulativeAckForgetsEverythingBelow(t *testing.T) {
	c, h := newTestCursor(0)
	cons := &consumer{}
	for id := uint64(0); id < 6; id++ {
		c.pending[id] = pendingEntry{c: cons, msgs: 1, hash: -1}
		cons.unacked.Add(1)
	}
	c.queue(2)
	c.queue(7)
	c.redeliveries[3] = 1
	c.batchAcks[4] = []int64{1}
	c.ack(8) // out of order, waits in acked
	if c.ackUpTo(6, nil) {
		t.Fatal("a cumulative ack without an ack set reported a partial ack")
	}
	if c.markDelete != 7 || cons.unacked.Load() != 0 || len(c.pending) != 0 || c.replay.contains(2) ||
		!c.replay.contains(7) || len(c.redeliveries) != 0 || len(c.batchAcks) != 0 {
		t.Fatalf("markDelete %d, unacked %d, pending %v, replay %v", c.markDelete, cons.unacked.Load(), c.pending, c.replay.ids)
	}
	if !slices.Contains(h.unqueuedIDs, 2) || slices.Contains(h.unqueuedIDs, 7) {
		t.Fatalf("unqueued %v", h.unqueuedIDs)
	}
	c.ack(7) // joins 8
	if c.markDelete != 9 {
		t.Fatalf("markDelete %d, want 9", c.markDelete)
	}
	// Up to 10, with a partial ack of 10 itself.
	if c.ackUpTo(10, []int64{0b10}) || c.markDelete != 10 || c.batchAcks[10][0] != 0b10 {
		t.Fatalf("markDelete %d, batch acks %v", c.markDelete, c.batchAcks)
	}
}

func TestCursorMoveToForgetsInFlightState(t *testing.T) {
	c, h := newTestCursor(0)
	cons := &consumer{}
	cons.unacked.Add(1)
	c.pending[3] = pendingEntry{c: cons, msgs: 1, hash: -1}
	c.queue(4)
	c.ack(5)
	c.ackPart(6, []int64{1})
	c.redeliveries[4] = 3
	c.moveTo(2)
	if c.markDelete != 2 || c.readPos != 2 || len(c.acked.s) != 0 || c.replay.len() != 0 || len(c.pending) != 0 ||
		len(c.batchAcks) != 0 || len(c.redeliveries) != 0 || cons.unacked.Load() != 0 || !slices.Equal(h.releasedIDs, []uint64{3}) {
		t.Fatalf("after moveTo(2): %+v", c)
	}
}

func TestCursorStateRoundTripsAndBadStateIsAnError(t *testing.T) {
	c, _ := newTestCursor(100)
	c.ack(102)
	c.ack(103)
	c.ack(110)
	c.ackPart(105, []int64{0b110, -1})
	b := c.encode(3)
	d := newCursor(0, nil)
	typ, err := d.decode(b)
	if err != nil || typ != 3 || d.markDelete != 100 || d.readPos != 100 ||
		!slices.Equal(d.acked.s, c.acked.s) || !slices.Equal(d.batchAcks[105], []int64{0b110, -1}) {
		t.Fatalf("decoded typ %d, %+v: %v", typ, d, err)
	}
	d.startAt(103) // 100..102 trimmed away; 102 and 103 were acked
	if d.markDelete != 104 || d.readPos != 104 {
		t.Fatalf("after startAt(103): markDelete %d, readPos %d", d.markDelete, d.readPos)
	}
	for n := 0; n < len(b); n++ {
		e := newCursor(0, nil)
		if _, err := e.decode(b[:n]); !errors.Is(err, errBadCursor) {
			t.Fatalf("%d of %d bytes: %v", n, len(b), err)
		}
	}
	if _, err := (&cursor{batchAcks: map[uint64][]int64{}}).decode([]byte{2, 0}); !errors.Is(err, errBadCursor) {
		t.Fatalf("version 2: %v", err)
	}
}
