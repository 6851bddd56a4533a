package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// State is where a transaction is in its life.
type State int32

const (
	// Open: sends and acknowledgements may join it.
	Open State = iota + 1
	// Committing and Aborting: Commit or Abort is under way.
	Committing
	Aborting
	// Committed and Aborted: its coordinator said so.
	Committed
	Aborted
	// Failed: ending it failed (its coordinator no longer knew it, it
	// could not be reached); what became of it is the broker's business:
	// a transaction nobody commits is aborted when its timeout passes.
	Failed
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case Committing:
		return "committing"
	case Aborting:
		return "aborting"
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

var (
	// ErrNotOpen is the error of sending, acknowledging or ending in a
	// transaction that is no longer open.
	ErrNotOpen = errors.New("transaction is not open")
	// ErrAborted is Commit's error when it aborted instead, because a
	// send or acknowledgement inside the transaction failed.
	ErrAborted = errors.New("transaction aborted instead of committed")
	// ErrOutcomeUnknown is Commit's error when END_TXN(COMMIT) was asked
	// and not answered with success: refused with TransactionNotFound
	// (the coordinator forgets a transaction once it ended, committed or
	// aborted, so a commit asked again after its answer was lost is
	// refused so too), or not answered at all. It may have committed.
	ErrOutcomeUnknown = errors.New("the commit's outcome is unknown: it may have committed")
)

// Txn is one transaction, from Begin to its end. Safe for concurrent use.
//
// Sends and acknowledgements inside it register their topic (partition)
// and subscription with its coordinator first, once each (Join,
// JoinSubscription), and are counted while under way (Start, Done):
// Commit waits for them all and aborts instead when one failed.
type Txn struct {
	c       *Coordinator
	id      pulsarwire.TxnID
	timeout time.Duration
	begun   time.Time
	series  *Series // the series that began it, told when it ends; nil for none

	state atomic.Int32

	mu         sync.Mutex
	partitions map[string]*Registration
	subs       map[subscription]*Registration
	ops        int           // sends and acknowledgements under way
	drained    chan struct{} // closed when ops drops to 0, while Commit waits
	onDrained  func()        // run by the Done that drops ops to 0, while Commit waits
	failed     error         // the first failure of an operation inside
	hooks      []Hooks
}

// Hooks are what the producers and consumers that joined a transaction
// do when it ends.
type Hooks struct {
	// Flush, run by Commit before it waits for the operations under way,
	// sends what was held back for the transaction (a producer's open
	// batch, a consumer's grouped acknowledgements) and returns what went
	// wrong, which aborts the transaction. Nil: nothing to flush.
	Flush func(ctx context.Context) error
	// Ended runs once the transaction ended: committed, or not (aborted,
	// failed, refused). Nil: nothing to do.
	Ended func(committed bool)
}

type subscription struct{ topic, name string }

func newTxn(c *Coordinator, id pulsarwire.TxnID, timeout time.Duration, begun time.Time) *Txn {
	t := &Txn{c: c, id: id, timeout: timeout, begun: begun,
		partitions: map[string]*Registration{}, subs: map[subscription]*Registration{}}
	t.state.Store(int32(Open))
	return t
}

// ID is the transaction's id.
func (t *Txn) ID() pulsarwire.TxnID { return t.id }

// State is where the transaction is. A transaction past its timeout reads
// Open until an operation finds out.
func (t *Txn) State() State { return State(t.state.Load()) }

// Deadline is when the broker aborts the transaction unless it ended.
func (t *Txn) Deadline() time.Time { return t.begun.Add(t.timeout) }

func (t *Txn) notOpen() error {
	return fmt.Errorf("transaction %s is %s: %w", t.id, t.State(), ErrNotOpen)
}

// Join makes topic (a partition, or a topic that is not partitioned)
// one the transaction publishes to. The first call starts telling its
// coordinator (ADD_PARTITION_TO_TXN) in the background and returns at
// once, as later calls do: the caller holds its SENDs until the returned
// registration is done, so that the registration overlaps the caller's
// other work (the subscription's registration, receiving) instead of
// costing a round trip of its own. first reports whether this call
// started it, so that the caller adds its hooks once. It fails when the
// transaction is not open, or its registration failed.
func (t *Txn) Join(topic string) (r *Registration, first bool, err error) {
	return join(t, t.partitions, topic, func() string { return "add " + topic + " to transaction " + t.id.String() }, func() proto.Message {
		return &pb.CommandAddPartitionToTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least), Partitions: []string{topic}}
	})
}

// JoinSubscription makes subscription sub of topic (a partition, or a
// topic that is not partitioned) one the transaction acknowledges on,
// as Join does for topics (ADD_SUBSCRIPTION_TO_TXN): the caller holds its
// ACKs until the registration is done.
func (t *Txn) JoinSubscription(topic, sub string) (r *Registration, first bool, err error) {
	return join(t, t.subs, subscription{topic, sub}, func() string { return "add subscription " + sub + " of " + topic + " to transaction " + t.id.String() }, func() proto.Message {
		return &pb.CommandAddSubscriptionToTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least),
			Subscription: []*pb.Subscription{{Topic: proto.String(topic), Subscription: proto.String(sub)}}}
	})
}

// Partition is the registration Join made for topic, nil if none.
func (t *Txn) Partition(topic string) *Registration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.partitions[topic]
}

// Subscription is the registration JoinSubscription made for sub of
// topic, nil if none.
func (t *Txn) Subscription(topic, sub string) *Registration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs[subscription{topic, sub}]
}

// join is Join's and JoinSubscription's. name describes the request for
// its errors; it is made only when needed, since every send and
// acknowledgement in a transaction comes here (building it each time was
// a few percent of an exactly_once pipeline's CPU).
func join[K comparable](t *Txn, m map[K]*Registration, key K, name func() string, build func() proto.Message) (*Registration, bool, error) {
	t.mu.Lock()
	if t.State() != Open {
		t.mu.Unlock()
		return nil, false, t.notOpen()
	}
	r := m[key]
	if r != nil {
		// Made ahead (Series) or by an earlier call: first is this call's
		// when no caller joined it before, so that its hooks are added.
		first := !r.joined
		r.joined = true
		t.mu.Unlock()
		if r.failed() {
			t.Fail(r.err)
			return nil, false, r.err
		}
		return r, first, nil
	}
	r = &Registration{done: make(chan struct{}), joined: true}
	m[key] = r
	t.mu.Unlock()
	t.registerAsync(name, build, r)
	if r.failed() {
		// The caller's send or acknowledgement fails without counting as
		// an operation: the commit must still abort (its answer may come
		// on the reader before this returns).
		t.Fail(r.err)
		return nil, false, r.err
	}
	return r, true, nil
}

// registerAsync is register without a goroutine of its own while the
// coordinator is connected: its first attempt is answered on the
// connection's reader, which finishes rs; a failure that may pass (a lost
// connection, no answer in time, "not now") leaves the retries to
// register, in a goroutine, as when the coordinator is not connected.
func (t *Txn) registerAsync(name func() string, build func() proto.Message, rs ...*Registration) {
	tc := t.id.Most
	if t.c.requestAsync(tc, build, func(_ *pb.BaseCommand, err error) {
		switch {
		case err == nil:
		case pulsarwire.Retryable(err):
			t.spawnRegister(name, build, rs)
			return
		default:
			err = attemptFailed(name(), tc, err)
		}
		for _, r := range rs {
			r.finish(err)
		}
	}) {
		return
	}
	t.spawnRegister(name, build, rs)
}

// spawnRegister runs register in a goroutine of the client's.
func (t *Txn) spawnRegister(name func() string, build func() proto.Message, rs []*Registration) {
	if !t.c.pool.Spawn(func() { t.register(name(), build, rs...) }) {
		err := fmt.Errorf("%s: %w", name(), errClientClosed)
		for _, r := range rs {
			r.finish(err)
		}
	}
}

// register asks the transaction's coordinator what build makes and
// finishes rs with the answer. The request runs under the client's
// retries until the transaction's deadline, past which its coordinator
// aborts it anyway; its failure is final for the transaction, whose
// commit then aborts (what waited for it fails).
func (t *Txn) register(name string, build func() proto.Message, rs ...*Registration) {
	pool := t.c.pool
	ctx, cancel := context.WithDeadline(pool.Context(), t.Deadline())
	defer cancel()
	_, err := t.c.request(ctx, t.id.Most, name, build)
	for _, r := range rs {
		r.finish(err)
	}
}

// errClientClosed is a registration's failure when the client is closing.
var errClientClosed = errors.New("the client is closing")

// Registration is a topic's or a subscription's registration with a
// transaction's coordinator, under way or done.
type Registration struct {
	done   chan struct{}
	err    error
	joined bool // a caller joined it (Join, JoinSubscription); under the Txn's mu
	mu     sync.Mutex
	after  []func(error) // run once done
}

// finish records the registration's outcome and runs what waits for it.
func (r *Registration) finish(err error) {
	r.mu.Lock()
	r.err = err
	close(r.done)
	after := r.after
	r.after = nil
	r.mu.Unlock()
	for _, f := range after {
		f(err)
	}
}

// Ready reports whether the registration is done, and its error then.
func (r *Registration) Ready() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

func (r *Registration) failed() bool {
	done, err := r.Ready()
	return done && err != nil
}

// Wait waits for the registration and returns its error.
func (r *Registration) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for a transaction's registration: %w", ctx.Err())
	}
}

// OnDone runs f with the registration's error once it is done: at once,
// in the caller, if it is; else in the goroutine that finishes it, which
// f must not hold up.
func (r *Registration) OnDone(f func(error)) {
	r.mu.Lock()
	select {
	case <-r.done:
		r.mu.Unlock()
		f(r.err)
		return
	default:
	}
	r.after = append(r.after, f)
	r.mu.Unlock()
}

// AddHooks adds what a producer or consumer that joined the transaction
// does when it ends. It fails when the transaction is no longer open:
// Commit and Abort take the hooks under t.mu after leaving Open, so hooks
// added later would never run.
func (t *Txn) AddHooks(h Hooks) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.State() != Open {
		return t.notOpen()
	}
	t.hooks = append(t.hooks, h)
	return nil
}

// Start counts one operation (a send, an acknowledgement) under way in
// the transaction; it fails when the transaction is not open. Every
// successful Start is matched by one Done.
func (t *Txn) Start() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.State() != Open {
		return t.notOpen()
	}
	t.ops++
	return nil
}

// StartFlush is Start for an operation a Flush hook sends, while its
// Commit runs: the transaction is committing, and Commit waits for it as
// for the others.
func (t *Txn) StartFlush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.State(); st != Open && st != Committing {
		return t.notOpen()
	}
	t.ops++
	return nil
}

// Done ends one operation Start counted; err is its failure, nil for
// success. A failure makes Commit abort instead.
func (t *Txn) Done(err error) {
	t.mu.Lock()
	if err != nil && t.failed == nil {
		t.failed = err
	}
	t.ops--
	var f func()
	if t.ops == 0 {
		if t.drained != nil {
			close(t.drained)
			t.drained = nil
		}
		f, t.onDrained = t.onDrained, nil
	}
	t.mu.Unlock()
	if f != nil {
		f()
	}
}

// Fail records a failure that makes Commit abort instead.
func (t *Txn) Fail(err error) {
	t.mu.Lock()
	if t.failed == nil {
		t.failed = err
	}
	t.mu.Unlock()
}

// Commit flushes what the producers and consumers hold back for the
// transaction, waits for every send and acknowledgement under way, and
// commits (END_TXN). If one of them failed it aborts instead and returns
// ErrAborted with that failure. If ctx ends while waiting, the
// transaction is open again.
func (t *Txn) Commit(ctx context.Context) error {
	if !t.state.CompareAndSwap(int32(Open), int32(Committing)) {
		return fmt.Errorf("commit: %w", t.notOpen())
	}
	if t.series != nil {
		t.series.ahead(t)
	}
	t.mu.Lock()
	hooks := append([]Hooks(nil), t.hooks...)
	t.mu.Unlock()
	for _, h := range hooks {
		if h.Flush != nil {
			if err := h.Flush(ctx); err != nil {
				t.Fail(err)
			}
		}
	}
	// END_TXN goes out from whichever goroutine answers the last send or
	// acknowledgement (the connection's reader, mostly), and its answer
	// comes back there: the caller wakes once, for the outcome, instead of
	// once for the sends' answers and once for END_TXN's, and no
	// goroutine has to be scheduled between the two round trips.
	e := &ending{done: make(chan struct{})}
	t.mu.Lock()
	if t.ops > 0 {
		t.onDrained = func() { t.endAsync(e) }
		t.mu.Unlock()
	} else {
		t.mu.Unlock()
		t.endAsync(e)
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		t.mu.Lock()
		waiting := t.onDrained != nil
		t.onDrained = nil
		t.mu.Unlock()
		if waiting {
			t.state.Store(int32(Open))
			return fmt.Errorf("commit transaction %s: waiting for its sends and acknowledgements: %w", t.id, ctx.Err())
		}
		if !e.abandon() {
			break // answered meanwhile
		}
		// END_TXN is on its way, or about to be: as when ctx ends during
		// end's request.
		return t.ended(pb.TxnAction_COMMIT, fmt.Errorf("commit transaction %s: %w", t.id, ctx.Err()))
	}
	if !e.slow {
		return t.ended(pb.TxnAction_COMMIT, e.err)
	}
	if err := t.waitOps(ctx); err != nil {
		t.state.Store(int32(Open))
		return fmt.Errorf("commit transaction %s: waiting for its sends and acknowledgements: %w", t.id, err)
	}
	t.mu.Lock()
	failed := t.failed
	t.mu.Unlock()
	if failed != nil {
		t.state.Store(int32(Aborting))
		if err := t.end(ctx, pb.TxnAction_ABORT); err != nil {
			return fmt.Errorf("commit transaction %s: %w (%w), and the abort failed: %w", t.id, ErrAborted, failed, err)
		}
		return fmt.Errorf("commit transaction %s: %w: %w", t.id, ErrAborted, failed)
	}
	return t.end(ctx, pb.TxnAction_COMMIT)
}

// Abort aborts the transaction (END_TXN): what it published is never
// delivered, what it acknowledged comes again. It does not wait for the
// sends under way; what they store goes into the aborted transaction.
func (t *Txn) Abort(ctx context.Context) error {
	if !t.state.CompareAndSwap(int32(Open), int32(Aborting)) {
		return fmt.Errorf("abort: %w", t.notOpen())
	}
	if t.series != nil {
		t.series.ahead(t)
	}
	return t.end(ctx, pb.TxnAction_ABORT)
}

func (t *Txn) waitOps(ctx context.Context) error {
	t.mu.Lock()
	if t.ops == 0 {
		t.mu.Unlock()
		return nil
	}
	if t.drained == nil {
		t.drained = make(chan struct{})
	}
	ch := t.drained
	t.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ending is a commit's END_TXN sent without waiting (endAsync).
type ending struct {
	done chan struct{} // closed once err or slow is set
	err  error         // END_TXN's outcome
	slow bool          // not sent, or its attempt failed in a way worth retrying: Commit carries on as before
	once sync.Once
}

// set records the outcome, once; false when it was set (or abandoned)
// before.
func (e *ending) set(err error, slow bool) bool {
	ok := false
	e.once.Do(func() {
		e.err, e.slow, ok = err, slow, true
		close(e.done)
	})
	return ok
}

// abandon makes a later outcome go unheard; false when it came first.
func (e *ending) abandon() bool { return e.set(nil, false) }

// endAsync commits with END_TXN once every send and acknowledgement was
// answered, without waiting: e gets the outcome. Left to Commit's own
// path (e.slow) when one of them failed (the transaction aborts), when
// the coordinator is not connected, or when the attempt failed in a way
// a retry may mend.
func (t *Txn) endAsync(e *ending) {
	t.mu.Lock()
	failed := t.failed
	t.mu.Unlock()
	if failed != nil {
		e.set(nil, true)
		return
	}
	tc := t.id.Most
	if !t.c.requestAsync(tc, endCommand(t.id, pb.TxnAction_COMMIT), func(_ *pb.BaseCommand, err error) {
		switch {
		case err == nil:
		case pulsarwire.Retryable(err):
			e.set(nil, true)
			return
		default:
			err = attemptFailed("commit transaction "+t.id.String(), tc, err)
		}
		e.set(err, false)
	}) {
		e.set(nil, true)
	}
}

func endCommand(id pulsarwire.TxnID, action pb.TxnAction) func() proto.Message {
	return func() proto.Message {
		return &pb.CommandEndTxn{TxnidMostBits: proto.Uint64(id.Most), TxnidLeastBits: proto.Uint64(id.Least), TxnAction: action.Enum()}
	}
}

// end sends END_TXN with action and sets the state from the answer;
// then the hooks hear how it ended.
func (t *Txn) end(ctx context.Context, action pb.TxnAction) error {
	verb := "commit"
	if action == pb.TxnAction_ABORT {
		verb = "abort"
	}
	_, err := t.c.request(ctx, t.id.Most, verb+" transaction "+t.id.String(), endCommand(t.id, action))
	return t.ended(action, err)
}

// ended sets the state from END_TXN's outcome err and tells the hooks.
func (t *Txn) ended(action pb.TxnAction, err error) error {
	switch {
	case err != nil:
		t.state.Store(int32(Failed))
		if action == pb.TxnAction_COMMIT {
			err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
	case action == pb.TxnAction_COMMIT:
		t.state.Store(int32(Committed))
	default:
		t.state.Store(int32(Aborted))
	}
	committed := err == nil && action == pb.TxnAction_COMMIT
	t.mu.Lock()
	hooks := t.hooks
	t.hooks = nil
	t.mu.Unlock()
	for _, h := range hooks {
		if h.Ended != nil {
			h.Ended(committed)
		}
	}
	return err
}
