package broker

import (
	"errors"
	"time"

	"github.com/streamrun/streamrun/broker/store"
)

// A dispatch round sends what the consumers have permits for: first the
// replay queue (in id order), then new entries. It plans under s.mu, reads
// from the store without it, and sends under it again, dropping what it
// read if a reset happened meanwhile. What differs by subscription kind is
// the dispatcher's (dispatcher.go).

// roundPlan is what a round decided under the lock before reading.
type roundPlan struct {
	d         dispatcher
	epoch     uint64
	replayIDs []uint64
	from      uint64 // readPos when planned
	readNew   bool
	n         int           // new entries to read
	fresh     []store.Entry // new entries already read by an earlier round
	prefetch  bool          // no permits: only read ahead (see prefetchPlan)
}

// roundRead is what a round read from the store.
type roundRead struct {
	replayed []store.Entry
	missing  []uint64 // replay ids no longer in the log (trimmed)
	fresh    []store.Entry
}

// dispatchOnce runs one round. It reports whether it made progress (and
// should be called again).
func (s *subscription) dispatchOnce() bool {
	p, ok := s.planRound()
	if !ok {
		return false
	}
	r, err := s.readRound(p)
	if err != nil {
		return s.readFailed(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readErrs = 0
	if s.deleted {
		return false
	}
	if p.prefetch {
		if s.epoch == p.epoch && s.readPos == p.from && len(s.ahead) == 0 && len(r.fresh) > 0 {
			s.ahead, s.aheadEpoch = r.fresh, p.epoch
		}
		return false // a FLOW sends them (sendAhead) or wakes the next round
	}
	if s.epoch != p.epoch {
		return true
	}
	blocked := p.d.newRound()
	progress := s.sendReplayed(p.d, r, blocked)
	if s.readPos != p.from {
		return true // moved by an ack or reset meanwhile; read again
	}
	return s.sendFresh(p.d, r.fresh, blocked) || progress
}

// planRound decides what a round reads; false when there is nothing to
// send to (no consumers, or no permits).
func (s *subscription) planRound() (roundPlan, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted || len(s.consumers) == 0 {
		return roundPlan{}, false
	}
	d := dispatcherOf(s.typ)
	budget := d.budget(s)
	if budget <= 0 {
		return s.prefetchPlan(d)
	}
	p := roundPlan{d: d, epoch: s.epoch, from: s.readPos}
	p.replayIDs = s.replay.first(min(budget, maxReadEntries))
	end := s.t.readEnd()
	p.readNew = p.from < end && d.readNew(s, len(p.replayIDs), budget)
	// Read as many entries as the permits will take (entries hold
	// avgMsgs messages on average), and what the next FLOW will (kept in
	// s.ahead), not a fixed amount: a batch-heavy topic would otherwise
	// read far more than it sends.
	p.n = min(int(float64(int64(max(budget-len(p.replayIDs), 1))+s.lastFlow)/s.avgMsgs)+1, maxReadEntries)
	if p.readNew {
		// Not past an open transaction's first entry.
		p.n = int(min(uint64(p.n), end-p.from))
	}
	if p.readNew && len(s.ahead) > 0 && s.aheadEpoch == p.epoch && s.ahead[0].ID == p.from {
		p.fresh, p.readNew = s.ahead, false // what the last round read and did not send
	}
	s.ahead = nil
	return p, true
}

// prefetchPlan plans, when the permits have run out, to read the entries
// the next FLOW will take, so that it finds them in s.ahead and sendAhead
// answers it at once. A consumer that refills its permits only when half
// of them are spent (the Java client, pulsar-perf) is otherwise idle for
// every FLOW's round trip plus a read; with batches as big as its window
// that is once per entry. Only with an empty replay queue (it goes
// first) and after the consumers have sent a FLOW; s.mu held.
func (s *subscription) prefetchPlan(d dispatcher) (roundPlan, bool) {
	end := s.t.readEnd()
	if s.lastFlow <= 0 || s.replay.len() > 0 || s.readPos >= end ||
		(len(s.ahead) > 0 && s.aheadEpoch == s.epoch && s.ahead[0].ID == s.readPos) {
		return roundPlan{}, false
	}
	s.ahead = nil
	n := int(min(uint64(min(int(float64(prefetchFlows*s.lastFlow)/s.avgMsgs)+1, maxReadEntries)), end-s.readPos))
	return roundPlan{d: d, epoch: s.epoch, from: s.readPos, readNew: true, n: n, prefetch: true}, true
}

// prefetchFlows is how many FLOWs' worth prefetchPlan reads (up to
// maxReadEntries and maxReadBytes, which bound every round's read): one
// read, and one wake-up of the run goroutine, for many FLOWs. A drain of
// 100-byte messages in batches of 1000 by a consumer with a window of
// 1000 cost the broker 0.095 s a million with two FLOWs' worth, 0.085
// with eight, 0.077 with this (docs/benchmarks/design.md, "Entries written from
// where they were read, and read further ahead").
const prefetchFlows = 32

// sendAhead sends the entries read ahead right away, on the goroutine that
// granted permits, instead of waking the run goroutine to do it; s.mu
// held. Entries in s.ahead stay valid while it is set: the run goroutine
// clears it under s.mu before it reads into readBuf again. It reports
// whether the run goroutine has work: false only when entries read ahead
// are left and the permits are spent, so that a FLOW costs no wake-up of
// a goroutine that would find nothing to do.
func (s *subscription) sendAhead() bool {
	if s.deleted || len(s.ahead) == 0 || s.aheadEpoch != s.epoch || s.ahead[0].ID != s.readPos || s.replay.len() > 0 {
		return true
	}
	d := dispatcherOf(s.typ)
	if d.budget(s) <= 0 {
		return false
	}
	ahead := s.ahead
	s.ahead = nil
	delayed := len(s.delayed)
	s.sendFresh(d, ahead, d.newRound())
	// A held entry needs the run goroutine's timer (nextDue).
	return len(s.ahead) == 0 || d.budget(s) > 0 || len(s.delayed) != delayed
}

// readRound reads the round's entries from the store, without s.mu. Only
// the run goroutine calls it, so it owns readBuf and readEnts.
func (s *subscription) readRound(p roundPlan) (roundRead, error) {
	r := roundRead{fresh: p.fresh}
	for _, id := range p.replayIDs {
		es, err := s.t.log.Read(id, 1, maxReadBytes)
		if err != nil {
			return r, err
		}
		if len(es) == 0 || es[0].ID != id {
			r.missing = append(r.missing, id)
			continue
		}
		r.replayed = append(r.replayed, es[0])
	}
	if p.readNew && s.readCompacted.Load() {
		es, ok, err := s.t.compactedFrom(p.from, p.n)
		if err != nil {
			return r, err
		}
		if ok {
			r.fresh = es
			return r, nil
		}
	}
	if p.readNew {
		var err error
		if r.fresh, err = s.t.log.ReadInto(s.readEnts[:0], &s.readBuf, p.from, p.n, maxReadBytes); err != nil {
			return r, err
		}
		s.readEnts = r.fresh
	}
	return r, nil
}

// sendReplayed sends the replay entries read, to whoever may take them
// now; s.mu held.
func (s *subscription) sendReplayed(d dispatcher, r roundRead, blocked map[int32]bool) bool {
	for _, id := range r.missing {
		s.unqueue(id)
	}
	progress := len(r.missing) > 0
	for _, e := range r.replayed {
		if !s.replay.contains(e.ID) {
			continue
		}
		if s.isAcked(e.ID) || s.txnHeld(e.ID) {
			s.unqueue(e.ID)
			continue
		}
		info := entryOf(e)
		c, hash, ok := d.pick(s, info, blocked, true)
		if !ok {
			if d.replayInOrder() {
				break
			}
			continue
		}
		s.unqueue(e.ID)
		s.deliver(c, e, info, hash)
		progress = true
	}
	return progress
}

// sendFresh sends the new entries read, in order, until one cannot go;
// s.mu held.
func (s *subscription) sendFresh(d dispatcher, fresh []store.Entry, blocked map[int32]bool) bool {
	progress := false
	for i, e := range fresh {
		switch {
		case e.ID < s.readPos:
			continue
		case s.isAcked(e.ID):
			s.readPos = e.ID + 1
			progress = true
			continue
		}
		if _, inFlight := s.pending[e.ID]; inFlight || s.txnHeld(e.ID) {
			s.readPos = e.ID + 1
			continue
		}
		info := entryOf(e)
		if s.t.txns.hidden(info) {
			// A transaction's marker, or an entry of an aborted one:
			// never dispatched, acknowledged at once (as Apache Pulsar).
			s.readPos = e.ID + 1
			s.ackEntry(e.ID)
			progress = true
			continue
		}
		if s.delay(d, e, info) {
			progress = true
			continue
		}
		c, hash, ok := d.pick(s, info, blocked, false)
		if !ok {
			if d.setAside(s, e, hash) {
				progress = true
				continue
			}
			// Keep the rest for the next round, not to read it again.
			s.ahead, s.aheadEpoch = fresh[i:], s.epoch
			break
		}
		s.readPos = e.ID + 1
		s.deliver(c, e, info, hash)
		progress = true
	}
	return progress
}

// delay holds an entry until its deliver_at_time when the kind delays
// (Shared and Key_Shared, as Apache Pulsar); true when it was held; s.mu
// held.
func (s *subscription) delay(d dispatcher, e store.Entry, info entryInfo) bool {
	if info.deliverAt <= 0 || info.deliverAt <= time.Now().UnixMilli() {
		return false
	}
	delays, h := d.delays(info)
	if !delays {
		return false
	}
	s.delayed[e.ID] = delayedEntry{at: info.deliverAt, hash: h}
	s.readPos = e.ID + 1
	return true
}

func (s *subscription) readFailed(err error) bool {
	if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrDeleted) {
		return false
	}
	s.mu.Lock()
	s.readErrs++
	n := s.readErrs
	s.mu.Unlock()
	if n == 1 || n%1000 == 0 {
		s.t.c.log.Error("reading entries for dispatch failed", "topic", s.t.name, "subscription", s.name, "err", err, "times", n)
	}
	return false
}

// permitBudget is how many messages the eligible consumers may take; s.mu held.
func (s *subscription) permitBudget() int { return dispatcherOf(s.typ).budget(s) }

// deliver sends one entry to a consumer; s.mu held.
func (s *subscription) deliver(c *consumer, e store.Entry, info entryInfo, hash int32) {
	msgs := info.numMessages
	s.avgMsgs += (float64(msgs) - s.avgMsgs) / 16
	s.pending[e.ID] = pendingEntry{c: c, msgs: msgs, hash: hash}
	if hash >= 0 {
		o := s.owners[hash]
		if o == nil {
			o = &hashOwner{c: c}
			s.owners[hash] = o
		}
		o.n++
	}
	c.permits -= int64(msgs)
	c.unacked.Add(int64(msgs))
	c.msgsOut.Add(int64(msgs))
	c.bytesOut.Add(int64(len(e.Data)))
	s.countOut(msgs, len(e.Data))
	if b := c.conn.out(); b != nil {
		*b = appendMessageHead(*b, c.id, s.t.ledger, e.ID, s.t.partition, s.redeliveries[e.ID], s.batchAcks[e.ID], c.epoch, c.hasEpoch, len(e.Data))
		c.conn.doneWith(e.Data)
	}
}

// entryOf reads what dispatch needs of an entry; an entry that is not a
// message (it cannot be: SEND checked it) counts as one message without
// a key.
func entryOf(e store.Entry) entryInfo {
	info, err := scanEntry(e.Data)
	if err != nil {
		return entryInfo{numMessages: 1, key: noneKey}
	}
	return info
}
