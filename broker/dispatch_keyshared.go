package broker

import "github.com/streamrun/streamrun/broker/store"

// keyShared dispatches Key_Shared subscriptions: each entry to the
// consumer its sticky key's hash belongs to (dispatch_selectors.go), order kept
// per hash. An entry whose consumer is busy, or still draining the hash
// from another consumer, is set aside in the replay queue and the round
// goes on with the other keys; newer entries of its hash wait behind it.
type keyShared struct{}

func (keyShared) budget(s *subscription) int { return sharedBudget(s) }

// readNew: new entries while the replay queue has room to set aside.
func (keyShared) readNew(s *subscription, _, _ int) bool { return s.replay.len() < maxReplay }

func (keyShared) pick(s *subscription, info entryInfo, blocked map[int32]bool, fromReplay bool) (*consumer, int32, bool) {
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
		// still holds unacked waits until they are acknowledged, so a
		// key never has messages at two consumers at once.
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

func (keyShared) replayInOrder() bool { return false }

func (keyShared) setAside(s *subscription, e store.Entry, hash int32) bool {
	if s.permitBudget() <= 0 || s.replay.len() >= maxReplay {
		return false
	}
	s.addReplay(e.ID, hash)
	s.readPos = e.ID + 1
	return true
}

func (keyShared) delays(info entryInfo) (bool, int32) { return true, stickyKeyHash(info.key) }

func (keyShared) newRound() map[int32]bool { return map[int32]bool{} }

func (keyShared) ordered() bool { return false }
