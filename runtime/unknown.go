package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// A commit whose outcome is unknown (exactly_once). The first END_TXN's
// answer may be lost with its connection; asked again, the coordinator
// answers TransactionNotFound whether the first one committed or the
// transaction aborted (it forgets an ended transaction: Apache Pulsar
// does, and the embedded broker answers the same;
// broker/txn_endagain_test.go). The host cannot tell, so it does what is
// right either way:
//
//   - inputs: it asks for none again itself on Shared and Key_Shared. An
//     aborted transaction's acknowledged messages are given back by the
//     broker; a committed one's never come again. On Exclusive and
//     Failover it asks for every unacknowledged message again, as after
//     any abort, which brings back only what is not acknowledged.
//   - keyed state: the memory cannot be trusted, since the changes may
//     have committed. Until the state is read back from the changelog
//     (read committed: what did commit is there, what did not is not),
//     every transaction aborts; the receive loop reads it back before
//     the next message as after a subscription came back
//     (state_regain.go). When the broker did not answer at all, its
//     END_TXN may still be on the way, so the reading waits for the
//     transaction's deadline, past which the broker has ended it one way
//     or the other.

// errStateUnknown aborts a transaction while the keyed state is not read
// back after a commit whose outcome is unknown.
var errStateUnknown = errors.New("a commit before had an unknown outcome: the keyed state is read back from the changelog first")

// unknownEnd notes that e's commit had an unknown outcome; the commit
// loop calls it before taking the pending changes back.
func (c *committer) unknownEnd(e *epoch, err error) {
	if !errors.Is(err, pulsarwire.ErrTransactionNotFound) {
		// Not refused but unanswered: the END_TXN may land later.
		c.settleBy.Store(e.txn.Deadline().UnixNano())
	}
	c.unknown.Add(1)
}

// stale says whether the keyed state waits to be read back.
func (c *committer) stale() bool { return c.unknown.Load() != c.readBack.Load() }

// settle waits until the broker has surely ended the unknown commits,
// and returns the count the state is read back at.
func (c *committer) settle(ctx context.Context) (uint64, error) {
	at := c.unknown.Load()
	if d := time.Until(time.Unix(0, c.settleBy.Load())); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return at, nil
}
