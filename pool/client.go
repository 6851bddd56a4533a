package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/internal/txn"
)

// Client is a connection pool to one Pulsar cluster and the producers on
// it. It keeps one connection per broker address, shared by every
// producer, consumer and lookup; one producer per topic, shared by every
// publisher. Its methods are safe for concurrent use.
//
// Client is defined on the module's internal connection pool, so that
// package subscribe reaches the connections by a type conversion while
// the wire stays out of this package's API.
type Client connpool.Pool

// state is what a Client holds beyond its connections: the options and
// the producers. The connection pool keeps it as its owner.
type state struct {
	pool *connpool.Pool
	opts Options
	log  *slog.Logger

	memory     *limiter
	producerID atomic.Uint64
	closing    atomic.Bool
	watchOnce  sync.Once
	txns       *txn.Coordinator

	mu        sync.Mutex
	producers map[string]*producerSlot // by full topic name
	byName    sync.Map                 // topic as the caller spelled it -> *Producer
}

// conns is c's connection pool.
func (c *Client) conns() *connpool.Pool { return (*connpool.Pool)(c) }

// own is c's state.
func (c *Client) own() *state { return c.conns().Owner().(*state) }

// New returns a Client for opts. It connects to the service URL before
// returning, under OperationRetries (by default it keeps trying, 5 s
// apart, while ctx allows), so that a wrong URL, TLS setting or token
// shows at once.
func New(ctx context.Context, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	svc, err := connpool.ParseServiceURL(opts.ServiceURL)
	if err != nil {
		return nil, err
	}
	if _, err := opts.Producer.Compression.wire(); err != nil {
		return nil, err
	}
	if err := opts.Producer.AccessMode.check(); err != nil {
		return nil, fmt.Errorf("pool: Producer.AccessMode: %w", err)
	}
	cfg := connpool.Config{
		Service:           svc,
		Dial:              opts.Dial,
		Log:               opts.Logger,
		ConnectionTimeout: opts.ConnectionTimeout,
		KeepAliveInterval: opts.KeepAliveInterval,
		Closed:            ErrClosed,
		ConnectError: func(addr string, err error) error {
			return &ConnectError{Addr: addr, Err: err, Advertised: !slices.Contains(svc.Hosts, addr)}
		},
		Retryable: Retryable,
	}
	// Built even for pulsar:// in case a lookup names a TLS listener.
	if cfg.TLS, err = opts.TLS.tlsConfig(); err != nil {
		return nil, err
	}
	if cfg.Token, err = tokenSource(opts.Token); err != nil {
		return nil, err
	}
	if cfg.Dial == nil {
		d := &net.Dialer{KeepAlive: -1}
		cfg.Dial = d.DialContext
	}
	s := &state{
		opts:      opts,
		log:       opts.Logger,
		memory:    newLimiter(opts.MemoryLimit),
		producers: map[string]*producerSlot{},
	}
	cfg.Owner = s
	s.pool = connpool.New(cfg)
	s.txns = txn.NewCoordinator(s.pool, s.retry, opts.OperationRetries.Timeout)
	c := (*Client)(s.pool)
	err = s.retry(ctx, "connect to "+opts.ServiceURL, func(ctx context.Context) error {
		_, err := s.pool.ServiceConn(ctx)
		return err
	})
	if err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// MaxMessageSize is the max_message_size that a broker of the service URL
// announced when the client connected to it (brokers of one cluster share
// the setting).
func (c *Client) MaxMessageSize(ctx context.Context) (int, error) {
	conn, err := c.conns().ServiceConn(ctx)
	if err != nil {
		return 0, err
	}
	return conn.MaxMessageSize(), nil
}

// ServerVersion is the version a broker of the service URL gave when the
// client connected to it (its CONNECTED's server_version, such as
// "Pulsar Server4.0.8").
func (c *Client) ServerVersion(ctx context.Context) (string, error) {
	conn, err := c.conns().ServiceConn(ctx)
	if err != nil {
		return "", err
	}
	return conn.ServerVersion(), nil
}

// Options returns the client's options with every default filled in.
func (c *Client) Options() Options { return c.own().opts }

// RetryWith runs op under r (see OperationRetries.Do; zero fields take
// the defaults), and also stops, with ErrClosed, when the client closes.
// name says what op does, for errors and logs; Options.OnRetry is told
// of each retry.
func (c *Client) RetryWith(ctx context.Context, r OperationRetries, name string, op func(ctx context.Context) error) error {
	return c.own().retryWith(ctx, r, name, op)
}

// retry runs op under the client's OperationRetries (see RetryWith).
func (c *state) retry(ctx context.Context, name string, op func(ctx context.Context) error) error {
	return c.retryWith(ctx, c.opts.OperationRetries, name, op)
}

func (c *state) retryWith(ctx context.Context, r OperationRetries, name string, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.pool.Context(), func() { cancel(ErrClosed) })
	defer stop()
	return r.withDefaults().do(ctx, name, op, c.log, retryHooks{c.opts.OnRetry, c.opts.OnRetryEnd})
}

// Close flushes every producer and waits, while ctx allows, for the
// broker to acknowledge what was published; then it closes the producers
// and connections and stops every goroutine of the client. Messages still
// unacknowledged when ctx ends fail with ErrClosed, and Close returns
// ctx's error. Publishing after Close began fails with ErrClosed.
func (c *Client) Close(ctx context.Context) error {
	s := c.own()
	if s.closing.Swap(true) {
		s.pool.Wait()
		return nil
	}
	var err error
	producers := s.allProducers()
	if p, e := flushAll(ctx, producers); e != nil {
		err = fmt.Errorf("close: flush %s: %w", p.topic, e)
	}
	closeOnBroker(ctx, producers)
	s.pool.Shutdown(func() {
		for _, p := range producers {
			p.shutdown(ErrClosed)
		}
	})
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	return err
}
