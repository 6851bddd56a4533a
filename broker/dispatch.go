package broker

import (
	"errors"
	"time"

	"github.com/streamrun/streamrun/broker/store"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// dispatchOnce sends what the consumers have permits for: first the replay
// queue (in id order), then new entries. It reads from the store without
// holding the lock and drops what it read if a reset happened meanwhile.
// It reports whether it made progress (and should be called again).
func (s *subscription) dispatchOnce() bool {
	s.mu.Lock()
	if s.deleted || len(s.consumers) == 0 {
		s.mu.Unlock()
		return false
	}
	budget := s.permitBudget()
	if budget <= 0 {
		s.mu.Unlock()
		return false
	}
	epoch := s.epoch
	replayIDs := s.replay.first(min(budget, maxReadEntries))
	from := s.readPos
	next := s.t.log.Next()
	readNew := from < next
	switch s.typ {
	case pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover:
		readNew = readNew && len(replayIDs) == 0 // order: the replay goes first
	case pb.CommandSubscribe_Key_Shared:
		readNew = readNew && s.replay.len() < maxReplay
	default:
		readNew = readNew && budget > len(replayIDs)
	}
	// Read as many entries as the permits will take (entries hold
	// avgMsgs messages on average), not a fixed amount: a batch-heavy
	// topic would otherwise read far more than it sends.
	n := min(int(float64(max(budget-len(replayIDs), 1))/s.avgMsgs)+1, maxReadEntries)
	var fresh []store.Entry
	if readNew && len(s.ahead) > 0 && s.aheadEpoch == epoch && s.ahead[0].ID == from {
		fresh, readNew = s.ahead, false // what the last round read and did not send
	}
	s.ahead = nil
	s.mu.Unlock()

	var replayed []store.Entry
	var missing []uint64
	for _, id := range replayIDs {
		es, err := s.t.log.Read(id, 1, maxReadBytes)
		if err != nil {
			return s.readFailed(err)
		}
		if len(es) == 0 || es[0].ID != id {
			missing = append(missing, id) // trimmed
			continue
		}
		replayed = append(replayed, es[0])
	}
	if readNew {
		var err error
		fresh, err = s.t.log.Read(from, n, maxReadBytes)
		if err != nil {
			return s.readFailed(err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.readErrs = 0
	if s.deleted {
		return false
	}
	if s.epoch != epoch {
		return true
	}
	for _, id := range missing {
		s.removeReplay(id)
	}
	progress := len(missing) > 0
	var blocked map[int32]bool // Key_Shared: hashes held back this round, to keep their order
	if s.typ == pb.CommandSubscribe_Key_Shared {
		blocked = map[int32]bool{}
	}
	for _, e := range replayed {
		if !s.replay.contains(e.ID) {
			continue
		}
		if e.ID < s.markDelete || s.acked.contains(e.ID) {
			s.removeReplay(e.ID)
			continue
		}
		info := entryOf(e)
		c, hash, ok := s.pick(info, blocked, true)
		if !ok {
			if s.typ == pb.CommandSubscribe_Exclusive || s.typ == pb.CommandSubscribe_Failover {
				break
			}
			continue
		}
		s.removeReplay(e.ID)
		s.deliver(c, e, info, hash)
		progress = true
	}
	if s.readPos != from {
		return true // moved by an ack or reset meanwhile; read again
	}
	for i, e := range fresh {
		if e.ID < s.readPos {
			continue
		}
		if e.ID < s.markDelete || s.acked.contains(e.ID) {
			s.readPos = e.ID + 1
			progress = true
			continue
		}
		if _, inFlight := s.pending[e.ID]; inFlight {
			s.readPos = e.ID + 1
			continue
		}
		info := entryOf(e)
		if info.deliverAt > 0 && (s.typ == pb.CommandSubscribe_Shared || s.typ == pb.CommandSubscribe_Key_Shared) {
			// Delayed delivery, as Apache Pulsar: only Shared and
			// Key_Shared hold a message until its deliver_at_time.
			if now := time.Now().UnixMilli(); info.deliverAt > now {
				h := int32(-1)
				if s.typ == pb.CommandSubscribe_Key_Shared {
					h = stickyKeyHash(info.key)
				}
				s.delayed[e.ID] = delayedEntry{at: info.deliverAt, hash: h}
				s.readPos = e.ID + 1
				progress = true
				continue
			}
		}
		c, hash, ok := s.pick(info, blocked, false)
		if !ok {
			if s.typ == pb.CommandSubscribe_Key_Shared && s.permitBudget() > 0 && s.replay.len() < maxReplay {
				// Its key's consumer is busy or still draining: set it
				// aside and keep going for the other keys.
				s.addReplay(e.ID, hash)
				s.readPos = e.ID + 1
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

// maxUnackedPerConsumer is how many unacknowledged messages a Shared or
// Key_Shared consumer may hold before the broker stops sending it more
// (Apache Pulsar's maxUnackedMessagesPerConsumer): a client that grants
// permits but never acknowledges cannot grow the broker's memory.
const maxUnackedPerConsumer = 50000

// permitBudget is how many messages the eligible consumers may take; s.mu held.
func (s *subscription) permitBudget() int {
	switch s.typ {
	case pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover:
		if s.active == nil || s.handover {
			return 0
		}
		return int(max(s.active.permits, 0))
	}
	var n int64
	for _, c := range s.consumers {
		if c.unacked.Load() < maxUnackedPerConsumer {
			n += max(c.permits, 0)
		}
	}
	return int(n)
}

// pick chooses the consumer for an entry (fromReplay: it comes from the
// replay queue); s.mu held.
func (s *subscription) pick(info entryInfo, blocked map[int32]bool, fromReplay bool) (*consumer, int32, bool) {
	switch s.typ {
	case pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover:
		if c := s.active; c != nil && c.permits > 0 && !c.conn.congested() {
			return c, -1, true
		}
		return nil, -1, false
	case pb.CommandSubscribe_Key_Shared:
		h := stickyKeyHash(info.key)
		// A hash with entries waiting in the replay queue keeps its order:
		// newer entries wait behind them.
		if blocked[h] || !fromReplay && s.hashReplays[h] > 0 {
			blocked[h] = true
			return nil, h, false
		}
		c := s.selector.pick(h)
		ok := c != nil && c.permits > 0 && c.unacked.Load() < maxUnackedPerConsumer && !c.conn.congested()
		if ok {
			// Draining (PIP-379): a hash whose entries another consumer
			// still holds unacked waits until they are acknowledged, so
			// a key never has messages at two consumers at once.
			if o := s.owners[h]; o != nil && o.c != c {
				ok = false
			}
		}
		if !ok {
			blocked[h] = true
			return nil, h, false
		}
		return c, h, true
	}
	// Shared: round robin among the consumers of the best priority level
	// (lowest number) that have permits.
	best := int32(1<<31 - 1)
	for _, c := range s.consumers {
		if c.permits > 0 && c.priority < best && c.unacked.Load() < maxUnackedPerConsumer {
			best = c.priority
		}
	}
	n := len(s.consumers)
	for i := 0; i < n; i++ {
		c := s.consumers[(s.rr+i)%n]
		if c.permits > 0 && c.priority == best && c.unacked.Load() < maxUnackedPerConsumer && !c.conn.congested() {
			s.rr = (s.rr + i + 1) % n
			return c, -1, true
		}
	}
	return nil, -1, false
}

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
		*b = appendMessage(*b, c.id, s.t.ledger, e.ID, s.t.partition, s.redeliveries[e.ID], s.batchAcks[e.ID], c.epoch, c.hasEpoch, e.Data)
		c.conn.done()
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
