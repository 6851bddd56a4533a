package subscribe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Acknowledgements inside a transaction. They are held per transaction
// until it commits (or sent at once, waiting for the broker's answer,
// when AckGroupTime is negative), then sent with the transaction's id,
// each answered (ACK_RESPONSE), before the commit itself: a refusal (a
// conflict with another transaction) aborts the commit, the entries of
// a refused ACK acknowledged again alone in the transaction first
// (retryAlone), so that its abort sends them again. When the
// transaction does not commit, what it acknowledged comes again: the
// broker sends again what it was told of, and the consumer asks for the
// rest.
//
// A batch entry is acknowledged on the broker as a whole, so all its
// messages belong to one transaction: acknowledging them in two, or in
// one and outside any, is refused (ErrBatchAcrossTransactions), and a
// commit while some of a batch's messages are not acknowledged in it
// aborts instead (ErrPartialBatch).

// txnAcks are a consumer's acknowledgements held for transactions.
type txnAcks struct {
	c *Consumer

	mu    sync.Mutex
	byTxn map[*txn.Txn]*txnAckSet

	// checked, nil but in tests, runs when an acknowledgement found its
	// transaction open, before it counts.
	checked func()
}

// txnAckSet is what one transaction acknowledged on the consumer.
type txnAckSet struct {
	held    []ackReq     // whole entries, not sent yet
	sent    []ackReq     // whole entries, sent
	batches []*batchAcks // batches with messages acknowledged in it
}

// AckWithTxn acknowledges m inside transaction t: the acknowledgement
// takes effect when t commits, and m comes again if t aborts (or its
// timeout passes). The first acknowledgement of a topic (partition) in t
// starts registering the subscription with t's coordinator, in the
// background. Acknowledgements are held until t commits and sent then,
// once the registration is done, each answered by the broker (a failed
// registration makes the commit abort); a negative AckGroupTime waits for
// the registration, sends each at once and returns the broker's answer. A message another transaction holds acknowledged
// is refused with pulsarwire.ErrTransactionConflict (at once, or by
// Commit, which then aborts).
func (c *Consumer) AckWithTxn(ctx context.Context, m *Message, t *pool.Transaction) error {
	if err := c.check(m); err != nil {
		return err
	}
	if t == nil {
		return c.Ack(ctx, m)
	}
	tx := (*txn.Txn)(t)
	pc := m.pc
	if pc.txnJoined.Load() != tx {
		r, _, err := tx.JoinSubscription(pc.topic, c.opts.Subscription)
		if err == nil && c.opts.AckGroupTime < 0 {
			// Sent at once: after the registration. Held ones wait for
			// it in flush, so that it overlaps the caller's other work.
			err = r.Wait(ctx)
		}
		if err != nil {
			return fmt.Errorf("ack %s in transaction: %w", m.ID, err)
		}
		pc.txnJoined.Store(tx)
	}
	if c.opts.AckGroupTime < 0 {
		if err := tx.Start(); err != nil {
			return fmt.Errorf("ack %s in transaction: %w", m.ID, err)
		}
	}
	set, req, err := c.txnAcks.add(m, tx)
	if c.opts.AckGroupTime >= 0 || req.n == 0 || err != nil {
		if c.opts.AckGroupTime < 0 {
			tx.Done(nil) // refused or counted: nothing sent
		}
		return err
	}
	err = c.txnAcks.send(ctx, tx, pc, []ackReq{req})
	tx.Done(err)
	if err != nil {
		return err
	}
	c.txnAcks.mu.Lock()
	set.sent = append(set.sent, req)
	c.txnAcks.mu.Unlock()
	return nil
}

// add counts m acknowledged in t: held (with a grouping AckGroupTime)
// when it completes its entry, or returned to be sent (with a negative
// one); a zero req when there is nothing to send (a message of a batch
// entry that is not complete, or acknowledged before). Under a.mu, which
// a commit's flush takes once t is no longer open, so that an
// acknowledgement racing the commit is either in what the flush sees
// (the entry complete, the held ones) or refused: checked outside, it
// could count after the flush looked and be accepted yet left out.
func (a *txnAcks) add(m *Message, tx *txn.Txn) (*txnAckSet, ackReq, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st := tx.State(); st != txn.Open {
		return nil, ackReq{}, fmt.Errorf("ack %s in transaction %s: transaction is %s: %w", m.ID, tx.ID(), st, txn.ErrNotOpen)
	}
	if f := a.checked; f != nil {
		f()
	}
	set, err := a.setLocked(tx)
	if err != nil {
		return nil, ackReq{}, fmt.Errorf("ack %s in transaction: %w", m.ID, err)
	}
	pc := m.pc
	n := int32(1)
	if b := m.acks; b != nil {
		first := b.txn.CompareAndSwap(nil, tx)
		if !first && b.txn.Load() != tx || b.plain.Load() {
			return nil, ackReq{}, fmt.Errorf("ack %s in transaction %s: %w", m.ID, tx.ID(), ErrBatchAcrossTransactions)
		}
		if first && !slices.Contains(set.batches, b) {
			set.batches = append(set.batches, b)
		}
		if !b.mark(m.ID.BatchIndex) {
			return set, ackReq{}, nil // acknowledged before
		}
		if b.left.Add(-1) > 0 {
			if b.partial.CompareAndSwap(false, true) {
				pc.partial.add(b)
			}
			return set, ackReq{}, nil
		}
		if b.partial.Load() {
			pc.partial.remove(b)
		}
		n = b.n
	}
	req := ackReq{pc, entryPos{m.ID.Ledger, m.ID.Entry}, n}
	if a.c.opts.AckGroupTime >= 0 {
		set.held = append(set.held, req)
	}
	return set, req, nil
}

// setLocked returns t's set, making it (and hooking the consumer to
// t's end) the first time; a.mu is held. It fails when t is no longer
// open: a commit that began would not flush the set.
func (a *txnAcks) setLocked(t *txn.Txn) (*txnAckSet, error) {
	s := a.byTxn[t]
	if s != nil {
		return s, nil
	}
	err := t.AddHooks(txn.Hooks{
		Flush: func(ctx context.Context) error { return a.flush(ctx, t) },
		Ended: func(committed bool) { a.ended(t, committed) },
	})
	if err != nil {
		return nil, err
	}
	s = &txnAckSet{}
	if a.byTxn == nil {
		a.byTxn = map[*txn.Txn]*txnAckSet{}
	}
	a.byTxn[t] = s
	return s, nil
}

// flush sends what t holds, part by part, each ACK answered after its
// subscription's registration; Commit runs it. A batch of which t acknowledged only some messages makes the
// commit abort: its entry cannot be acknowledged in part.
func (a *txnAcks) flush(ctx context.Context, t *txn.Txn) error {
	a.mu.Lock()
	s := a.byTxn[t]
	if s == nil {
		a.mu.Unlock()
		return nil
	}
	for _, b := range s.batches {
		if left := b.left.Load(); left > 0 {
			a.mu.Unlock()
			return fmt.Errorf("ack in transaction %s: entry %d:%d has %d of its %d messages not acknowledged in it: %w",
				t.ID(), b.pos.ledger, b.pos.entry, left, b.n, ErrPartialBatch)
		}
	}
	held := s.held
	s.held = nil
	a.mu.Unlock()
	slices.SortFunc(held, func(x, y ackReq) int {
		if c := cmp.Compare(x.pc.id, y.pc.id); c != 0 {
			return c
		}
		return x.pos.compare(y.pos)
	})
	held = slices.CompactFunc(held, func(x, y ackReq) bool { return x.pc == y.pc && x.pos == y.pos })
	for i := 0; i < len(held); {
		j := i + 1
		for j < len(held) && held[j].pc == held[i].pc {
			j++
		}
		var err error
		if r := t.Subscription(held[i].pc.topic, a.c.opts.Subscription); r != nil {
			err = r.Wait(ctx)
		}
		if err == nil {
			var sent bool
			if sent, err = a.sendAsync(t, s, held[i].pc, held[i:j]); sent {
				i = j
				continue
			}
		} else {
			err = fmt.Errorf("ack on %s in transaction %s: %w", held[i].pc.topic, t.ID(), err)
		}
		var alone []ackReq
		conflict := errors.Is(err, pulsarwire.ErrTransactionConflict)
		if conflict {
			alone = a.retryAlone(ctx, t, held[i].pc, held[i:j])
		}
		a.mu.Lock()
		switch {
		case conflict:
			// Those refused alone too are acknowledged for good or held by
			// another transaction: nothing to ask for again.
			s.sent = append(s.sent, alone...)
			s.held = append(s.held, held[j:]...)
		case err != nil:
			s.held = append(s.held, held[i:]...)
		default:
			s.sent = append(s.sent, held[i:j]...)
		}
		a.mu.Unlock()
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// aloneInFlight bounds the ACKs retryAlone has in flight at once.
const aloneInFlight = 16

// retryAlone acknowledges each entry of group alone in t, after the
// broker refused their ACK whole for a conflict (TransactionConflict:
// one of them acknowledged before, or held by another transaction), and
// returns those it took. Apache Pulsar takes every entry a refused ACK
// names off the consumer's unacknowledged ones, so that without this
// the others would be held by no transaction and at no consumer: not
// sent again by the abort that follows, nor when asked for by id, and
// lost until the subscription's cursor is read again (docs/reliability.md,
// "Exactly once"). Held by t, they come again when it aborts.
func (a *txnAcks) retryAlone(ctx context.Context, t *txn.Txn, pc *partConsumer, group []ackReq) []ackReq {
	if len(group) < 2 {
		return nil
	}
	took := make([]bool, len(group))
	slots := make(chan struct{}, aloneInFlight)
	var wg sync.WaitGroup
	for k := range group {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			err := a.send(ctx, t, pc, group[k:k+1])
			took[k] = err == nil
			if err != nil && !errors.Is(err, pulsarwire.ErrTransactionConflict) {
				a.c.log.Warn("an entry of an ACK refused for a conflict was not taken alone; it comes again only when the subscription is read again",
					"topic", pc.topic, "entry", group[k].pos.String(), "txn", t.ID(), "err", err)
			}
		}()
	}
	wg.Wait()
	var out []ackReq
	for k, ok := range took {
		if ok {
			out = append(out, group[k])
		}
	}
	return out
}

// sendAsync is flush's send of group (entries of pc, held by t's set s)
// without waiting: the ACK counts as an operation under way in t
// (Commit waits for it), and its answer is taken on the connection's
// reader, so that the commit's END_TXN can follow from there (Txn.Commit)
// without waking the committing goroutine in between. Answered, group
// joins s.sent; refused for a conflict, its entries are acknowledged
// alone in a goroutine of the consumer's (retryAlone blocks), as flush
// does; failed otherwise, it goes back to s.held, to come again when t
// aborts. false (with the error, nothing sent) when the ACK cannot go
// out: flush handles that as before.
func (a *txnAcks) sendAsync(t *txn.Txn, set *txnAckSet, pc *partConsumer, group []ackReq) (bool, error) {
	s, cmd, err := a.ackCommand(t, pc, group)
	if err != nil {
		return false, err
	}
	if err := t.StartFlush(); err != nil {
		return false, fmt.Errorf("ack %d entries on %s in transaction %s: %w", len(group), pc.topic, t.ID(), err)
	}
	// No answer by the transaction's deadline: its coordinator aborted it.
	wait := max(time.Until(t.Deadline()), time.Second)
	s.conn.RequestAsync(pulsarwire.Wrap(cmd), wait, func(_ *pb.BaseCommand, err error) {
		if err != nil {
			err = fmt.Errorf("ack %d entries on %s in transaction %s: %w", len(group), pc.topic, t.ID(), err)
		}
		if errors.Is(err, pulsarwire.ErrTransactionConflict) && len(group) > 1 {
			if a.c.spawn(func() {
				alone := a.retryAlone(a.c.ctx, t, pc, group)
				a.mu.Lock()
				set.sent = append(set.sent, alone...)
				a.mu.Unlock()
				t.Done(err)
			}) {
				return
			}
		}
		a.mu.Lock()
		switch {
		case err == nil:
			set.sent = append(set.sent, group...)
		case errors.Is(err, pulsarwire.ErrTransactionConflict):
			// Acknowledged for good or held by another transaction.
		default:
			set.held = append(set.held, group...)
		}
		a.mu.Unlock()
		t.Done(err)
	})
	return true, nil
}

// send sends one ACK of group (entries of pc) in transaction t and waits
// for the broker's answer.
func (a *txnAcks) send(ctx context.Context, t *txn.Txn, pc *partConsumer, group []ackReq) error {
	s, cmd, err := a.ackCommand(t, pc, group)
	if err != nil {
		return err
	}
	if _, err := s.conn.Request(ctx, pulsarwire.Wrap(cmd)); err != nil {
		return fmt.Errorf("ack %d entries on %s in transaction %s: %w", len(group), pc.topic, t.ID(), err)
	}
	return nil
}

// ackCommand is the ACK of group (entries of pc) in transaction t and the
// session to send it on; an error when it is not to be sent.
func (a *txnAcks) ackCommand(t *txn.Txn, pc *partConsumer, group []ackReq) (*session, *pb.CommandAck, error) {
	if !time.Now().Before(t.Deadline()) {
		// Its coordinator aborts it, or did. Not sent: Apache Pulsar holds
		// an acknowledgement in a transaction that already ended as
		// pending on the subscription (until its coordinator's low-water
		// mark clears it), so that the entries are never delivered again.
		return nil, nil, fmt.Errorf("ack on %s in transaction %s: %w", pc.topic, t.ID(), ErrTransactionPastTimeout)
	}
	s := pc.session()
	if s == nil {
		return nil, nil, fmt.Errorf("ack on %s in transaction %s: not connected: %w", pc.topic, t.ID(), pulsarwire.ErrConnectionClosed)
	}
	id := t.ID()
	cmd := &pb.CommandAck{
		ConsumerId:     proto.Uint64(pc.id),
		AckType:        pb.CommandAck_Individual.Enum(),
		TxnidMostBits:  proto.Uint64(id.Most),
		TxnidLeastBits: proto.Uint64(id.Least),
	}
	for _, r := range group {
		id := r.pos.wire()
		if r.n > 1 {
			// Apache Pulsar counts an entry acknowledged in a transaction
			// as batch_size messages off the consumer's unacknowledged
			// ones, as 1 without it: a Shared consumer would be stopped at
			// its unacknowledged limit (maxUnackedMessagesPerConsumer).
			id.BatchSize = proto.Int32(r.n)
		}
		cmd.MessageId = append(cmd.MessageId, id)
	}
	return s, cmd, nil
}

// ended forgets t. When it did not commit, what it acknowledged must come
// again: the broker sends again what it was told of (a failed commit may
// have reached it: the broker's own abort, at the latest when the
// timeout passes, sends those); the consumer asks for the entries it held
// back, and for the batches it acknowledged in part, whose messages are
// all delivered again.
func (a *txnAcks) ended(t *txn.Txn, committed bool) {
	a.mu.Lock()
	s := a.byTxn[t]
	delete(a.byTxn, t)
	a.mu.Unlock()
	if s == nil || committed {
		return
	}
	again := map[*partConsumer][]entryPos{}
	for _, r := range s.held {
		again[r.pc] = append(again[r.pc], r.pos)
	}
	for _, b := range s.batches {
		if b.left.Load() == 0 {
			continue // a whole entry, held or sent: counted above or the broker's
		}
		b.reset()
		b.again.Store(true)
		b.pc.partial.remove(b)
		again[b.pc] = append(again[b.pc], b.pos)
	}
	for pc, ids := range again {
		if a.c.opts.Type.SingleActive() {
			pc.redeliverAll()
			continue
		}
		slices.SortFunc(ids, entryPos.compare)
		pc.redeliver(slices.Compact(ids))
	}
}

// PartialInTxn is how many batch entries transaction t acknowledged only
// some messages of on the consumer: while it is not 0, a commit of t
// aborts instead (ErrPartialBatch), so a caller that settles a batch's
// messages one by one waits for the rest before committing.
func (c *Consumer) PartialInTxn(t *pool.Transaction) int {
	c.txnAcks.mu.Lock()
	defer c.txnAcks.mu.Unlock()
	s := c.txnAcks.byTxn[(*txn.Txn)(t)]
	if s == nil {
		return 0
	}
	n := 0
	for _, b := range s.batches {
		if b.left.Load() > 0 {
			n++
		}
	}
	return n
}

// InTxn reports whether a message of m's batch entry is acknowledged in
// transaction t: then m is to be acknowledged in t too, since the broker
// acknowledges an entry whole, in one transaction or none.
func (m *Message) InTxn(t *pool.Transaction) bool {
	b := m.acks
	return b != nil && t != nil && b.txn.Load() == (*txn.Txn)(t)
}
