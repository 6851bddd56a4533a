package runtime

import (
	"strconv"

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
	mark := firedMark{fires: f.fire, n: f.n}
	ms := []pool.Message{{Key: firedRecord(f.key, f.start), Payload: []byte(mark.String()), Txn: txn}}
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
