// Package txn is the client's side of Pulsar transactions: the sessions
// with the transaction coordinators (Coordinator) and one transaction's
// state (Txn). Package pool shows a Txn as pool.Transaction (type
// Transaction txn.Txn) and publishes inside it; package subscribe
// acknowledges inside it through the same conversion, as it reaches a
// client's connections.
//
// The protocol, as Apache Pulsar serves it: the partitions of
// pulsarwire.TxnCoordinatorTopic name the coordinators (none: transactions
// are off); the owner of partition i serves coordinator i, after a
// TC_CLIENT_CONNECT_REQUEST for it. NEW_TXN at coordinator i begins a
// transaction whose id has i as its most significant half; before a
// transaction's first SEND to a topic (partition) or first ACK on a
// subscription, ADD_PARTITION_TO_TXN or ADD_SUBSCRIPTION_TO_TXN tells its
// coordinator, which ends the transaction there when END_TXN commits or
// aborts it.
package txn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// ErrOff is the error of beginning a transaction on a broker with
// transactions off: it has no coordinator.
var ErrOff = errors.New("transactions are off on the broker: it has no transaction coordinator")

// Retry runs op until it succeeds, fails for good or the retries run
// out; name says what op does. It is the client's retry policy.
type Retry func(ctx context.Context, name string, op func(ctx context.Context) error) error

// Coordinator is a client's link to the transaction coordinators: how
// many there are, and a connection to each on which it said
// TC_CLIENT_CONNECT_REQUEST. Safe for concurrent use.
type Coordinator struct {
	pool    *connpool.Pool
	retry   Retry
	attempt time.Duration // bounds one attempt of a request sent without waiting
	next    atomic.Uint64 // round robin over the coordinators

	mu    sync.Mutex
	count int              // coordinators; 0 until known
	conns []*connpool.Conn // by coordinator; nil until connected
}

// NewCoordinator returns the coordinator link of the client whose
// connections are p. It connects to nothing until the first Begin.
// attempt bounds one try of a request (the client's retry timeout): a
// request sent without waiting (requestAsync) that gets no answer in it
// is left to retry's tries.
func NewCoordinator(p *connpool.Pool, retry Retry, attempt time.Duration) *Coordinator {
	if attempt <= 0 {
		attempt = 30 * time.Second
	}
	return &Coordinator{pool: p, retry: retry, attempt: attempt}
}

// Begin begins a transaction at the next coordinator, round robin. The
// broker aborts it once timeout has passed since it began unless it
// ended before; timeout goes to the broker in milliseconds.
func (c *Coordinator) Begin(ctx context.Context, timeout time.Duration) (*Txn, error) {
	if timeout < time.Millisecond {
		return nil, fmt.Errorf("begin a transaction: timeout %v is under a millisecond", timeout)
	}
	n, err := c.coordinators(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin a transaction: %w", err)
	}
	tc := c.next.Add(1) % uint64(n)
	begun := time.Now()
	resp, err := c.request(ctx, tc, "begin a transaction", newTxnCommand(tc, timeout))
	if err != nil {
		return nil, err
	}
	return c.newTxn(tc, resp, timeout, begun)
}

// newTxn is the transaction coordinator tc's answer to NEW_TXN began.
func (c *Coordinator) newTxn(tc uint64, resp *pb.BaseCommand, timeout time.Duration, begun time.Time) (*Txn, error) {
	r := resp.GetNewTxnResponse()
	if r == nil {
		return nil, fmt.Errorf("begin a transaction: coordinator %d answered %s: %w", tc, resp.GetType(), pulsarwire.ErrCorrupt)
	}
	return newTxn(c, pulsarwire.TxnID{Most: r.GetTxnidMostBits(), Least: r.GetTxnidLeastBits()}, timeout, begun), nil
}

func newTxnCommand(tc uint64, timeout time.Duration) func() proto.Message {
	return func() proto.Message {
		return &pb.CommandNewTxn{TxnTtlSeconds: proto.Uint64(uint64(timeout.Milliseconds())), TcId: proto.Uint64(tc)}
	}
}

// beginAsync is Begin without waiting, for a Series: done gets the
// transaction or the error of the one attempt, on the connection's reader
// goroutine (see requestAsync). false, and nothing sent, when the
// coordinators are not known or the next one is not connected yet: then
// Begin, in a goroutine, is the way.
func (c *Coordinator) beginAsync(timeout time.Duration, done func(*Txn, error)) bool {
	c.mu.Lock()
	n := c.count
	c.mu.Unlock()
	if n == 0 {
		return false
	}
	tc := c.next.Add(1) % uint64(n)
	begun := time.Now()
	return c.requestAsync(tc, newTxnCommand(tc, timeout), func(resp *pb.BaseCommand, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(c.newTxn(tc, resp, timeout, begun))
	})
}

// coordinators returns how many coordinators there are, asking the
// broker the first time: the partitions of the coordinators' topic.
func (c *Coordinator) coordinators(ctx context.Context) (int, error) {
	c.mu.Lock()
	n := c.count
	c.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	err := c.retry(ctx, "find the transaction coordinators", func(ctx context.Context) error {
		var err error
		n, err = c.pool.PartitionedTopicMetadata(ctx, pulsarwire.TxnCoordinatorTopic)
		return err
	})
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, ErrOff
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count == 0 {
		c.count = n
		c.conns = make([]*connpool.Conn, n)
	}
	return c.count, nil
}

// Connect connects to each coordinator not connected yet
// (TC_CLIENT_CONNECT_REQUEST), under the client's retries. Apache Pulsar
// loads a coordinator, and with it the timeouts of the transactions it
// has open, only when a client connects to it: after a broker restart, a
// transaction begun before it stays open on its topics until then, and
// nothing written to them after its first entry can be read.
func (c *Coordinator) Connect(ctx context.Context) error {
	n, err := c.coordinators(ctx)
	if err != nil {
		return err
	}
	for tc := range uint64(n) {
		err := c.retry(ctx, fmt.Sprintf("connect to transaction coordinator %d", tc), func(ctx context.Context) error {
			_, err := c.conn(ctx, tc)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// conn returns the connection to coordinator tc, looking it up and
// connecting (TC_CLIENT_CONNECT_REQUEST) when there is none yet or the
// last one closed. One attempt.
func (c *Coordinator) conn(ctx context.Context, tc uint64) (*connpool.Conn, error) {
	c.mu.Lock()
	if tc >= uint64(len(c.conns)) {
		c.mu.Unlock()
		return nil, fmt.Errorf("transaction coordinator %d: there are %d", tc, len(c.conns))
	}
	if conn := c.conns[tc]; conn != nil && !conn.Closed() {
		c.mu.Unlock()
		return conn, nil
	}
	c.mu.Unlock()
	topic := pulsarwire.TxnCoordinatorTopic + pulsarwire.PartitionSuffix + strconv.FormatUint(tc, 10)
	conn, err := c.pool.Conn(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("transaction coordinator %d: %w", tc, err)
	}
	if _, err := conn.Request(ctx, pulsarwire.Wrap(&pb.CommandTcClientConnectRequest{TcId: proto.Uint64(tc)})); err != nil {
		return nil, fmt.Errorf("connect to transaction coordinator %d on %s: %w", tc, conn.Host(), err)
	}
	c.mu.Lock()
	c.conns[tc] = conn
	c.mu.Unlock()
	return conn, nil
}

// forget drops the connection to coordinator tc if it is still conn, so
// that the next request looks the coordinator up again.
func (c *Coordinator) forget(tc uint64, conn *connpool.Conn) {
	c.mu.Lock()
	if tc < uint64(len(c.conns)) && c.conns[tc] == conn {
		c.conns[tc] = nil
	}
	c.mu.Unlock()
}

// request sends the command build makes (a fresh one each attempt) to
// coordinator tc and returns the answer, under the client's retries: a
// lost connection, or a coordinator that is not (or no longer) there
// ("not now" codes), is looked up again.
func (c *Coordinator) request(ctx context.Context, tc uint64, name string, build func() proto.Message) (*pb.BaseCommand, error) {
	var resp *pb.BaseCommand
	err := c.retry(ctx, name, func(ctx context.Context) error {
		conn, err := c.conn(ctx, tc)
		if err != nil {
			return err
		}
		r, err := conn.Request(ctx, pulsarwire.Wrap(build()))
		if err != nil {
			if pulsarwire.Retryable(err) {
				c.forget(tc, conn)
			}
			return fmt.Errorf("%s at transaction coordinator %d: %w", name, tc, err)
		}
		resp = r
		return nil
	})
	return resp, err
}

// requestAsync sends the command build makes to coordinator tc, when it
// is connected, without waiting: done gets the answer or the error of
// this one attempt, on the connection's reader goroutine (on the
// caller's when sending failed at once) and must not block. It is
// request's first attempt without the goroutine that waits for it: a
// transaction's requests are answered in the reader, with no wake-up of
// a goroutine of their own. false, and nothing sent, when tc is not
// connected (request connects).
func (c *Coordinator) requestAsync(tc uint64, build func() proto.Message, done func(*pb.BaseCommand, error)) bool {
	c.mu.Lock()
	var conn *connpool.Conn
	if tc < uint64(len(c.conns)) {
		conn = c.conns[tc]
	}
	c.mu.Unlock()
	if conn == nil || conn.Closed() {
		return false
	}
	conn.RequestAsync(pulsarwire.Wrap(build()), c.attempt, func(resp *pb.BaseCommand, err error) {
		if err != nil && pulsarwire.Retryable(err) {
			c.forget(tc, conn)
		}
		done(resp, err)
	})
	return true
}

// attemptFailed is what request returns when its one attempt failed
// with err, which is not retryable: the same words, so that a request
// made without waiting fails as one that waited.
func attemptFailed(name string, tc uint64, err error) error {
	return fmt.Errorf("%s: %s at transaction coordinator %d: %w", name, name, tc, err)
}
