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
)

// Txn is one transaction, from Begin to its end. Safe for concurrent use.
//
// Sends and acknowledgements inside it register their topic (partition)
// and subscription with its coordinator first, once each (Register,
// RegisterSubscription), and are counted while under way (Start, Done):
// Commit waits for them all and aborts instead when one failed.
type Txn struct {
	c       *Coordinator
	id      pulsarwire.TxnID
	timeout time.Duration
	begun   time.Time

	state atomic.Int32

	mu         sync.Mutex
	partitions map[string]*registration
	subs       map[subscription]*registration
	ops        int           // sends and acknowledgements under way
	drained    chan struct{} // closed when ops drops to 0, while Commit waits
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

type registration struct {
	done chan struct{}
	err  error
}

type subscription struct{ topic, name string }

func newTxn(c *Coordinator, id pulsarwire.TxnID, timeout time.Duration, begun time.Time) *Txn {
	t := &Txn{c: c, id: id, timeout: timeout, begun: begun,
		partitions: map[string]*registration{}, subs: map[subscription]*registration{}}
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

// Register makes topic (a partition, or a topic that is not partitioned)
// one the transaction publishes to, telling its coordinator the first
// time (ADD_PARTITION_TO_TXN); later calls wait for that first one.
// first reports whether this call registered it, so that the caller adds
// its hooks once.
func (t *Txn) Register(ctx context.Context, topic string) (first bool, err error) {
	return register(ctx, t, t.partitions, topic, func() string { return "add " + topic + " to transaction " + t.id.String() }, func() proto.Message {
		return &pb.CommandAddPartitionToTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least), Partitions: []string{topic}}
	})
}

// RegisterSubscription makes subscription sub of topic (a partition, or
// a topic that is not partitioned) one the transaction acknowledges on,
// as Register does for topics (ADD_SUBSCRIPTION_TO_TXN).
func (t *Txn) RegisterSubscription(ctx context.Context, topic, sub string) (first bool, err error) {
	return register(ctx, t, t.subs, subscription{topic, sub}, func() string { return "add subscription " + sub + " of " + topic + " to transaction " + t.id.String() }, func() proto.Message {
		return &pb.CommandAddSubscriptionToTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least),
			Subscription: []*pb.Subscription{{Topic: proto.String(topic), Subscription: proto.String(sub)}}}
	})
}

// register is Register's and RegisterSubscription's. name describes the
// request for its errors; it is made only when needed, since every send
// and acknowledgement in a transaction comes here (building it each time
// was a few percent of an exactly_once pipeline's CPU).
func register[K comparable](ctx context.Context, t *Txn, m map[K]*registration, key K, name func() string, build func() proto.Message) (bool, error) {
	t.mu.Lock()
	if t.State() != Open {
		t.mu.Unlock()
		return false, t.notOpen()
	}
	r := m[key]
	if r == nil {
		r = &registration{done: make(chan struct{})}
		m[key] = r
		t.mu.Unlock()
		_, r.err = t.c.request(ctx, t.id.Most, name(), build)
		if r.err != nil {
			t.mu.Lock()
			delete(m, key) // the next caller tries again
			t.mu.Unlock()
		}
		close(r.done)
		return r.err == nil, r.err
	}
	t.mu.Unlock()
	select {
	case <-r.done:
		return false, r.err
	case <-ctx.Done():
		return false, fmt.Errorf("%s: %w", name(), ctx.Err())
	}
}

// AddHooks adds what a producer or consumer that joined the transaction
// does when it ends.
func (t *Txn) AddHooks(h Hooks) {
	t.mu.Lock()
	t.hooks = append(t.hooks, h)
	t.mu.Unlock()
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

// Done ends one operation Start counted; err is its failure, nil for
// success. A failure makes Commit abort instead.
func (t *Txn) Done(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil && t.failed == nil {
		t.failed = err
	}
	t.ops--
	if t.ops == 0 && t.drained != nil {
		close(t.drained)
		t.drained = nil
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

// end sends END_TXN with action and sets the state from the answer;
// then the hooks hear how it ended.
func (t *Txn) end(ctx context.Context, action pb.TxnAction) error {
	verb := "commit"
	if action == pb.TxnAction_ABORT {
		verb = "abort"
	}
	_, err := t.c.request(ctx, t.id.Most, verb+" transaction "+t.id.String(), func() proto.Message {
		return &pb.CommandEndTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least), TxnAction: action.Enum()}
	})
	switch {
	case err != nil:
		t.state.Store(int32(Failed))
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
