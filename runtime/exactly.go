package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Exactly once (guarantee: exactly_once). Everything a pipeline settles
// within a commit interval goes into one Pulsar transaction: outputs and
// dead letters published in it, inputs acknowledged in it. At the end of
// the interval the transaction commits, and only then are its messages
// counted settled and their credits given back. Any failure (a publish or
// an acknowledgement refused, a conflict, a lost connection, the
// broker's timeout) aborts it: nothing it published is ever delivered and
// its inputs come again. This is the shape of Kafka Streams'
// exactly_once_v2: one transaction per commit interval holding the
// outputs and the input positions.
//
// Settling holds the gate for reading while it puts a message's effects
// in the open transaction; the commit holds it for writing, so that a
// message's outputs and its acknowledgement always land in one
// transaction, and no message settles while a commit is under way.
//
// The broker acknowledges a batch entry whole, in one transaction, so a
// commit waits (at most a quarter of the transaction's timeout) until
// every entry the transaction began acknowledging is complete; meanwhile
// messages of other entries settle into the next transaction. A
// message's credit comes back when it settles into a transaction, not
// when that commits, so that the rest of an entry can always be
// received.

// committer holds an exactly_once pipeline's open transaction and
// commits it every interval.
type committer struct {
	p        *pipeline
	interval time.Duration
	timeout  time.Duration // the broker aborts a transaction open this long

	gate sync.RWMutex
	mu   sync.Mutex // guards cur, next and closing
	cur  *epoch     // nil until a message settles after the last commit
	// closing: a commit of cur waits for its batch entries to complete;
	// messages of other entries go into next.
	closing bool
	next    *epoch

	kick chan struct{} // commit now (the workers are done)
	// ends asks the commit loop to end the open transaction now and to
	// close the channel sent once it has (abortNow).
	ends     chan chan struct{}
	quit     chan struct{}
	done     chan struct{}
	started  bool
	stopOnce sync.Once

	// Commits whose outcome is unknown (the broker answered none, or
	// TransactionNotFound, which a commit asked again after its answer
	// was lost gets too: see unknown.go), counted; readBack is the count
	// the keyed state was last read back at. While they differ the memory
	// may be behind the changelog, and every transaction aborts.
	unknown, readBack atomic.Uint64
	// settleBy, unix nanoseconds: the receive loop reads the state back
	// only after it, the deadline of an unknown commit the broker did not
	// answer at all (its END_TXN may still be on its way).
	settleBy atomic.Int64
}

// epoch is one transaction and what settled in it.
type epoch struct {
	txn *pool.Transaction

	mu      sync.Mutex
	settles []settlement
	failed  error // an acknowledgement refused: the commit aborts
	// joined are the messages in it, under the committer's mu: a second
	// copy of one (delivered again while the first was in the host's
	// hands) is handed back rather than handled twice.
	joined map[retryKey]struct{}
}

// settlement is a message whose outcome takes effect when its epoch
// commits.
type settlement struct {
	it     *item
	o      Outcome
	reason string
	nack   bool // its acknowledgement was refused: ask for it again on abort
}

func newCommitter(p *pipeline) *committer {
	return &committer{
		p:        p,
		interval: p.cfg.CommitInterval,
		timeout:  p.cfg.TransactionTimeout,
		kick:     make(chan struct{}, 1),
		ends:     make(chan chan struct{}),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// errTransactionsOff explains a broker without transactions.
var errTransactionsOff = errors.New("guarantee exactly_once needs a broker with transactions on " +
	"(Apache Pulsar: transactionCoordinatorEnabled=true; streamrun broker: --transactions; " +
	"streamrun run without a service URL turns them on itself)")

// check begins and aborts a transaction, so that a broker without
// transactions stops the pipeline at start rather than at its first
// message.
func (c *committer) check(ctx context.Context) error {
	t, err := c.p.client.BeginTransaction(ctx, c.timeout)
	if errors.Is(err, pool.ErrTransactionsOff) {
		return fmt.Errorf("%w: %v", errTransactionsOff, err)
	}
	if err != nil {
		return fmt.Errorf("begin a transaction: %w", err)
	}
	if err := t.Abort(ctx); err != nil {
		c.p.log.Debug("abort the start's transaction", "txn", t, "err", err)
	}
	return nil
}

// start runs the commit loop; stop ends it.
func (c *committer) start() {
	c.started = true
	go c.run()
}

func (c *committer) run() {
	defer close(c.done)
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.kick:
		case ended := <-c.ends:
			c.commit(false)
			close(ended)
			continue
		case <-c.quit:
			c.commit(true)
			return
		}
		c.commit(false)
	}
}

// abortNow makes the open transaction (and the next, if one began)
// abort for cause, and waits until the commit loop has ended it, or ctx
// ends: what they hold comes again (state_regain.go).
func (c *committer) abortNow(ctx context.Context, cause error) {
	c.mu.Lock()
	for _, e := range []*epoch{c.cur, c.next} {
		if e != nil {
			e.fail(cause)
		}
	}
	c.mu.Unlock()
	ended := make(chan struct{})
	select {
	case c.ends <- ended:
	case <-c.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-ended:
	case <-c.done:
	case <-ctx.Done():
	}
}

// commitNow asks for a commit before the interval is over: nothing more
// will settle into the open transaction.
func (c *committer) commitNow() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// stop commits what is open and ends the commit loop; ctx bounds the
// wait.
func (c *committer) stop(ctx context.Context) {
	c.stopOnce.Do(func() {
		if !c.started {
			close(c.done)
			return
		}
		close(c.quit)
	})
	select {
	case <-c.done:
	case <-ctx.Done():
	}
}

// join gives items their transaction (the open one, or the next while a
// commit of the open one waits for its batch entries), beginning it if
// needed; the caller holds the gate for reading. An item already
// delivered again (superseded: its connection was lost, or the consumer
// asked for everything again after an abort) is handed back untouched,
// since its new copy will be settled instead. When no transaction can
// begin, the items are handed back for a retry. It reports whether any
// item joined.
func (c *committer) join(items []*item) bool {
	p := c.p
	c.mu.Lock()
	defer c.mu.Unlock()
	joined := false
	for i, it := range items {
		if it.win != nil && p.win.lapsed(it.win) {
			p.handBack(it) // made before the windows were read back
			continue
		}
		if it.m.Superseded() {
			p.handBack(it)
			continue
		}
		e, err := c.epochFor(it)
		if err != nil {
			p.log.Warn("no transaction: the messages come again", "messages", len(items)-i, "err", err)
			redelivered := false
			if p.keyed != nil && p.keyed.eo {
				// Their state changes are in memory, and the messages
				// after them, answered or on their way, were handled on
				// those values: left for the nack's redelivery, later, those
				// would commit a count that includes them, and the copies
				// count them again, or take them back under the committed
				// ones (a key's count going back). Taken back now, with
				// everything in hand asked for again, as after an abort.
				p.keyed.rollbackUnjoined(func() {
					if rerr := p.cons.RedeliverUnacknowledged(); rerr != nil {
						p.log.Debug("redeliver", "err", rerr)
					}
				})
				redelivered = true
			}
			for _, it := range items[i:] {
				if !redelivered || it.win != nil {
					p.nackAfter(it, p.cfg.ErrorPolicy.Backoff.Delay(1))
				}
				p.settled(it, Retried, "no transaction: "+err.Error())
			}
			return joined
		}
		if it.win != nil {
			// A window's fire or add, made by the host: one in flight a
			// window, and nothing of the broker's to acknowledge
			// (window_exactly.go).
			it.ep, joined = e, true
			continue
		}
		k := retryKeyOf(it.m)
		if _, dup := e.joined[k]; dup {
			if p.keyed != nil && p.keyed.live(it) {
				// A copy handled with its original's change in memory
				// (admit leaves such copies out, so this is a defence):
				// the transaction aborts and takes every pending change
				// back.
				e.fail(fmt.Errorf("a copy of %s with a state change, while the original is in the transaction", it.id()))
			}
			p.handBack(it)
			continue
		}
		if p.keyed != nil && !p.keyed.claim(it) {
			p.handBack(it) // superseded a moment ago
			continue
		}
		e.joined[k] = struct{}{}
		it.ep, joined = e, true
	}
	return joined
}

// leave takes it, retried, out of its transaction: it is not
// acknowledged there, and its copy, which comes again, goes in instead.
func (c *committer) leave(it *item) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := it.ep; e != nil {
		delete(e.joined, retryKeyOf(it.m))
		it.ep = nil
	}
}

// epochFor is the transaction it goes into, under c.mu.
func (c *committer) epochFor(it *item) (*epoch, error) {
	var err error
	if c.cur == nil {
		if c.cur, err = c.begin(); err != nil {
			return nil, err
		}
	}
	if !c.closing || it.m.InTxn(c.cur.txn) {
		return c.cur, nil
	}
	if c.next == nil {
		if c.next, err = c.begin(); err != nil {
			return nil, err
		}
	}
	return c.next, nil
}

func (c *committer) begin() (*epoch, error) {
	ctx, cancel := context.WithTimeout(c.p.hard, c.timeout)
	defer cancel()
	t, err := c.p.client.BeginTransaction(ctx, c.timeout)
	if err != nil {
		return nil, err
	}
	return &epoch{txn: t, joined: map[retryKey]struct{}{}}, nil
}

// ackIn acknowledges it in its transaction; its outcome o counts once
// that commits.
func (c *committer) ackIn(it *item, o Outcome, reason string) {
	e := it.ep
	s := settlement{it: it, o: o, reason: reason}
	if it.win != nil {
		c.p.win.settleIn(it, e.txn)
	} else if err := c.p.cons.AckWithTxn(c.p.hard, it.m, e.txn); err != nil {
		s.nack = true
		e.fail(fmt.Errorf("acknowledge %s in transaction %s: %w", it.id(), e.txn, err))
	}
	e.mu.Lock()
	e.settles = append(e.settles, s)
	e.mu.Unlock()
	c.p.release(it)
}

// doomed says whether e aborts at its end.
func (e *epoch) doomed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed != nil
}

func (e *epoch) fail(err error) {
	e.mu.Lock()
	if e.failed == nil {
		e.failed = err
	}
	e.mu.Unlock()
}

// partialWait: a commit waits for the rest of a batch entry whose first
// messages are acknowledged in the transaction (one entry is acknowledged
// whole, in one transaction) until this fraction of the transaction's
// timeout is left before the broker would abort it; then it commits
// anyway, which aborts. Counted from the deadline, not from the commit's
// tick, so that an entry a slow handler takes most of the timeout over
// still commits (from the tick, a quarter of the timeout, such entries
// aborted every time).
const partialWait = 4

// commit ends the open transaction: it commits, or aborts when an
// acknowledgement was refused. final: nothing more will settle, so no
// waiting for the rest of a batch entry.
func (c *committer) commit(final bool) {
	p := c.p
	c.mu.Lock()
	e := c.cur
	c.closing = e != nil
	c.mu.Unlock()
	if e == nil {
		return
	}
	c.closeGate(e, final)
	defer c.gate.Unlock()
	c.mu.Lock()
	c.cur, c.next, c.closing = c.next, nil, false
	c.mu.Unlock()
	if c.stale() {
		e.fail(errStateUnknown)
	}
	switch {
	case p.win == nil:
	case p.cons.Disconnected():
		// A fire acknowledges no input, so nothing else stops it
		// committing while another host holds the subscription
		// (window_regain.go, stale; asked before the count, as there).
		e.fail(errors.New("the subscription is lost: the windows are read back once it is made again"))
	case p.win.resubscribed():
		// Another host may hold the subscription and have fired the same
		// windows: nothing of this one's commits until they are read
		// back (window_exactly.go).
		e.fail(errors.New("the subscription was lost and made again: the windows are read back first"))
	case p.win.lapsedIn(e):
		// A fire that joined before the windows were let go (letGo), its
		// commit come between letGo and the read back's abortNow: letGo
		// has set the count resubscribed compares with to the new one.
		e.fail(errors.New("a fire in it was made before the windows were read back"))
	}
	err := c.end(e)
	if err != nil && p.cfg.Source.Type.SingleActive() && c.cur != nil {
		// Everything after the aborted transaction's messages comes again
		// (finish): what the next one holds must not commit.
		next := c.cur
		c.cur = nil
		c.abort(next)
		c.finish(next, fmt.Errorf("the transaction before aborted: %w", err))
	}
	c.finish(e, err)
}

// closeGate takes the gate for writing once e holds no batch entry in
// part (or final, or the wait is over: then the commit aborts). It looks
// again under the gate, which orders the acknowledgements: a worker may
// have settled an entry's first message into e between the look without
// it and the lock, and the rest of that entry settles once the gate
// opens again.
func (c *committer) closeGate(e *epoch, final bool) {
	until := e.txn.Deadline().Add(-c.timeout / partialWait)
	for {
		// A transaction that aborts anyway (e.failed) does not wait for
		// the rest of its entries: the wait would only hold the next
		// messages.
		for !final && !e.doomed() && c.p.cons.PartialInTxn(e.txn) > 0 && time.Now().Before(until) {
			select {
			case <-time.After(time.Millisecond):
			case <-c.quit:
				final = true
			}
		}
		c.gate.Lock()
		if final || e.doomed() || c.p.cons.PartialInTxn(e.txn) == 0 || !time.Now().Before(until) {
			return
		}
		c.gate.Unlock()
	}
}

// end commits e, or aborts it when an acknowledgement in it was refused.
func (c *committer) end(e *epoch) error {
	ctx, cancel := context.WithTimeout(c.p.hard, c.timeout)
	defer cancel()
	e.mu.Lock()
	err := e.failed
	e.mu.Unlock()
	if err == nil {
		err = e.txn.Commit(ctx)
	}
	if err != nil && e.txn.State() == pool.TransactionOpen {
		// Refused before the commit, or the commit gave up waiting: abort
		// it here rather than leave it to the broker's timeout.
		c.abort(e)
	}
	return err
}

func (c *committer) abort(e *epoch) {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := e.txn.Abort(ctx); err != nil {
		c.p.log.Debug("abort", "txn", e.txn, "err", err)
	}
}

// finish counts what e held: as it said when e committed, or as retried
// when it aborted (the messages come again).
func (c *committer) finish(e *epoch, err error) {
	p := c.p
	if err == nil {
		p.stats.commits.Add(1)
		p.log.Debug("transaction committed", "txn", e.txn, "messages", len(e.settles))
		if p.keyed != nil {
			items := make([]*item, len(e.settles))
			for i, s := range e.settles {
				items[i] = s.it
			}
			p.keyed.committed(items)
		}
		if p.win != nil {
			p.win.acksCommitted(e.settles)
		}
		for _, s := range e.settles {
			s.it.ep = nil
			if s.it.win != nil {
				p.win.answered(s.it.win, true, 0)
			}
			p.counted(s.it, s.o, s.reason)
		}
		return
	}
	p.stats.aborts.Add(1)
	p.log.Warn("transaction aborted: its messages come again", "txn", e.txn, "messages", len(e.settles), "err", err)
	reason := "transaction aborted: " + err.Error()
	single := p.cfg.Source.Type.SingleActive()
	for _, s := range e.settles {
		s.it.ep = nil
		if s.it.win != nil {
			p.win.answered(s.it.win, false, 0) // made again
		}
		if s.nack && !single && !s.it.m.Superseded() {
			// Never acknowledged in the transaction, nor asked for
			// again: nobody else sends it again.
			_ = p.cons.NackAfter(s.it.m, 0)
		}
		p.counted(s.it, Retried, reason)
	}
	redeliver := func() {
		// Everything from the oldest unacknowledged message comes again,
		// in order; what the host holds now is superseded (join).
		if rerr := p.cons.RedeliverUnacknowledged(); rerr != nil {
			p.log.Debug("redeliver", "err", rerr)
		}
	}
	if p.win != nil && errors.Is(err, pool.ErrTransactionOutcomeUnknown) {
		// A fire's outputs and its record may have committed: the
		// windows are read back before the next message (unknown.go).
		c.unknownEnd(e, err)
	}
	switch {
	case p.keyed != nil:
		if errors.Is(err, pool.ErrTransactionOutcomeUnknown) {
			// It may have committed its changes: the receive loop reads
			// them back before the next message (unknown.go).
			c.unknownEnd(e, err)
		}
		// With the state changes not committed taken back, at once.
		p.keyed.rollback(redeliver)
	case single && len(e.settles) > 0:
		redeliver()
	}
}

// publishTxn settles an answer with outputs in an exactly_once pipeline:
// the outputs published in it's transaction, it acknowledged there at
// once (the commit waits for the receipts).
func (p *pipeline) publishTxn(it *item, r *plugin.Result) {
	e := it.ep
	if it.changed {
		// The change's changelog record commits or aborts with the rest.
		m := changelogMessage(r.State)
		m.Txn = e.txn
		parent, traced := p.tr.batchContext(it)
		p.publish(parent, traced, p.keyed.topic, m, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				e.fail(err)
				p.log.Warn("writing a state change to the changelog failed; the transaction aborts", "id", it.id(), "changelog", p.keyed.topic, "err", err)
			}
		})
	}
	for j := range r.Outputs {
		o := &r.Outputs[j]
		m := p.outputMessage(it, o)
		m.Txn = e.txn
		topic := o.Topic
		hook := p.h.opts.Hooks.Output
		cb := func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				// Most failures fail the transaction too; one that came
				// before the publish joined it (its producer could not be
				// opened) would not.
				e.fail(fmt.Errorf("publish an output of %s to %s: %w", it.id(), topic, err))
			}
			if hook != nil {
				hook(p.name, topic, err)
			}
		}
		parent, traced := p.tr.parentOf(it, o)
		p.publish(parent, traced, topic, m, cb)
	}
	p.ack(it, Acked, "")
}
