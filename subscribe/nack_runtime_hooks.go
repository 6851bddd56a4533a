package subscribe

import "time"

// This file is owned by package runtime's author: what the host needs of
// a Consumer beyond its general API.

// NackAfter is Nack with a delay of the caller's choosing instead of
// Options.NackDelay: after delay the broker is asked to deliver m again
// (on Exclusive and Failover: every unacknowledged message of its topic,
// as Nack). Until then only m's position is kept, not m, so a host that
// hands back many messages for a long delay holds no payloads.
//
// Nacks queue in the order their delays end, the consumer's own
// NackDelay included; mixing NackAfter with Nack under a long NackDelay
// can hold a NackAfter back until the Nacks queued before it are due.
// The runtime uses NackAfter only, with NackDelay at its minimum.
func (c *Consumer) NackAfter(m *Message, delay time.Duration) error {
	if err := c.check(m); err != nil {
		return err
	}
	if b := m.acks; b != nil && b.acked(m.ID.BatchIndex) {
		return nil
	}
	pc, pos := m.pc, entryPos{m.ID.Ledger, m.ID.Entry}
	if delay <= 0 {
		c.nacks.add(pc, pos, 0)
		return nil
	}
	// A timer rather than a goroutine: nothing runs until it fires, and a
	// consumer closed meanwhile ignores it (its unacknowledged messages
	// are delivered again to the next consumer anyway).
	time.AfterFunc(delay, func() {
		if c.ctx.Err() == nil {
			c.nacks.add(pc, pos, 0)
		}
	})
	return nil
}
