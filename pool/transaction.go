package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Transaction is a Pulsar transaction: what is published in it
// (Message.Txn) is delivered once it commits and never if it aborts, and
// what is acknowledged in it (subscribe's AckWithTxn) is acknowledged
// when it commits and comes again if it aborts. The broker aborts a
// transaction nobody ended once its timeout passed.
//
// Its methods are safe for concurrent use. It is defined on the module's
// internal transaction state, so that package subscribe acknowledges
// inside it by a conversion, as it reaches a Client's connections.
type Transaction txn.Txn

// TransactionState is where a transaction is in its life.
type TransactionState int32

const (
	// TransactionOpen: messages may be published and acknowledged in it.
	TransactionOpen = TransactionState(txn.Open)
	// TransactionCommitting and TransactionAborting: Commit or Abort is
	// under way.
	TransactionCommitting = TransactionState(txn.Committing)
	TransactionAborting   = TransactionState(txn.Aborting)
	// TransactionCommitted and TransactionAborted: the broker said so.
	TransactionCommitted = TransactionState(txn.Committed)
	TransactionAborted   = TransactionState(txn.Aborted)
	// TransactionFailed: ending it failed (the broker no longer knew it,
	// or could not be reached). The broker's word is final: one that did
	// not commit is aborted once its timeout passed.
	TransactionFailed = TransactionState(txn.Failed)
)

func (s TransactionState) String() string { return txn.State(s).String() }

// Errors of transactions; match with errors.Is. The broker's refusals
// keep their codes: pulsarwire.ErrTransactionNotFound (the broker does not
// know the transaction: it ended, or its timeout aborted it),
// pulsarwire.ErrTransactionConflict (a message another transaction
// acknowledged), pulsarwire.ErrInvalidTxnStatus.
var (
	// ErrTransactionsOff: the broker has transactions off (Apache Pulsar's
	// transactionCoordinatorEnabled=false, the embedded broker's default).
	ErrTransactionsOff = txn.ErrOff
	// ErrTransactionNotOpen: publishing, acknowledging or ending in a
	// transaction that is committing, aborting or ended.
	ErrTransactionNotOpen = txn.ErrNotOpen
	// ErrTransactionAborted: Commit aborted the transaction instead,
	// because a publish or acknowledgement in it failed (the error says
	// which).
	ErrTransactionAborted = txn.ErrAborted
	// ErrTransactionOutcomeUnknown: Commit asked the broker to commit and
	// got no success, so the transaction may have committed or not. The
	// broker forgets a transaction once it ended, so a commit asked again
	// after its first answer was lost (or a commit after the timeout
	// aborted it) is refused with pulsarwire.ErrTransactionNotFound, which
	// the error also matches. Messages acknowledged in it come again if
	// it did not commit, and never if it did; what the caller keeps from
	// it must be read back from the broker.
	ErrTransactionOutcomeUnknown = txn.ErrOutcomeUnknown
)

// DefaultTransactionTimeout is BeginTransaction's timeout when it is
// given none.
const DefaultTransactionTimeout = time.Minute

// BeginTransaction begins a transaction at one of the broker's
// transaction coordinators (round robin). The broker aborts it once
// timeout has passed unless it ended before; 0 means
// DefaultTransactionTimeout (1 minute). It fails with ErrTransactionsOff
// on a broker with transactions off. The coordinators are found and
// connected to on first use, under OperationRetries.
func (c *Client) BeginTransaction(ctx context.Context, timeout time.Duration) (*Transaction, error) {
	if timeout == 0 {
		timeout = DefaultTransactionTimeout
	}
	s := c.own()
	if s.closing.Load() {
		return nil, fmt.Errorf("begin a transaction: %w", ErrClosed)
	}
	t, err := s.txns.Begin(ctx, timeout)
	if err != nil {
		return nil, err
	}
	return (*Transaction)(t), nil
}

// ConnectTransactionCoordinators connects to each of the broker's
// transaction coordinators not connected yet, under OperationRetries; it
// fails with ErrTransactionsOff on a broker with transactions off. Apache
// Pulsar loads a coordinator only when a client connects to it, and only
// then aborts the transactions it had open that timed out: after the
// broker restarts, a reader waiting for what was written behind such a
// transaction waits until some client connects to its coordinator.
func (c *Client) ConnectTransactionCoordinators(ctx context.Context) error {
	s := c.own()
	if s.closing.Load() {
		return fmt.Errorf("connect to the transaction coordinators: %w", ErrClosed)
	}
	return s.txns.Connect(ctx)
}

func (t *Transaction) inner() *txn.Txn { return (*txn.Txn)(t) }

// ID is the transaction's id, as the broker named it.
func (t *Transaction) ID() pulsarwire.TxnID { return t.inner().ID() }

// State is where the transaction is. One past its timeout reads open
// until an operation finds out.
func (t *Transaction) State() TransactionState { return TransactionState(t.inner().State()) }

// Deadline is when the broker aborts the transaction unless it ended.
func (t *Transaction) Deadline() time.Time { return t.inner().Deadline() }

// Commit commits the transaction: it sends the batches and grouped
// acknowledgements held for it, waits for every publish and
// acknowledgement in it to be answered, then asks its coordinator to
// commit. If one of them failed it aborts instead and returns
// ErrTransactionAborted with that failure. A commit the broker refuses
// or does not answer leaves the transaction TransactionFailed and returns
// ErrTransactionOutcomeUnknown. If ctx ends while waiting for the
// publishes, the transaction is open again.
//
// Acknowledgements held for it (subscribe's AckWithTxn) are not sent once
// its timeout has passed: it aborts instead (subscribe's
// ErrTransactionPastTimeout), since Apache Pulsar keeps an
// acknowledgement of a transaction that already ended pending, and its
// messages would not come again.
//
// After a lost connection the commit is asked again; if the first one
// had reached the broker, the second is refused with
// ErrTransactionNotFound although it committed (Apache Pulsar answers
// so; so does the embedded broker): ErrTransactionOutcomeUnknown. The
// broker's state is the truth: acknowledgements that did not commit come
// again, those that did never do.
func (t *Transaction) Commit(ctx context.Context) error { return t.inner().Commit(ctx) }

// Abort aborts the transaction: nothing published in it is ever
// delivered, and what was acknowledged in it comes again (acknowledgements
// still grouped are dropped and their messages asked for again). It does
// not wait for publishes under way; what they store joins the aborted
// transaction.
func (t *Transaction) Abort(ctx context.Context) error { return t.inner().Abort(ctx) }

// String is the transaction's id in Apache Pulsar's form, "(0,5)".
func (t *Transaction) String() string { return t.ID().String() }

// TransactionSeries begins transactions for a caller that runs them one
// after another (commit one, begin the next): as soon as one of its
// transactions is committing or aborting, it begins the next in the
// background and registers it with the topics and subscriptions the
// ending one used, so that the next Begin finds it ready instead of
// waiting for the broker. A transaction of 10 messages commits in two
// round trips after its publishes and acknowledgements instead of four
// (docs/pool.md, "Transaction series").
//
// What the head start costs: a transaction's timeout runs from when the
// series began it, a little before Begin returned it (Deadline says
// when; Begin never hands out one older than a tenth of the timeout,
// it aborts it and begins another), and one registered ahead with a
// topic or subscription it then does not use ends there too (Apache
// Pulsar writes its commit or abort marker into such a topic). Close
// aborts the transaction begun ahead. Safe for concurrent use; the
// transactions it hands out are ordinary ones.
type TransactionSeries struct {
	c *Client
	s *txn.Series
}

// NewTransactionSeries returns a series of transactions of timeout (0:
// DefaultTransactionTimeout). It talks to the broker only on Begin.
func (c *Client) NewTransactionSeries(timeout time.Duration) (*TransactionSeries, error) {
	if timeout == 0 {
		timeout = DefaultTransactionTimeout
	}
	s, err := c.own().txns.NewSeries(timeout)
	if err != nil {
		return nil, err
	}
	return &TransactionSeries{c: c, s: s}, nil
}

// Begin returns the transaction the series began ahead (waiting for the
// broker's answer if it is still under way), or begins one as
// BeginTransaction does when there is none: the first, one begun while
// the one before is still open, or when beginning ahead failed. It fails
// with ErrTransactionsOff on a broker with transactions off, and with
// ErrTransactionSeriesClosed after Close.
func (s *TransactionSeries) Begin(ctx context.Context) (*Transaction, error) {
	if s.c.own().closing.Load() {
		return nil, fmt.Errorf("begin a transaction: %w", ErrClosed)
	}
	t, err := s.s.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return (*Transaction)(t), nil
}

// Close aborts the transaction the series began ahead, if any (waiting,
// while ctx allows, for the broker to answer its beginning). The
// transactions Begin returned are not touched.
func (s *TransactionSeries) Close(ctx context.Context) error { return s.s.Close(ctx) }

// ErrTransactionSeriesClosed is what Begin on a TransactionSeries returns
// after its Close.
var ErrTransactionSeriesClosed = txn.ErrSeriesClosed
