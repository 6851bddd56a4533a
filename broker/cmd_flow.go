package broker

import (
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// handleFlow grants a consumer more permits: the broker sends an entry only
// while its consumer has permits, and each entry spends as many as it
// holds messages.
func (cn *conn) handleFlow(m *pb.CommandFlow) {
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.log.Debug("FLOW for an unknown consumer", "consumer_id", m.GetConsumerId())
		return
	}
	s := c.sub
	// Entries sent from s.ahead go out on this goroutine (conn.holdOutput).
	cn.holdOutput()
	defer cn.flushHeld()
	s.mu.Lock()
	c.permits += int64(m.GetMessagePermits())
	s.lastFlow = int64(m.GetMessagePermits())
	wake := s.sendAhead()
	s.mu.Unlock()
	if wake {
		s.wakeup()
	}
}

// handleRedeliver sends unacknowledged messages again: the ones named, or
// all of the consumer's (always all on Exclusive and Failover). On Shared and Key_Shared each counts one more
// delivery for the message's redelivery_count (what dead-letter policies
// read); Exclusive and Failover keep no count, as Apache Pulsar, whose
// single-active dispatcher has no redelivery tracker
// (RedeliveryTrackerDisabled): their messages always come back with 0.
func (cn *conn) handleRedeliver(m *pb.CommandRedeliverUnacknowledgedMessages) {
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.log.Debug("REDELIVER for an unknown consumer", "consumer_id", m.GetConsumerId())
		return
	}
	s := c.sub
	s.mu.Lock()
	if m.ConsumerEpoch != nil && m.GetConsumerEpoch() > c.epoch {
		c.epoch, c.hasEpoch = m.GetConsumerEpoch(), true
	}
	count := !dispatcherOf(s.typ).ordered()
	redeliver := func(id uint64) {
		pe, ok := s.pending[id]
		if !ok || pe.c != c || s.txnHeld(id) {
			return
		}
		s.release(id, pe)
		s.addReplay(id, pe.hash)
		if count {
			s.redeliveries[id]++
		}
	}
	// Exclusive and Failover keep order: Apache Pulsar rewinds the cursor
	// there, so named ids bring back every unacknowledged message too.
	if len(m.GetMessageIds()) > 0 && count {
		for _, id := range m.GetMessageIds() {
			if id.GetLedgerId() == s.t.ledger {
				redeliver(id.GetEntryId())
			}
		}
	} else {
		for id, pe := range s.pending {
			if pe.c == c {
				redeliver(id)
			}
		}
		if !count {
			// A round planned before this read replay ids past the ones
			// just queued again; sent now, they would overtake them.
			// Drop it, as a seek does (subscription.reset).
			s.epoch++
		}
	}
	s.mu.Unlock()
	s.wakeup()
}
