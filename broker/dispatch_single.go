package broker

import "github.com/streamrun/streamrun/broker/store"

// singleActive dispatches Exclusive and Failover subscriptions: every
// entry to the one active consumer, in order, nothing while a Failover
// hand-over is under way.
type singleActive struct{}

func (singleActive) budget(s *subscription) int {
	if s.active == nil || s.handover {
		return 0
	}
	return int(max(s.active.permits, 0))
}

// readNew: the replay queue goes first, so that order is kept.
func (singleActive) readNew(_ *subscription, replaying, _ int) bool { return replaying == 0 }

func (singleActive) pick(s *subscription, _ entryInfo, _ map[int32]bool, _ bool) (*consumer, int32, bool) {
	if c := s.active; c != nil && c.permits > 0 && !c.conn.congested() {
		return c, -1, true
	}
	return nil, -1, false
}

func (singleActive) replayInOrder() bool { return true }

func (singleActive) setAside(*subscription, store.Entry, int32) bool { return false }

// delays: as Apache Pulsar, only Shared and Key_Shared hold a message
// until its deliver_at_time.
func (singleActive) delays(entryInfo) (bool, int32) { return false, -1 }

func (singleActive) newRound() map[int32]bool { return nil }

func (singleActive) ordered() bool { return true }
