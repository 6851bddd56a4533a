package broker

import (
	"github.com/streamrun/streamrun/broker/store"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// A dispatcher is what differs between the kinds of subscription when
// entries go out: which consumers may take messages now and how many, who
// takes an entry, and what happens to an entry no one can take yet. One
// file per kind: dispatch_single.go (Exclusive and Failover: one active
// consumer, order kept), dispatch_shared.go (round robin by priority) and
// dispatch_keyshared.go (each key's hash to one consumer, order kept per
// key). dispatch.go runs the rounds that call them. Every method runs with
// s.mu held; the state they read (the active consumer, the round-robin
// position, the Key_Shared selector and hash owners) is the
// subscription's, guarded by s.mu.
type dispatcher interface {
	// budget is how many messages the consumers that may take one can
	// take now.
	budget(s *subscription) int
	// readNew says whether a round reads entries past readPos, with
	// replaying entries from the replay queue in it and budget permits.
	readNew(s *subscription, replaying, budget int) bool
	// pick chooses the consumer of an entry, and its Key_Shared hash (-1
	// otherwise); false when no one can take it now. fromReplay: the entry
	// comes from the replay queue. blocked holds the hashes held back in
	// this round (Key_Shared; nil otherwise), so that a hash keeps its order.
	pick(s *subscription, info entryInfo, blocked map[int32]bool, fromReplay bool) (*consumer, int32, bool)
	// replayInOrder says whether a replay entry no one can take ends the
	// replay part of the round, so that none after it overtakes it.
	replayInOrder() bool
	// setAside handles a new entry no one can take now: true when it was
	// put aside (in the replay queue) and the round goes on with the next
	// entries, false when the round stops there.
	setAside(s *subscription, e store.Entry, hash int32) bool
	// delays says whether an entry waits until its deliver_at_time, and
	// with which hash it is kept meanwhile.
	delays(info entryInfo) (bool, int32)
	// newRound returns the blocked set of a round (nil when the kind has
	// none).
	newRound() map[int32]bool
	// ordered says whether the kind keeps the topic's order for its one
	// active consumer: only then is a cumulative ack allowed, and, as
	// Apache Pulsar, a redelivery is not counted.
	ordered() bool
}

// dispatcherOf is the dispatcher of a subscription of type typ.
func dispatcherOf(typ pb.CommandSubscribe_SubType) dispatcher {
	switch typ {
	case pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover:
		return singleActive{}
	case pb.CommandSubscribe_Key_Shared:
		return keyShared{}
	}
	return shared{}
}

// maxUnackedPerConsumer is how many unacknowledged messages a Shared or
// Key_Shared consumer may hold before the broker stops sending it more
// (Apache Pulsar's maxUnackedMessagesPerConsumer): a client that grants
// permits but never acknowledges cannot grow the broker's memory.
const maxUnackedPerConsumer = 50000

// sharedBudget is the permits of the consumers below the unacked limit
// (Shared and Key_Shared).
func sharedBudget(s *subscription) int {
	var n int64
	for _, c := range s.consumers {
		if c.unacked.Load() < maxUnackedPerConsumer {
			n += max(c.permits, 0)
		}
	}
	return int(n)
}
