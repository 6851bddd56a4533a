package runtime

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// Windows under guarantee exactly_once (docs/pipelines.md, "Windows").
//
// A message's contribution (messages mode: its record m|<topic>|<id>;
// incremental: the accumulator it was added to, with the partition's
// newest message added) is written to the changelog before its input is
// acknowledged, as at least once, and is idempotent: a message whose
// record is in hand, or that an accumulator's high-water mark already
// covers, is not taken again. So its acknowledgement may go into any
// transaction after: if that aborts, the message comes again and only
// its acknowledgement is made again.
//
// What must not happen twice is a fire. Its outputs (or its dead
// letter) and its fired record f|<start>|<key> (with the removal of the
// sessions it took in) go into one transaction, the settlement of an
// item that has no input to acknowledge (settleIn). The windows learn
// that it fired only when that commits; when it aborts, it fires again.
// When a commit's outcome is unknown, or the consumer subscribed again
// (another host may have fired the same windows meanwhile), every
// transaction aborts until the windows are read back from the
// changelog, read committed, and what was handed out before is let go
// (lapsed): its fire is made again from what is read back.
//
// After an abort the consumer asks for every unacknowledged message
// again, and those in hand are superseded: a join hands them back
// unacknowledged. A copy that comes while its original's record is
// being written is kept (copies) to be acknowledged in its place.

// lapsed says whether f was made before the windows were last read back
// (or the consumer has subscribed again since): it must not settle.
func (w *windower) lapsed(f *windowFire) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stale(f.sub)
}

// lapsedIn says whether e holds a fire made before the windows were last
// read back (or since which the consumer subscribed again): e must not
// commit. The commit loop asks it with the gate held, so e holds all it
// will.
func (w *windower) lapsedIn(e *epoch) bool {
	var fires []*windowFire
	e.mu.Lock()
	for _, s := range e.settles {
		if f := s.it.win; f != nil && f.add == nil {
			fires = append(fires, f)
		}
	}
	e.mu.Unlock()
	for _, f := range fires {
		if w.lapsed(f) {
			return true
		}
	}
	return false
}

// resubscribed says whether the consumer subscribed again since the
// windows were last read back.
func (w *windower) resubscribed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.p.cons.Resubscribed() != w.sub
}

// settleIn puts what a window's item records in the changelog into its
// transaction txn, beside its outputs: for a fire, its fired record and
// the removal of the fired sessions it took in. An add's accumulator is
// written when it is answered (addAnswered).
func (w *windower) settleIn(it *item, txn *pool.Transaction) {
	f := it.win
	if f.add != nil {
		return
	}
	p := w.p
	var ms []pool.Message
	if f.rec != nil {
		// Incremental: the mark is the accumulator's record.
		rec := *f.rec
		rec.Fires, rec.FN = f.fire, f.n
		ms = append(ms, pool.Message{Key: accRecordKey(f.key, f.start), Payload: appendAccRecord(nil, &rec), Txn: txn})
	} else {
		mark := firedMark{fires: f.fire, n: f.n}
		ms = append(ms, pool.Message{Key: firedRecord(f.key, f.start), Payload: []byte(mark.String()), Txn: txn})
	}
	for _, r := range f.replaces {
		ms = append(ms, pool.Message{Key: firedRecord(f.key, r), Txn: txn})
	}
	e := it.ep
	for _, m := range ms {
		p.client.PublishAsync(p.hard, w.topic, m, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				e.fail(err)
				p.log.Warn("windows: a fire's record could not be written to the changelog; the transaction aborts", "window", f.key, "start", f.start, "err", err)
			}
		})
	}
}

// keepCopy keeps m, a copy of a message whose record is being written,
// to be acknowledged in its place (exactly_once only: a transaction
// takes no superseded message).
func (w *windower) keepCopy(rec heldKey, m *subscribe.Message) {
	if w.p.eo == nil {
		return
	}
	if w.copies == nil {
		w.copies = map[heldKey]*subscribe.Message{}
	}
	w.copies[rec] = m
}

// latest is the newest copy of m (record rec) to acknowledge: m, or the
// copy keepCopy kept.
func (w *windower) latest(rec heldKey, m *subscribe.Message) *subscribe.Message {
	if len(w.copies) == 0 {
		return m
	}
	if c := w.copies[rec]; c != nil {
		delete(w.copies, rec)
		return c
	}
	return m
}

// lateTxn sends it, late, to the late topic in its transaction with its
// acknowledgement, so that an abort takes both back.
func (w *windower) lateTxn(it *item, wm int64) {
	p := w.p
	c := p.eo
	c.gate.RLock()
	defer c.gate.RUnlock()
	if !c.join([]*item{it}) {
		return
	}
	m := subscribe.DeadLetter(it.m, map[string]string{PropertyLate: strconv.FormatInt(wm, 10)})
	e := it.ep
	m.Txn = e.txn
	p.client.PublishAsync(p.hard, w.cfg.LateTopic, m, func(_ pulsarwire.MessageID, err error) {
		if err != nil {
			e.fail(err)
			p.log.Warn("windows: publishing to the late topic failed; the transaction aborts", "id", it.id(), "topic", w.cfg.LateTopic, "err", err)
		}
	})
	p.ack(it, Dropped, "late")
}

// An input counted in windows whose acknowledgement is in a transaction
// that aborts comes again, maybe once the watermark has passed those
// windows' end and lateness: it must be known then for counted, not
// taken for late (the campaign's eo-window: inputs both in their
// window's fire and in the late topic, docs/reliability.md). So until
// its acknowledgement commits (acksCommitted), its windows are not
// forgotten: a message kept in hand, or an accumulator whose newest ids
// cover it (addedBefore), tells the copy for what it is, and the copy's
// acknowledgement is made again.

// unackedIn is where an input whose acknowledgement has not committed
// counts: its message (messages mode), or key's accumulators at starts
// (incremental).
type unackedIn struct {
	msg    *winMsg
	key    string
	starts []int64
}

// counted notes that the input hk counts in in, its acknowledgement to
// commit (exactly_once only).
func (w *windower) counted(hk heldKey, in unackedIn) {
	if w.p.eo == nil {
		return
	}
	if _, ok := w.unacked[hk]; ok {
		return // its windows wait already
	}
	if w.unacked == nil {
		w.unacked = map[heldKey]unackedIn{}
	}
	w.unacked[hk] = in
	if in.msg != nil {
		in.msg.unacked = true
		return
	}
	if k := w.keys[in.key]; k != nil {
		for _, s := range in.starts {
			if a := k.accs[s]; a != nil {
				a.unacked++
			}
		}
	}
}

// acksCommitted is told by the commit of settles (exactly_once) which
// inputs' acknowledgements committed.
func (w *windower) acksCommitted(settles []settlement) {
	var hks []heldKey
	for _, s := range settles {
		if s.it.win != nil || s.it.m == nil {
			continue
		}
		wm := winMsg{Topic: s.it.m.Topic}
		wm.setID(s.it.m.ID)
		hks = append(hks, wm.held())
	}
	if len(hks) == 0 {
		return
	}
	w.mu.Lock()
	w.acksDone = append(w.acksDone, hks...)
	w.mu.Unlock()
	w.kick()
}

// What was read back from the changelog (a message in hand, an
// accumulator's newest ids, a segment's message added) may be of an
// input whose acknowledgement had not committed when the consumer
// subscribed again: it comes again, maybe only after the first scan
// would have forgotten its window. A pin keeps its window until the
// subscription's mark-delete position on its partition is at or past
// it: then it is acknowledged for good. Not the first acknowledgement
// at or after it that commits: an input the other host acknowledged in
// a transaction still open is held by the broker, neither acknowledged
// nor given to this host, until that transaction times out, and then it
// comes after the later messages (the campaign's eo-window on Apache
// Pulsar: inputs both in their window's fire and in the late topic after
// a host kill -9). The positions are asked for every pinLookEvery while
// there are pins, so a pin of a partition that receives nothing more
// goes too.
type pin struct {
	pos   msgPos
	msg   *winMsg // messages mode
	key   string  // incremental: key's accumulator at start
	start int64
}

// pinRestored pins the messages and accumulators read back
// (exactly_once only).
func (w *windower) pinRestored(msgs []*winMsg, accs map[string]map[int64]accRecord) {
	if w.p.eo == nil {
		return
	}
	for _, m := range msgs {
		if hk := m.held(); hk.raw == "" {
			m.unacked = true
			w.addPin(m.Topic, pin{pos: posOf(hk.id), msg: m})
		}
	}
	for key, rs := range accs {
		for start, r := range rs {
			for t, pos := range r.HW {
				w.pinAcc(t, pos, key, start)
			}
		}
	}
}

// pinAcc pins key's accumulator at start until an acknowledgement of
// topic at or after pos commits (exactly_once only).
func (w *windower) pinAcc(topic string, pos msgPos, key string, start int64) {
	if w.p.eo == nil {
		return
	}
	k := w.keys[key]
	if k == nil || k.accs[start] == nil {
		return
	}
	k.accs[start].unacked++
	w.addPin(topic, pin{pos: pos, key: key, start: start})
}

func (w *windower) addPin(topic string, p pin) {
	if w.pins == nil {
		w.pins = map[string][]pin{}
	}
	w.pins[topic] = append(w.pins[topic], p)
}

// pinLookEvery is how often the mark-delete positions of the partitions
// with pins are asked for; pinLookTimeout bounds one look.
const (
	pinLookEvery   = 500 * time.Millisecond
	pinLookTimeout = 10 * time.Second
)

// unpinMarked lets go the pins at or before the mark-delete positions
// marks (nil: no look ended), and starts the next look when it is time.
// On the receive goroutine.
func (w *windower) unpinMarked(marks map[string]msgPos, now time.Time) {
	if marks != nil {
		w.pinLook = false
		for topic, md := range marks {
			w.unpin(topic, md)
		}
	}
	if len(w.pins) == 0 || w.pinLook || now.Before(w.pinNext) {
		return
	}
	w.pinLook, w.pinNext = true, now.Add(pinLookEvery)
	topics := slices.Collect(maps.Keys(w.pins))
	p := w.p
	ctx := p.recvCtx
	w.pinLooks.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, pinLookTimeout)
		defer cancel()
		marks := make(map[string]msgPos, len(topics))
		for _, t := range topics {
			id, ok, err := p.cons.MarkDeleted(ctx, t)
			if err != nil {
				p.log.Debug("windows: the mark-delete position could not be had; the windows read back stay", "topic", t, "err", err)
				continue
			}
			if ok {
				marks[t] = posOf(id)
			}
		}
		w.mu.Lock()
		w.pinMarks = marks
		w.mu.Unlock()
		w.kick()
	})
}

// unpin lets go the pins of topic at or before md, the mark-delete
// position of the subscription there (an entry: every message of it is
// acknowledged).
func (w *windower) unpin(topic string, md msgPos) {
	ps := w.pins[topic]
	kept := ps[:0]
	for _, p := range ps {
		if p.pos[0] > md[0] || p.pos[0] == md[0] && p.pos[1] > md[1] {
			kept = append(kept, p)
			continue
		}
		if p.msg != nil {
			w.letCount(unackedIn{msg: p.msg})
		} else {
			w.letCount(unackedIn{key: p.key, starts: []int64{p.start}})
		}
	}
	clear(ps[len(kept):])
	if len(kept) == 0 {
		delete(w.pins, topic)
		return
	}
	w.pins[topic] = kept
}

// releaseAcked lets the windows of the inputs whose acknowledgements
// committed be forgotten once due. On the receive goroutine.
func (w *windower) releaseAcked(hks []heldKey) {
	for _, hk := range hks {
		in, ok := w.unacked[hk]
		if !ok {
			continue
		}
		delete(w.unacked, hk)
		w.letCount(in)
	}
}

// letCount lets in's windows be forgotten once due, as far as in goes.
func (w *windower) letCount(in unackedIn) {
	if in.msg != nil {
		in.msg.unacked = false
		if w.freed == nil {
			w.freed = map[string]bool{}
		}
		w.freed[in.msg.Key] = true
		w.dirty[in.msg.Key] = true
		return
	}
	if k := w.keys[in.key]; k != nil {
		for _, s := range in.starts {
			if a := k.accs[s]; a != nil && a.unacked > 0 {
				a.unacked--
			}
		}
		w.dirty[in.key] = true
	}
}

// addedBefore says whether wm, of m and late by the watermark, is a
// copy of an input an accumulator of its windows already counts
// (incremental, exactly_once): its acknowledgement is made again, and
// it goes neither to the late topic nor into a window.
func (w *windower) addedBefore(wm *winMsg, m *subscribe.Message) bool {
	if w.p.eo == nil || !w.incr {
		return false
	}
	k := w.keys[wm.Key]
	if k == nil {
		return false
	}
	pos := posOf(m.ID)
	for _, s := range w.a.starts(wm.Time) {
		if a := k.accs[s]; a != nil {
			if hw, ok := a.hw[wm.Topic]; ok && !pos.after(hw) {
				return true
			}
		}
	}
	return false
}
