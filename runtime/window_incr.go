package runtime

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// The incremental mode of windows (docs/pipelines.md, "Incremental
// windows"): the host keeps one accumulator per key and window, bytes
// the handler owns. The messages a receive takes go to the changelog
// together, as one segment record (s|…); once it has its receipt they
// are acknowledged and wait in their windows. A window's waiting
// messages go to the handler's add step (one add in flight a window)
// when the watermark closes it, when maxAdd of them wait, or when the
// host holds more than maxPendingBytes of waiting messages; the
// accumulator it answers with is written to the changelog, and a
// segment is removed once each of its messages is in its windows'
// accumulators. So a message costs a share of a record, not an add
// call and an accumulator record of its own (BenchmarkWindowCount).
//
// The accumulator's record holds, for each partition, the newest
// message added: a copy at or before it (a redelivery, or a segment
// read back after its messages were added) is not added again (a
// window's messages of one partition come in order, on the Exclusive
// subscription windows need). A forgotten window's records are removed
// only once every segment written before it went is gone, so that a
// segment read back never finds one of its windows missing and makes
// it again.

// maxAdd is the most messages one add step gets.
const maxAdd = 256

// maxPendingBytes bounds the messages the host holds waiting for their
// adds (about their JSON's size): past it, windows' waiting messages go
// to their add steps, whether the windows are due or not, until half of
// it is left (incrTail).
const maxPendingBytes = 32 << 20

// maxSegmentBytes is about the largest segment record: a receive's
// messages are cut into records of at most this (or one message).
const maxSegmentBytes = 256 << 10

// addLedger marks the ids of add calls, beside those of fires (1<<62).
const addLedger = 1<<62 + 1

// winAcc is one window's accumulator and what waits to join it.
type winAcc struct {
	acc     []byte
	n       int               // messages added
	hw      map[string]msgPos // per topic, the newest message added
	pending []*pendMsg
	adding  bool
	retryAt time.Time
	id      uint64
	// unacked counts the inputs added whose acknowledgement has not
	// committed (exactly_once, window_exactly.go).
	unacked int
	// apart: an add and fire of it met an instance of a contract version
	// before 5 (unsent); from then on its adds and its fire are calls of
	// their own, so that a slot not yet rolled to version 5 is not handed
	// it again and again.
	apart bool
}

// pendMsg is a message in a segment, waiting for refs windows' adds.
type pendMsg struct {
	wm   *winMsg
	m    *subscribe.Message // nil when read back from the changelog
	pos  msgPos
	refs int
	seg  *segment
	size int // its share of pendingBytes, for each window it waits in
}

// takenMsg is a message taken in incremental mode: its window message
// and its place in the segment, allocated together.
type takenMsg struct {
	pm pendMsg
	wm winMsg
}

// segment is one changelog record of messages taken together.
type segment struct {
	rec  string
	seq  uint64
	sub  uint64     // windower.gen when it was made
	size int        // about its record's length (segMsgSize)
	msgs []*pendMsg // until it has its receipt
	// live counts its messages not yet in each of their windows'
	// accumulators; at 0 (with its receipt) the record goes.
	live    int
	durable bool
	gone    bool
}

// segDone is a segment's receipt.
type segDone struct {
	seg *segment
	err error
}

// deferredGone are records of forgotten windows, removed once every
// segment up to seq is gone.
type deferredGone struct {
	seq  uint64
	recs []string
}

// msgPos orders the messages of one partition.
type msgPos [3]int64

func posOf(id pulsarwire.MessageID) msgPos {
	return msgPos{int64(id.Ledger), int64(id.Entry), int64(id.BatchIndex)}
}

func (a msgPos) after(b msgPos) bool {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c > 0
	}
	if c := cmp.Compare(a[1], b[1]); c != 0 {
		return c > 0
	}
	return a[2] > b[2]
}

// accRecord is an accumulator's changelog record (a|<start>|<key>). It
// also says how often the window fired, with how many messages added
// (Fires, FN): a window's fired mark is its accumulator's record, not one
// of its own, so that a forgotten window takes one removal, not two
// (BenchmarkWindowCount's per-window cost).
type accRecord struct {
	Acc   []byte            `json:"acc,omitempty"`
	N     int               `json:"n"`
	HW    map[string]msgPos `json:"hw,omitempty"`
	Fires int               `json:"fires,omitempty"`
	FN    int               `json:"fn,omitempty"`
}

// firedAs is r marked fired as ws says (none yet when ws is nil).
func (r accRecord) firedAs(ws *winState) accRecord {
	if ws != nil {
		r.Fires, r.FN = ws.fires, ws.n
	}
	return r
}

// markAcc writes window start of key's fired mark: its accumulator's
// record, as it is (no add is made while a fire is in flight, so it is
// the one the fire had).
func (w *windower) markAcc(key string, start int64, a *winAcc, ws *winState) {
	rec := accRecord{Acc: a.acc, N: a.n, HW: a.hw}.firedAs(ws)
	b := w.accPayload(&rec)
	w.p.client.PublishAsync(w.p.hard, w.topic, pool.Message{Key: accRecordKey(key, start), Payload: b},
		func(pulsarwire.MessageID, error) {})
}

// accPayload is rec as its record's payload, its buffer sized for it.
func (w *windower) accPayload(rec *accRecord) []byte {
	return appendAccRecord(make([]byte, 0, 64+len(rec.Acc)*4/3+len(rec.HW)*(len(w.srcTopic)+64)), rec)
}

const recAcc = "a|"

func accRecordKey(key string, start int64) string {
	return recAcc + strconv.FormatInt(start, 10) + "|" + key
}

// addCall is what an add item carries: its messages, and the window's
// accumulator record as it was when the add was made, but for its newest
// ids (hw), those of the add's messages already: worked out while
// they are in the cache, as the add is made, not once it is answered.
type addCall struct {
	msgs []*pendMsg
	base accRecord
}

type addDone struct {
	f     *windowFire
	added bool // the handler's accumulator is in the changelog
	rec   accRecord
	err   error
	ok    bool
	delay time.Duration
}

type winID2 struct {
	key   string
	start int64
}

func (k *winKey) accOf(start int64, w *windower) *winAcc {
	if k.last != nil && k.lastStart == start {
		return k.last
	}
	if k.accs == nil {
		k.accs = map[int64]*winAcc{}
	}
	a := k.accs[start]
	if a == nil {
		w.seq++
		a = &winAcc{id: w.seq}
		k.accs[start] = a
	}
	k.last, k.lastStart = a, start
	return a
}

// takeIncr puts wm (of m, neither late nor held) in the segment being
// made, as pm, sending it first when wm would make it too large.
func (w *windower) takeIncr(wm *winMsg, pm *pendMsg, m *subscribe.Message) {
	n := segMsgSize(wm)
	if w.cur != nil && w.cur.size+n > maxSegmentBytes {
		w.sendSegment()
	}
	if w.cur == nil {
		w.segSeq++
		w.cur = &segment{rec: recSegment + wm.Topic + "|" + wm.ID, seq: w.segSeq, sub: w.gen, size: 1,
			msgs: make([]*pendMsg, 0, min(w.segLeft, maxSegmentBytes/n+1))}
	}
	*pm = pendMsg{wm: wm, m: m, pos: posOf(m.ID), seg: w.cur}
	w.cur.size += n
	w.cur.msgs = append(w.cur.msgs, pm)
	w.held.hold(wm)
	w.placed.take(wm.Time)
}

// sendSegment has the segment being made written to the changelog, by
// the writer (window_writer.go) when it runs.
func (w *windower) sendSegment() {
	seg := w.cur
	if seg == nil {
		return
	}
	w.cur = nil
	w.segs = append(w.segs, seg)
	if !w.writerOn.Load() {
		w.segBuf = w.writeSegment(seg, w.segBuf)
		return
	}
	w.mu.Lock()
	w.segOut = append(w.segOut, seg)
	w.mu.Unlock()
	w.kickWriter()
}

// writeSegment encodes seg into buf and publishes it (the producer
// copies the payload: buf is returned for the next segment). A segment
// of before the windows were read back is not written: its messages
// come again.
func (w *windower) writeSegment(seg *segment, buf []byte) []byte {
	p := w.p
	sub := seg.sub
	w.mu.Lock()
	stale := w.stale(sub)
	w.mu.Unlock()
	if stale {
		for _, pm := range seg.msgs {
			p.handBack(&item{m: pm.m})
		}
		return buf
	}
	b := append(slices.Grow(buf[:0], seg.size), segmentVersion)
	for _, pm := range seg.msgs {
		b = appendSegMsg(b, pm.wm, pm.pos)
	}
	p.client.PublishAsync(p.hard, w.topic, pool.Message{Key: seg.rec, Payload: b}, func(_ pulsarwire.MessageID, err error) {
		w.mu.Lock()
		if w.stale(sub) {
			w.mu.Unlock()
			for _, pm := range seg.msgs {
				p.handBack(&item{m: pm.m}) // it comes again, to the windows read back
			}
			return
		}
		w.segsDone = append(w.segsDone, segDone{seg: seg, err: err})
		w.mu.Unlock()
		w.kick()
	})
	return b
}

// placeSegment acts on a segment's receipt: its messages join their
// windows and are acknowledged; or, not written, they come again.
func (w *windower) placeSegment(d segDone, now time.Time) {
	p, seg := w.p, d.seg
	msgs := seg.msgs
	seg.msgs = nil
	for _, pm := range msgs {
		w.placed.placed(pm.wm.Time)
	}
	if d.err != nil {
		// Not durable: they come again. The record goes in case it was
		// written after all, so that a restart does not find it.
		p.log.Warn("windows: messages could not be written to the changelog; they come again", "segment", seg.rec, "err", d.err)
		for _, pm := range msgs {
			w.held.unhold(pm.wm)
			it := &item{m: pm.m}
			p.nackAfter(it, p.cfg.ErrorPolicy.Backoff.Delay(1))
			p.settled(it, Retried, "window changelog: "+d.err.Error())
		}
		seg.durable = true
		w.segGone = append(w.segGone, seg)
		return
	}
	seg.durable = true
	// At least once, an acknowledgement is done with its item when ack
	// returns: one array of them serves every segment. Under
	// exactly_once the transaction keeps the item: one array a segment.
	var items []item
	if p.eo == nil {
		if cap(w.ackItems) < len(msgs) {
			w.ackItems = make([]item, len(msgs))
		}
		items = w.ackItems[:len(msgs)] // cleared after each use
	} else {
		items = make([]item, len(msgs))
	}
	for i, pm := range msgs {
		w.placeIncr(pm, now)
		it := &items[i]
		it.m = pm.m
		if len(w.copies) > 0 {
			it.m = w.latest(pm.wm.held(), pm.m)
		}
		p.ack(it, Acked, "")
		// Acknowledged: the received message is not needed any more,
		// and kept it would be scanned by every collection while its
		// window is open.
		pm.m = nil
	}
	if p.eo == nil {
		clear(items) // the messages go with their acknowledgements
	}
	if seg.live == 0 {
		w.segGone = append(w.segGone, seg)
	}
}

// placeIncr has pm, durable in its segment, join its windows.
func (w *windower) placeIncr(pm *pendMsg, now time.Time) {
	wm := pm.wm
	placed := w.placed.at(now)
	w.placed.observe(wm.Topic, wm.Time, now)
	k := w.key(wm.Key)
	var in []int64 // the windows it counts in, under exactly_once
	for _, s := range w.a.starts(wm.Time) {
		if s+w.a.size <= wm.Horizon {
			continue // forgotten when m came
		}
		a := k.accOf(s, w)
		if hw, ok := a.hw[wm.Topic]; ok && !pm.pos.after(hw) {
			continue // added before: a copy
		}
		if w.p.eo != nil {
			in = append(in, s)
		}
		if pm.size == 0 {
			pm.size = winMsgSize(wm)
		}
		a.pending = append(a.pending, pm)
		w.pendingBytes += pm.size
		pm.refs++
		if len(a.pending) >= maxAdd && !a.adding {
			w.adds[winID2{wm.Key, s}] = true
		}
		if end := s + w.a.size; end <= placed {
			w.dirty[wm.Key] = true // into a window that may have fired
		} else {
			w.nextCheck = min(w.nextCheck, end)
		}
	}
	if pm.refs == 0 {
		w.held.unhold(wm)
		return
	}
	if pm.m == nil {
		w.held.hold(wm) // read back: not taken by this host
	}
	switch {
	case len(in) == 0:
	case pm.m != nil:
		w.counted(wm.held(), unackedIn{key: wm.Key, starts: in})
	default:
		// Read back: its acknowledgement may not have committed.
		for _, s := range in {
			w.pinAcc(wm.Topic, pm.pos, wm.Key, s)
		}
	}
	wm.durable = true
	pm.seg.live++
	w.open.Add(1)
}

// addAnswered is told by settle that the handler answered an add with
// its new accumulator (nil: unchanged); it writes the accumulator's
// record, and the windows learn of it with the receipt.
func (w *windower) addAnswered(it *item, change *plugin.StateChange) {
	f := it.win
	w.mu.Lock()
	stale := w.stale(f.sub)
	w.mu.Unlock()
	if stale {
		// Its base may be older than what another host wrote meanwhile:
		// not written; its messages come again (window_regain.go).
		w.p.settled(it, Retried, "the subscription was lost and made again")
		return
	}
	rec := f.add.base
	if change != nil {
		rec.Acc = change.Value
		if change.Delete {
			rec.Acc = nil
		}
	}
	rec.N += len(f.add.msgs)
	w.writeAcc(f, rec)
	w.p.settled(it, Acked, "")
}

// accWrite is an accumulator record to write (windower.accWrites).
type accWrite struct {
	f   *windowFire
	rec accRecord
}

// writeAcc has rec, the accumulator an add of f made, written to the
// changelog by the writer (window_writer.go), or the receive goroutine
// when none runs (publishAcc); the windows learn of it with the receipt
// (processAdds).
func (w *windower) writeAcc(f *windowFire, rec accRecord) {
	w.mu.Lock()
	if !w.stale(f.sub) {
		w.accWrites = append(w.accWrites, accWrite{f: f, rec: rec})
	}
	w.mu.Unlock()
	if w.writerOn.Load() {
		w.kickWriter()
	} else {
		w.kick()
	}
}

// publishAcc writes rec, the accumulator an add of f made, to the
// changelog. It runs on the writer or the receive goroutine, which may
// wait here for the producer's room while the read loop goes on with
// the receipts.
func (w *windower) publishAcc(f *windowFire, rec accRecord) {
	b := w.accPayload(&rec)
	w.p.client.PublishAsync(w.p.hard, w.topic, pool.Message{Key: accRecordKey(f.key, f.start), Payload: b},
		func(_ pulsarwire.MessageID, err error) {
			w.mu.Lock()
			if !w.stale(f.sub) {
				w.addsDone = append(w.addsDone, addDone{f: f, added: true, rec: rec, err: err, ok: true})
			}
			w.mu.Unlock()
			w.kick()
		})
}

// addSettled is answered for an add that was not added: ok when its
// messages were dead-lettered or dropped, else to be made again after
// delay.
func (w *windower) addSettled(f *windowFire, ok bool, delay time.Duration) {
	w.mu.Lock()
	if !w.stale(f.sub) {
		w.addsDone = append(w.addsDone, addDone{f: f, ok: ok, delay: delay})
	}
	w.mu.Unlock()
	w.kick()
}

// addFireDue says whether a window due with messages waiting (a) is
// handed over as one add and fire: when the instances speak contract
// version 5 (the one started last does, and none that does not was
// handed one of this window: apart), all its messages fit one add, and
// not under exactly_once, whose fire's record goes in its transaction
// (settleIn) while an add's does not.
func (w *windower) addFireDue(a *winAcc) bool {
	return w.p.eo == nil && w.compact.Load() && !a.apart && len(a.pending) <= maxAdd
}

// addFireSettled is answered for an add and fire in one: ok and acked,
// its outputs are published, and the accumulator its add made is
// written with its fired mark; ok and not acked, it was dead-lettered or
// dropped (as an add: the accumulator stays as it was, and the window is
// not marked fired); else it is made again after delay.
func (w *windower) addFireSettled(f *windowFire, ok bool, delay time.Duration) {
	if !ok || !f.acked {
		w.addSettled(f, ok, delay)
		return
	}
	rec := f.add.base // written unless stale (writeAcc)
	rec.Acc = f.newAcc
	rec.N += len(f.add.msgs)
	rec.Fires, rec.FN = f.fire, rec.N
	w.writeAcc(f, rec)
}

// processAdds acts on the adds answered.
func (w *windower) processAdds(done []addDone, now time.Time) {
	p := w.p
	let := int64(0) // messages let go, counted once
	defer func() { w.open.Add(-let) }()
	for _, d := range done {
		f := d.f
		k := w.keys[f.key]
		if k == nil || k.accs[f.start] == nil {
			continue // made before the windows were read back (window_regain.go)
		}
		a := k.accs[f.start]
		a.adding = false
		w.dirty[f.key] = true
		if f.fire > 0 {
			// An add and fire in one: fired once its record is written.
			if ws := k.wins[f.start]; ws != nil {
				ws.inflight = false
				if d.added && d.err == nil {
					ws.fires, ws.n = f.fire, d.rec.N
				}
			}
		}
		if d.err != nil {
			// The accumulator in the changelog is the one before: the
			// messages are in their segments still, which a restart reads.
			p.fail(fmt.Errorf("windows: an accumulator could not be written to the changelog: %w", d.err))
			w.unadd(a, f.add.msgs)
			continue
		}
		if !d.ok {
			if f.unsent && f.fire > 0 {
				a.apart = true
			}
			a.retryAt = now.Add(d.delay)
			w.unadd(a, f.add.msgs)
			w.adds[winID2{f.key, f.start}] = true
			continue
		}
		if d.added {
			a.acc, a.n, a.hw = d.rec.Acc, d.rec.N, d.rec.HW
		}
		for _, pm := range f.add.msgs {
			if pm.refs--; pm.refs == 0 {
				w.held.unhold(pm.wm)
				let++
				if s := pm.seg; s != nil {
					if s.live--; s.live == 0 && s.durable {
						w.segGone = append(w.segGone, s)
					}
				}
			}
		}
		if len(a.pending) >= maxAdd {
			w.adds[winID2{f.key, f.start}] = true
		}
	}
}

// unadd puts the messages of an add not made back at the head of a's.
func (w *windower) unadd(a *winAcc, msgs []*pendMsg) {
	a.pending = append(msgs, a.pending...)
	for _, pm := range msgs {
		w.pendingBytes += pm.size
	}
}

// incrTail makes the adds due, after the answers, the receipts and the
// scan of process, and removes the segments and windows done with.
func (w *windower) incrTail(now time.Time) []*item {
	if w.pendingBytes > maxPendingBytes {
		// Too much waits: windows' messages go to their add steps until
		// half the bound is left waiting. Not every window's: when
		// more messages come in a window's time than the bound holds
		// (BenchmarkWindowCount: 120 000 a minute against about 90 000),
		// every window would take an add more each time; half of them
		// do now, and the rest wait for their window to close.
		left := w.pendingBytes
	keys:
		for key, k := range w.keys {
			for start, a := range k.accs {
				if left <= maxPendingBytes/2 {
					break keys
				}
				if len(a.pending) > 0 && !a.adding {
					id := winID2{key, start}
					if !w.adds[id] {
						w.adds[id] = true
						for _, pm := range a.pending[:min(len(a.pending), maxAdd)] {
							left -= pm.size
						}
					}
				}
			}
		}
	}
	w.release()
	var items []*item
	for id := range w.adds {
		k := w.keys[id.key]
		var a *winAcc
		if k != nil {
			a = k.accs[id.start]
		}
		if a == nil || a.adding || len(a.pending) == 0 {
			delete(w.adds, id)
			continue
		}
		if ws := k.wins[id.start]; ws != nil && ws.inflight {
			// Not while it fires: its fired mark is its accumulator's
			// record (markAcc), which an add's would overtake. Looked at
			// again once answered (dirty).
			delete(w.adds, id)
			continue
		}
		if now.Before(a.retryAt) {
			continue
		}
		delete(w.adds, id)
		items = append(items, w.addItem(id.key, id.start, a, nil))
	}
	return items
}

// release removes the records of the segments whose messages are all in
// their accumulators, and of the forgotten windows no segment left can
// hold a message of.
func (w *windower) release() {
	gone := w.segGone
	w.segGone = nil
	for _, s := range gone {
		s.gone = true
	}
	n := 0
	for n < len(w.segs) && w.segs[n].gone {
		n++
	}
	clear(w.segs[:n])
	w.segs = w.segs[n:]
	oldest := uint64(math.MaxUint64)
	if len(w.segs) > 0 {
		oldest = w.segs[0].seq
	}
	d := 0
	for d < len(w.deferred) && w.deferred[d].seq < oldest {
		d++
	}
	if len(gone) == 0 && d == 0 {
		return
	}
	p := w.p
	// The watermarks first: a restart that finds the records gone finds
	// the watermark that let them go.
	for t, pt := range w.placed.parts {
		if pt.max != math.MinInt64 {
			p.client.PublishAsync(p.hard, w.topic, pool.Message{Key: recWatermark + t, Payload: []byte(strconv.FormatInt(pt.max, 10))},
				func(pulsarwire.MessageID, error) {})
		}
	}
	for _, s := range gone {
		p.client.PublishAsync(p.hard, w.topic, tombstone(s.rec), func(pulsarwire.MessageID, error) {})
	}
	for _, dg := range w.deferred[:d] {
		for _, rec := range dg.recs {
			p.client.PublishAsync(p.hard, w.topic, tombstone(rec), func(pulsarwire.MessageID, error) {})
		}
	}
	clear(w.deferred[:d])
	w.deferred = w.deferred[d:]
}

// addItem makes the item that hands the pending messages of window
// start of key to the handler's add step; with ws (its state, to fire
// now) an add and fire in one (contract version 5: addFireDue).
func (w *windower) addItem(key string, start int64, a *winAcc, ws *winState) *item {
	n := min(len(a.pending), maxAdd)
	msgs := a.pending[:n:n]
	a.pending = a.pending[n:]
	a.adding = true
	wms := make([]*winMsg, n)
	hw := maps.Clone(a.hw)
	if hw == nil {
		hw = map[string]msgPos{}
	}
	// The newest of each run of one topic's messages goes to hw when the
	// run ends: a window's messages are mostly of one topic, and a map
	// write a message showed in BenchmarkWindowCount.
	var last string
	var lastPos msgPos
	run := false
	toHW := func() {
		if cur, ok := hw[last]; run && (!ok || lastPos.after(cur)) {
			hw[last] = lastPos
		}
	}
	for i, pm := range msgs {
		// One pass over the messages, each read once: they are cold by now.
		w.pendingBytes -= pm.size
		wms[i] = pm.wm
		switch t := pm.wm.Topic; {
		case !run || t != last:
			toHW()
			last, lastPos, run = t, pm.pos, true
		case pm.pos.after(lastPos):
			lastPos = pm.pos
		}
	}
	toHW()
	end := start + w.a.size
	fire := 0
	props := map[string]string{
		PropertyWindowStart: strconv.FormatInt(start, 10),
		PropertyWindowEnd:   strconv.FormatInt(end, 10),
		PropertyWindowAdd:   strconv.Itoa(n),
	}
	if ws != nil {
		ws.inflight = true
		fire = ws.fires + 1
		props[PropertyWindowFire] = strconv.Itoa(fire)
	}
	m := &subscribe.Message{
		ID:    pulsarwire.MessageID{Ledger: addLedger, Entry: a.id, Partition: -1, BatchIndex: -1},
		Topic: w.srcTopic, Key: accStateKey(key, start), Properties: props,
		PublishTime: time.UnixMilli(end), EventTime: time.UnixMilli(end - 1),
	}
	base := accRecord{Acc: a.acc, N: a.n, HW: hw}.firedAs(w.keys[key].wins[start])
	wp := &windowPayload{Key: key, Start: start, End: end, Fire: fire, Messages: wms, Add: true, Accumulator: a.acc}
	return &item{m: m, win: &windowFire{key: key, start: start, fire: fire, add: &addCall{msgs: msgs, base: base}, acc: a.acc, wp: wp, sub: w.gen}}
}

// accStateKey is the key an add's message has, under which its
// accumulator goes as keyed state: one per window.
func accStateKey(key string, start int64) string { return strconv.FormatInt(start, 10) + "|" + key }

// windowAddEntries are the accumulators of a batch's adds, sent as the
// keyed state of their messages; nil when the batch has none.
func windowAddEntries(items []*item) []plugin.StateEntry {
	var es []plugin.StateEntry
	for _, it := range items {
		if it.win != nil && it.win.add != nil {
			es = append(es, plugin.StateEntry{Key: it.m.Key, Value: it.win.acc})
		}
	}
	return es
}

// scanKeyIncr is scanKey for accumulators: a window the watermark
// passed has its waiting messages added, then fires; it goes once it is
// past its lateness, its records once no segment left can hold a message
// of it (release).
func (w *windower) scanKeyIncr(key string, k *winKey, wm int64, now time.Time, fires []*item, gone []string) ([]*item, []string) {
	for start, a := range k.accs {
		end := start + w.a.size
		ws := k.wins[start]
		if ws != nil && ws.inflight {
			continue // looked at again once answered (dirty)
		}
		if a.adding {
			continue // looked at again once added (dirty)
		}
		if len(a.pending) > 0 {
			if end <= wm && w.addFireDue(a) {
				if ws == nil {
					w.seq++
					ws = &winState{id: w.seq}
					k.wins[start] = ws
				}
				if now.Before(ws.retryAt) || now.Before(a.retryAt) {
					w.dirty[key] = true
					continue
				}
				delete(w.adds, winID2{key, start})
				fires = append(fires, w.addItem(key, start, a, ws))
			} else if end <= wm {
				w.adds[winID2{key, start}] = true
			} else {
				w.nextCheck = min(w.nextCheck, end)
			}
			continue
		}
		fired := ws != nil && ws.fires > 0
		dirty := fired && ws.n != a.n
		switch {
		case a.n > 0 && end <= wm && (!fired || dirty):
			if ws == nil {
				w.seq++
				ws = &winState{id: w.seq}
				k.wins[start] = ws
			}
			if now.Before(ws.retryAt) {
				w.dirty[key] = true
				continue
			}
			fires = append(fires, w.fireIncr(key, start, a, ws))
		case end+w.a.late <= wm:
			if a.unacked > 0 {
				// An input it counted may come again: it stays until
				// their acknowledgements commit (window_exactly.go).
				continue
			}
			// Fired, or nothing was added (its adds dead-lettered):
			// forgotten. A message for it now is late by its horizon.
			gone = append(gone, accRecordKey(key, start))
			if ws != nil && ws.legacy {
				gone = append(gone, firedRecord(key, start)) // written before fired marks were accumulators'
			}
			delete(k.accs, start)
			if k.last == a {
				k.last = nil
			}
			delete(k.wins, start)
		case !fired && a.n > 0:
			w.nextCheck = min(w.nextCheck, end)
		default:
			w.nextCheck = min(w.nextCheck, end+w.a.late)
		}
	}
	return fires, gone
}

// fireIncr makes the item that hands window start of key, its
// accumulator, to the handler.
func (w *windower) fireIncr(key string, start int64, a *winAcc, ws *winState) *item {
	ws.inflight = true
	fire := ws.fires + 1
	end := start + w.a.size
	wp := &windowPayload{Key: key, Start: start, End: end, Fire: fire, Messages: []*winMsg{}, Accumulator: a.acc}
	m := &subscribe.Message{
		ID:    pulsarwire.MessageID{Ledger: 1 << 62, Entry: ws.id, Partition: -1, BatchIndex: -1},
		Topic: w.srcTopic, Key: key,
		Properties: map[string]string{
			PropertyWindowStart: strconv.FormatInt(start, 10),
			PropertyWindowEnd:   strconv.FormatInt(end, 10),
			PropertyWindowFire:  strconv.Itoa(fire),
		},
		PublishTime: time.UnixMilli(end), EventTime: time.UnixMilli(end - 1),
	}
	// Under exactly_once the fired mark, the accumulator's record, goes
	// in the fire's transaction (settleIn).
	rec := &accRecord{Acc: a.acc, N: a.n, HW: a.hw}
	return &item{m: m, win: &windowFire{key: key, start: start, fire: fire, n: a.n, rec: rec, wp: wp, sub: w.gen}}
}

// restoreAccs puts the accumulators read back in their windows.
func (w *windower) restoreAccs(accs map[string]map[int64]accRecord, now time.Time) {
	for key, rs := range accs {
		k := w.key(key)
		for start, r := range rs {
			a := k.accOf(start, w)
			a.acc, a.n, a.hw = r.Acc, r.N, r.HW
			if r.Fires == 0 {
				continue
			}
			// Fired: its mark is in its record (a fired record f| of
			// before, read too, may say less).
			if ws := k.wins[start]; ws != nil {
				if r.Fires >= ws.fires {
					ws.fires, ws.n = r.Fires, r.FN
				}
				continue
			}
			w.seq++
			k.wins[start] = &winState{fires: r.Fires, n: r.FN, id: w.seq}
		}
	}
}

// parseAcc reads an a|<start>|<key> record.
func parseAcc(k string, v []byte) (key string, start int64, r accRecord, ok bool) {
	startS, key, ok := strings.Cut(k[len(recAcc):], "|")
	if !ok {
		return "", 0, r, false
	}
	start, err := strconv.ParseInt(startS, 10, 64)
	if err != nil || json.Unmarshal(v, &r) != nil {
		return "", 0, r, false
	}
	if r.HW == nil {
		r.HW = map[string]msgPos{}
	}
	return key, start, r, true
}
