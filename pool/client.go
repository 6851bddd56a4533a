package pool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
)

// Client is a connection pool to one Pulsar cluster and the producers on
// it. It keeps one connection per broker address, shared by every
// producer, consumer and lookup; one producer per topic, shared by every
// publisher. Its methods are safe for concurrent use.
type Client struct {
	opts    Options
	svc     serviceURL
	tls     *tls.Config
	token   func() (string, error)
	log     *slog.Logger
	dialTCP func(ctx context.Context, network, address string) (net.Conn, error)

	ctx    context.Context // cancelled, with cause ErrClosed, by Close
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // every goroutine of the client

	requestID  atomic.Uint64
	producerID atomic.Uint64
	consumerID atomic.Uint64
	svcIndex   atomic.Uint32

	memory    *limiter
	connStats connStats

	closing   atomic.Bool
	watchOnce sync.Once

	mu        sync.Mutex
	conns     map[connKey]*connSlot
	producers map[string]*producerSlot // by full topic name
	byName    sync.Map                 // topic as the caller spelled it -> *Producer
}

type connSlot struct {
	ready chan struct{} // closed once dialing ended
	conn  *Conn
	err   error
}

// New returns a Client for opts. It connects to the service URL before
// returning, under OperationRetries (by default it keeps trying, 5 s
// apart, while ctx allows), so that a wrong URL, TLS setting or token
// shows at once.
func New(ctx context.Context, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	svc, err := parseServiceURL(opts.ServiceURL)
	if err != nil {
		return nil, err
	}
	if _, err := opts.Producer.Compression.wire(); err != nil {
		return nil, err
	}
	c := &Client{
		opts:      opts,
		svc:       svc,
		log:       opts.Logger,
		memory:    newLimiter(opts.MemoryLimit),
		conns:     map[connKey]*connSlot{},
		producers: map[string]*producerSlot{},
	}
	// Built even for pulsar:// in case a lookup names a TLS listener.
	if c.tls, err = opts.TLS.tlsConfig(); err != nil {
		return nil, err
	}
	if c.token, err = tokenSource(opts.Token); err != nil {
		return nil, err
	}
	c.dialTCP = opts.Dial
	if c.dialTCP == nil {
		d := &net.Dialer{KeepAlive: -1}
		c.dialTCP = d.DialContext
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	err = c.Retry(ctx, "connect to "+opts.ServiceURL, func(ctx context.Context) error {
		_, err := c.serviceConn(ctx)
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
	conn, err := c.serviceConn(ctx)
	if err != nil {
		return 0, err
	}
	return conn.MaxMessageSize(), nil
}

// NewRequestID returns a request id unique in the client.
func (c *Client) NewRequestID() uint64 { return c.requestID.Add(1) }

// NewConsumerID returns a consumer id unique in the client; keep it for
// the consumer's life, across reconnects.
func (c *Client) NewConsumerID() uint64 { return c.consumerID.Add(1) }

// Options returns the client's options with every default filled in.
func (c *Client) Options() Options { return c.opts }

// Done is closed when Close begins.
func (c *Client) Done() <-chan struct{} { return c.ctx.Done() }

// Retry runs op under the client's OperationRetries (see
// OperationRetries.Do); it also stops, with ErrClosed, when the client
// closes. name says what op does, for errors and logs.
func (c *Client) Retry(ctx context.Context, name string, op func(ctx context.Context) error) error {
	return c.RetryWith(ctx, c.opts.OperationRetries, name, op)
}

// RetryWith is Retry with other retry settings (zero fields take the
// defaults).
func (c *Client) RetryWith(ctx context.Context, r OperationRetries, name string, op func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.ctx, func() { cancel(ErrClosed) })
	defer stop()
	return r.withDefaults().do(ctx, name, op, c.log, c.opts.OnRetry)
}

// spawn runs f in a goroutine the client waits for on Close; false when
// the client is closing.
func (c *Client) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// getConn returns the pooled connection for key, dialing it if needed.
// Concurrent callers share one dial.
func (c *Client) getConn(ctx context.Context, key connKey) (*Conn, error) {
	for {
		c.mu.Lock()
		if c.ctx.Err() != nil {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		s := c.conns[key]
		if s == nil {
			s = &connSlot{ready: make(chan struct{})}
			c.conns[key] = s
			c.wg.Add(1) // the dial's goroutines start under it
			c.mu.Unlock()
			// The dial serves every caller waiting on the slot, so it is
			// bounded by ConnectionTimeout and the client, not by ctx.
			conn, err := c.dial(c.ctx, key)
			c.mu.Lock()
			s.conn, s.err = conn, err
			if err != nil && c.conns[key] == s {
				delete(c.conns, key)
			}
			close(s.ready)
			c.mu.Unlock()
			c.wg.Done()
			if err != nil {
				if c.ctx.Err() != nil {
					return nil, ErrClosed
				}
				return nil, err
			}
			if c.ctx.Err() != nil {
				conn.close(ErrClosed)
				return nil, ErrClosed
			}
			c.connStats.dialed(key)
			return conn, nil
		}
		c.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if s.err != nil {
			return nil, s.err
		}
		if !s.conn.closed() {
			return s.conn, nil
		}
		c.forgetConn(s.conn)
	}
}

// forgetConn drops a closed connection from the pool.
func (c *Client) forgetConn(conn *Conn) {
	c.mu.Lock()
	if s := c.conns[conn.key]; s != nil && s.conn == conn {
		delete(c.conns, conn.key)
	}
	c.mu.Unlock()
}

// serviceConn returns a connection to the service URL, trying its hosts in
// turn from the last one that worked.
func (c *Client) serviceConn(ctx context.Context) (*Conn, error) {
	n := len(c.svc.hosts)
	start := int(c.svcIndex.Load())
	var last error
	for i := 0; i < n; i++ {
		idx := (start + i) % n
		h := c.svc.hosts[idx]
		conn, err := c.getConn(ctx, connKey{logical: h, physical: h, tls: c.svc.tls})
		if err == nil {
			c.svcIndex.Store(uint32(idx))
			return conn, nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		last = err
	}
	return nil, last
}

// BrokerConns lists the open connections of the pool, one per broker
// address (as Conn.String spells them), for tests and introspection.
func (c *Client) BrokerConns() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.conns {
		select {
		case <-s.ready:
			if s.conn != nil && !s.conn.closed() {
				out = append(out, s.conn.String())
			}
		default:
		}
	}
	return out
}

// Close flushes every producer and waits, while ctx allows, for the
// broker to acknowledge what was published; then it closes the producers
// and connections and stops every goroutine of the client. Messages still
// unacknowledged when ctx ends fail with ErrClosed, and Close returns
// ctx's error. Publishing after Close began fails with ErrClosed.
func (c *Client) Close(ctx context.Context) error {
	if c.closing.Swap(true) {
		<-c.ctx.Done()
		c.wg.Wait()
		return nil
	}
	var err error
	producers := c.allProducers()
	if p, e := flushAll(ctx, producers); e != nil {
		err = fmt.Errorf("close: flush %s: %w", p.topic, e)
	}
	closeOnBroker(ctx, producers)
	c.mu.Lock()
	c.cancel(ErrClosed)
	var conns []*Conn
	for _, s := range c.conns {
		select {
		case <-s.ready:
			if s.conn != nil {
				conns = append(conns, s.conn)
			}
		default: // a dial in flight: it sees the cancelled context
		}
	}
	c.mu.Unlock()
	for _, p := range producers {
		p.shutdown(ErrClosed)
	}
	for _, conn := range conns {
		conn.close(ErrClosed)
	}
	c.wg.Wait()
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	return err
}
