package runtime

import (
	"fmt"

	"github.com/streamrun/streamrun/subscribe"
)

// Keyed state under guarantee exactly_once. A change is applied to the
// memory when its answer comes, so that the next batch of its key sees
// it, but it counts only once the transaction its message settles into
// (with the changelog record, the outputs and the acknowledgement)
// commits. Until then it is pending, with the value it replaced, and is
// taken back when its message will not commit:
//
//   - the transaction aborts: every pending change is taken back, at
//     once with the consumer's request for every unacknowledged message
//     again (rollback), so that nothing handled after sees them;
//   - no transaction could begin for its message: every change in no
//     transaction is taken back, at once with the consumer's request for
//     every unacknowledged message again (rollbackUnjoined), since the
//     messages after it were handled on its value;
//   - its message was delivered again before it went into a transaction
//     (superseded: a lost connection, or the request after a retry or an
//     abort): its change, and those made after it on its key, which all
//     came from messages received before it was superseded too, are
//     taken back before the key's next batch reads the value
//     (dropSuperseded), or when the message is handed back (discard).
//
// A key's messages go to one worker, which settles them in the order it
// sent them, so a key's pending changes go into transactions in the
// order they were made, and those in a transaction come first.

// pendingChange is a change applied to the memory whose message has not
// committed yet.
type pendingChange struct {
	m    *subscribe.Message
	key  string
	prev stateValue
	had  bool // the key had a value (prev)
	// joined: its message went into a transaction (its fate is that of
	// the transaction); under the state's mu.
	joined bool
}

// track records the change to key k that it's answer makes, before it is
// applied (the caller holds mu), and says whether to apply it: not when
// it was superseded already, since it will be handed back. It fails,
// recording nothing, when the value it replaces cannot be read.
func (s *keyedState) track(it *item, k string) (bool, error) {
	if it.m.Superseded() {
		return false, nil
	}
	prev, had, err := s.vals.get(k)
	if err != nil {
		return false, err
	}
	c := &pendingChange{m: it.m, key: k, prev: prev, had: had}
	s.pending[k] = append(s.pending[k], c)
	it.pendingChange = c
	return true, nil
}

// untrack forgets it's change, just tracked and not applied (the caller
// holds mu).
func (s *keyedState) untrack(it *item) {
	c := it.pendingChange
	if c == nil {
		return
	}
	it.pendingChange = nil
	cs := s.pending[c.key]
	if n := len(cs); n > 0 && cs[n-1] == c {
		cs[n-1] = nil
		s.trim(c.key, cs[:n-1])
	}
}

// undo takes back the changes cs of key k, newest first (the caller
// holds mu).
func (s *keyedState) undo(k string, cs []*pendingChange) {
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if err := s.set(k, c.prev.v, !c.had, c.prev.at); err != nil {
			// The memory holds a change whose message will not commit
			// and cannot put the value before it back: only reading the
			// changelog back makes it right (broken).
			s.broken(fmt.Errorf("take back a change of key %q not committed: %w", k, err))
		}
	}
}

// dropSuperseded takes back key k's changes from the first one not in a
// transaction whose message was superseded on: those after it were made
// on its value, by messages received before it was superseded too
// (the caller holds mu).
func (s *keyedState) dropSuperseded(k string) {
	cs := s.pending[k]
	for i, c := range cs {
		if !c.joined && c.m.Superseded() {
			s.undo(k, cs[i:])
			clear(cs[i:])
			s.trim(k, cs[:i])
			return
		}
	}
}

// trim keeps cs as key k's pending changes.
func (s *keyedState) trim(k string, cs []*pendingChange) {
	if len(cs) == 0 {
		delete(s.pending, k)
		return
	}
	s.pending[k] = cs
}

// claim is asked whether it may go into a transaction: not when it was
// superseded (it is handed back). Checked and recorded at once, under
// both locks, so that a copy is either let in (admit) and it handed
// back, or left out and it in the transaction; and its change either
// taken back as superseded (dropSuperseded) or in the transaction.
func (s *keyedState) claim(it *item) bool {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	s.mu.Lock()
	defer s.unlock()
	if it.m.Superseded() {
		return false
	}
	k := retryKeyOf(it.m)
	if h := s.held.find(k); h != nil && h.m == it.m {
		h.joined = true
	}
	if c := it.pendingChange; c != nil {
		c.joined = true
	}
	return true
}

// live says whether it has a change pending that is in no transaction.
func (s *keyedState) live(it *item) bool {
	s.mu.Lock()
	defer s.unlock()
	c := it.pendingChange
	return c != nil && !c.joined
}

// discard is told that it, superseded, is handed back without going into
// a transaction: its change, if still pending, is taken back with those
// after it on its key.
func (s *keyedState) discard(it *item) {
	s.mu.Lock()
	defer s.unlock()
	if c := it.pendingChange; c != nil {
		it.pendingChange = nil
		s.dropSuperseded(c.key)
	}
}

// committed is told that the transaction holding items committed: their
// changes are kept.
func (s *keyedState) committed(items []*item) {
	s.mu.Lock()
	defer s.unlock()
	for _, it := range items {
		c := it.pendingChange
		if c == nil {
			continue
		}
		it.pendingChange = nil
		k := c.key
		cs := s.pending[k]
		for i := range cs {
			if cs[i] == c {
				cs = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		s.trim(k, cs)
	}
}

// rollback takes back every pending change, having run redeliver (the
// consumer's request for every unacknowledged message again) under mu:
// a change applied after is that of a message received before, which
// track leaves out, and a batch whose values are read after is of
// messages received after.
func (s *keyedState) rollback(redeliver func()) {
	// The request may bring copies of messages that commit meanwhile in
	// the next transaction: their ids are remembered once acknowledged,
	// and the copies left out (admit).
	s.retried(0)
	s.mu.Lock()
	defer s.unlock()
	redeliver()
	for k, cs := range s.pending {
		s.undo(k, cs)
		delete(s.pending, k)
	}
}

// rollbackUnjoined takes back every pending change that is in no
// transaction, having run redeliver under mu, as rollback does; those in
// a transaction (one committing while the next could not begin) keep
// their fate. A key's changes in a transaction come first, so from its
// first one in none on, the key's changes are taken back.
func (s *keyedState) rollbackUnjoined(redeliver func()) {
	s.retried(0)
	s.mu.Lock()
	defer s.unlock()
	redeliver()
	for k, cs := range s.pending {
		for i, c := range cs {
			if !c.joined {
				s.undo(k, cs[i:])
				clear(cs[i:])
				s.trim(k, cs[:i])
				break
			}
		}
	}
}
