package txn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// ErrSeriesClosed is Series.Begin's error once the series is closed.
var ErrSeriesClosed = errors.New("the transaction series is closed")

// Series begins transactions for a caller that runs them one after
// another, each begun once the one before is ending: as soon as a
// transaction of the series leaves Open (Commit or Abort called), the
// series begins the next one, its spare, in the background, and
// registers it with the topics and subscriptions the ending one had, so
// that NEW_TXN and the registrations overlap the END_TXN instead of
// following it. Begin hands out the spare.
//
// The cost of the head start: the spare's timeout runs from its own
// NEW_TXN, a little before Begin returns it (Deadline says when), and a
// spare registered with a topic or subscription it then does not use
// ends there too (Apache Pulsar writes its commit or abort marker into
// such a topic). Begin hands out no spare older than a tenth of the
// timeout; it aborts it and begins a fresh one.
type Series struct {
	c       *Coordinator
	timeout time.Duration

	mu     sync.Mutex
	spare  *spare
	closed bool
}

// spare is a transaction begun ahead.
type spare struct {
	ready chan struct{} // closed once its NEW_TXN is answered
	t     *Txn          // then: the transaction, or nil and
	err   error         // why not
}

// NewSeries returns a series whose transactions have timeout.
func (c *Coordinator) NewSeries(timeout time.Duration) (*Series, error) {
	if timeout < time.Millisecond {
		return nil, fmt.Errorf("transaction series: timeout %v is under a millisecond", timeout)
	}
	return &Series{c: c, timeout: timeout}, nil
}

// maxSpareAge is how old a spare Begin hands out may be.
func (s *Series) maxSpareAge() time.Duration { return s.timeout / 10 }

// Begin returns the spare the series began ahead, waiting for its
// NEW_TXN if it is still under way, or begins a transaction now when
// there is none (the first, or one begun while the one before is still
// open), when the spare failed, or when it is older than a tenth of the
// timeout (it is aborted).
func (s *Series) Begin(ctx context.Context) (*Txn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("begin a transaction: %w", ErrSeriesClosed)
	}
	sp := s.spare
	s.spare = nil
	s.mu.Unlock()
	if sp != nil {
		select {
		case <-sp.ready:
		case <-ctx.Done():
			s.putBack(sp)
			return nil, fmt.Errorf("begin a transaction: %w", ctx.Err())
		}
		if t := sp.t; t != nil {
			if time.Since(t.begun) <= s.maxSpareAge() {
				return t, nil
			}
			s.discard(t)
		}
	}
	t, err := s.c.Begin(ctx, s.timeout)
	if err != nil {
		return nil, err
	}
	t.series = s
	return t, nil
}

// putBack makes sp the spare again after Begin gave up waiting for it,
// unless the series has another by now or closed (then it is discarded
// once begun).
func (s *Series) putBack(sp *spare) {
	s.mu.Lock()
	if !s.closed && s.spare == nil {
		s.spare = sp
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.c.pool.Spawn(func() {
		select {
		case <-sp.ready:
			if sp.t != nil {
				s.abort(s.c.pool.Context(), sp.t)
			}
		case <-s.c.pool.Done():
		}
	})
}

// discard aborts a spare nobody will use, in the background.
func (s *Series) discard(t *Txn) {
	s.c.pool.Spawn(func() { s.abort(s.c.pool.Context(), t) })
}

// abort aborts t, a spare, without beginning another.
func (s *Series) abort(ctx context.Context, t *Txn) error {
	t.series = nil
	return t.Abort(ctx)
}

// Close ends the series: a spare is aborted (waiting, while ctx allows,
// for its NEW_TXN); transactions handed out are the caller's. Begin
// fails afterwards with ErrSeriesClosed.
func (s *Series) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	sp := s.spare
	s.spare = nil
	s.mu.Unlock()
	if sp == nil {
		return nil
	}
	select {
	case <-sp.ready:
	case <-ctx.Done():
		return fmt.Errorf("close the transaction series: waiting for its spare transaction: %w", ctx.Err())
	}
	if sp.t == nil {
		return nil
	}
	if err := s.abort(ctx, sp.t); err != nil {
		return fmt.Errorf("close the transaction series: abort its spare transaction: %w", err)
	}
	return nil
}

// ahead begins the spare, unless there is one or the series is closed,
// registered with what prev (a transaction of the series that just left
// Open) registered.
func (s *Series) ahead(prev *Txn) {
	s.mu.Lock()
	if s.closed || s.spare != nil {
		s.mu.Unlock()
		return
	}
	sp := &spare{ready: make(chan struct{})}
	s.spare = sp
	s.mu.Unlock()
	// prev left Open: no registration joins it any more (join checks
	// under prev.mu).
	prev.mu.Lock()
	parts := make([]string, 0, len(prev.partitions))
	for p := range prev.partitions {
		parts = append(parts, p)
	}
	subs := make([]subscription, 0, len(prev.subs))
	for k := range prev.subs {
		subs = append(subs, k)
	}
	prev.mu.Unlock()
	// Begun without a goroutine while the coordinator is connected: its
	// answer, and then the registrations', are taken on the connection's
	// reader (Coordinator.requestAsync); else, or when that attempt
	// fails, begin waits for them, under the client's retries.
	if s.c.beginAsync(s.timeout, func(t *Txn, err error) {
		if err != nil {
			s.spawnBegin(sp, parts, subs)
			return
		}
		s.prepare(sp, t, parts, subs)
	}) {
		return
	}
	s.spawnBegin(sp, parts, subs)
}

// spawnBegin runs begin in a goroutine of the client's.
func (s *Series) spawnBegin(sp *spare, parts []string, subs []subscription) {
	if !s.c.pool.Spawn(func() { s.begin(sp, parts, subs) }) {
		sp.err = fmt.Errorf("begin a transaction: %w", errClientClosed)
		close(sp.ready)
	}
}

// begin begins sp and registers it with parts and subs (prepare).
func (s *Series) begin(sp *spare, parts []string, subs []subscription) {
	t, err := s.c.Begin(s.c.pool.Context(), s.timeout)
	if err != nil {
		sp.err = err
		close(sp.ready)
		return
	}
	s.prepare(sp, t, parts, subs)
}

// prepare makes t, just begun, sp's transaction and registers it with
// parts and subs, each kind in one request, the two at once. sp is ready
// as soon as it has t: a caller's sends and acknowledgements wait for
// the registrations as they do for their own.
func (s *Series) prepare(sp *spare, t *Txn, parts []string, subs []subscription) {
	t.series = s
	pr := make([]*Registration, len(parts))
	for i, p := range parts {
		pr[i] = &Registration{done: make(chan struct{})}
		t.partitions[p] = pr[i]
	}
	sr := make([]*Registration, len(subs))
	for i, k := range subs {
		sr[i] = &Registration{done: make(chan struct{})}
		t.subs[k] = sr[i]
	}
	sp.t = t
	close(sp.ready)
	// The names are made only for an error or a retry (Sprintf on every
	// transaction cost a stack growth of the goroutine that ran it).
	if len(subs) > 0 {
		ps := make([]*pb.Subscription, len(subs))
		for i, k := range subs {
			ps[i] = &pb.Subscription{Topic: proto.String(k.topic), Subscription: proto.String(k.name)}
		}
		t.registerAsync(func() string {
			return "add " + strconv.Itoa(len(subs)) + " subscriptions to transaction " + t.id.String()
		}, func() proto.Message {
			return &pb.CommandAddSubscriptionToTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least), Subscription: ps}
		}, sr...)
	}
	if len(parts) > 0 {
		t.registerAsync(func() string {
			return "add " + strconv.Itoa(len(parts)) + " topics to transaction " + t.id.String()
		}, func() proto.Message {
			return &pb.CommandAddPartitionToTxn{TxnidMostBits: proto.Uint64(t.id.Most), TxnidLeastBits: proto.Uint64(t.id.Least), Partitions: parts}
		}, pr...)
	}
}
