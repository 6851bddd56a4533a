package broker

import "github.com/streamrun/streamrun/broker/store"

// shared dispatches Shared subscriptions: each entry to one consumer,
// round robin among those of the best priority level (lowest number) that
// have permits; order is not kept.
type shared struct{}

func (shared) budget(s *subscription) int { return sharedBudget(s) }

// readNew: new entries when the permits reach past the replay.
func (shared) readNew(_ *subscription, replaying, budget int) bool { return budget > replaying }

func (shared) pick(s *subscription, _ entryInfo, _ map[int32]bool, _ bool) (*consumer, int32, bool) {
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

func (shared) replayInOrder() bool { return false }

func (shared) setAside(*subscription, store.Entry, int32) bool { return false }

func (shared) delays(entryInfo) (bool, int32) { return true, -1 }

func (shared) newRound() map[int32]bool { return nil }

func (shared) ordered() bool { return false }
