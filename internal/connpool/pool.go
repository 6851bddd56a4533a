package connpool

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what a Pool needs from the client that owns it. Every field
// is set by pool.New; the zero value of none of them is meaningful.
type Config struct {
	// Service is the parsed service URL: where lookups start.
	Service ServiceURL
	// TLS is the base configuration of pulsar+ssl:// connections
	// (ServerName is set per dial).
	TLS *tls.Config
	// Token returns the credentials sent in CONNECT and in answers to
	// AUTH_CHALLENGE; nil for none.
	Token func() (string, error)
	// Dial opens the TCP connections.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Log receives connection events.
	Log *slog.Logger
	// ConnectionTimeout bounds a dial plus its CONNECT handshake.
	ConnectionTimeout time.Duration
	// KeepAliveInterval is how often a connection sends PING.
	KeepAliveInterval time.Duration

	// The client's public errors are package pool's; the pool makes and
	// classifies them through these three, so that a caller sees one set
	// of error types whichever layer failed.

	// Closed is the error of operations on a closed client (pool.ErrClosed).
	Closed error
	// ConnectError wraps a failure to dial addr or handshake with it
	// (into a *pool.ConnectError).
	ConnectError func(addr string, err error) error
	// Retryable tells whether an error is worth trying the next service
	// host for (pool.Retryable).
	Retryable func(error) bool

	// Owner is the owning client's own state (pool's producers), kept
	// here because a *pool.Client is a *Pool under another name: see Owner.
	Owner any
}

// Pool is the connection pool of one client: one connection per broker
// address, shared by every producer, consumer and lookup of the client.
// Its methods are safe for concurrent use.
//
// pool.Client is defined as Pool (type Client connpool.Pool), so that
// package subscribe, inside this module, reaches a client's connections
// by a conversion, (*connpool.Pool)(client), while a user of package
// pool, who cannot import this package, sees none of these methods.
type Pool struct {
	cfg Config

	ctx    context.Context // cancelled, with cause cfg.Closed, by Shutdown
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // every goroutine of the client

	requestID  atomic.Uint64
	consumerID atomic.Uint64
	svcIndex   atomic.Uint32

	stats connStats

	mu    sync.Mutex
	conns map[connKey]*connSlot
}

type connSlot struct {
	ready chan struct{} // closed once dialing ended
	conn  *Conn
	err   error
}

// New returns a Pool for cfg. It dials nothing yet.
func New(cfg Config) *Pool {
	p := &Pool{cfg: cfg, conns: map[connKey]*connSlot{}}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	return p
}

// Owner is Config.Owner.
func (p *Pool) Owner() any { return p.cfg.Owner }

// Log is the client's logger.
func (p *Pool) Log() *slog.Logger { return p.cfg.Log }

// Context is cancelled, with cause Config.Closed, when Shutdown begins.
func (p *Pool) Context() context.Context { return p.ctx }

// Done is closed when Shutdown begins.
func (p *Pool) Done() <-chan struct{} { return p.ctx.Done() }

// NewRequestID returns a request id unique in the client.
func (p *Pool) NewRequestID() uint64 { return p.requestID.Add(1) }

// NewConsumerID returns a consumer id unique in the client; keep it for
// the consumer's life, across reconnects.
func (p *Pool) NewConsumerID() uint64 { return p.consumerID.Add(1) }

// Spawn runs f in a goroutine that Shutdown waits for; false when the
// client is closing (f then does not run).
func (p *Pool) Spawn(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// getConn returns the pooled connection for key, dialing it if needed.
// Concurrent callers share one dial.
func (p *Pool) getConn(ctx context.Context, key connKey) (*Conn, error) {
	for {
		p.mu.Lock()
		if p.ctx.Err() != nil {
			p.mu.Unlock()
			return nil, p.cfg.Closed
		}
		s := p.conns[key]
		if s == nil {
			s = &connSlot{ready: make(chan struct{})}
			p.conns[key] = s
			p.wg.Add(1) // the dial's goroutines start under it
			p.mu.Unlock()
			return p.dialSlot(s, key)
		}
		p.mu.Unlock()
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
		p.forgetConn(s.conn)
	}
}

// dialSlot dials key for the slot s, just added to the pool.
func (p *Pool) dialSlot(s *connSlot, key connKey) (*Conn, error) {
	defer p.wg.Done()
	// The dial serves every caller waiting on the slot, so it is
	// bounded by ConnectionTimeout and the client, not by ctx.
	conn, err := p.dial(p.ctx, key)
	p.mu.Lock()
	s.conn, s.err = conn, err
	if err != nil && p.conns[key] == s {
		delete(p.conns, key)
	}
	close(s.ready)
	p.mu.Unlock()
	if err != nil {
		if p.ctx.Err() != nil {
			return nil, p.cfg.Closed
		}
		return nil, err
	}
	if p.ctx.Err() != nil {
		conn.Close(p.cfg.Closed)
		return nil, p.cfg.Closed
	}
	p.stats.dialed(key)
	return conn, nil
}

// forgetConn drops a closed connection from the pool.
func (p *Pool) forgetConn(conn *Conn) {
	p.mu.Lock()
	if s := p.conns[conn.key]; s != nil && s.conn == conn {
		delete(p.conns, conn.key)
	}
	p.mu.Unlock()
}

// ServiceConn returns a connection to the service URL, trying its hosts
// in turn from the last one that worked.
func (p *Pool) ServiceConn(ctx context.Context) (*Conn, error) {
	hosts := p.cfg.Service.Hosts
	start := int(p.svcIndex.Load())
	var last error
	for i := range hosts {
		idx := (start + i) % len(hosts)
		h := hosts[idx]
		conn, err := p.getConn(ctx, connKey{logical: h, physical: h, tls: p.cfg.Service.TLS})
		if err == nil {
			p.svcIndex.Store(uint32(idx))
			return conn, nil
		}
		if !p.cfg.Retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		last = err
	}
	return nil, last
}

// BrokerConns lists the open connections of the pool, one per broker
// address (as Conn.String spells them).
func (p *Pool) BrokerConns() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, s := range p.conns {
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

// Reconnects counts connections dialed to a broker address the pool had
// been connected to before.
func (p *Pool) Reconnects() int64 { return p.stats.count() }

// Shutdown cancels Context (so Spawn refuses, dials end and the owner's
// goroutines see it), calls stopOwner, which must make the owner's
// goroutines end, then closes every connection with Config.Closed and
// waits for every goroutine of the client.
func (p *Pool) Shutdown(stopOwner func()) {
	p.mu.Lock()
	p.cancel(p.cfg.Closed)
	var conns []*Conn
	for _, s := range p.conns {
		select {
		case <-s.ready:
			if s.conn != nil {
				conns = append(conns, s.conn)
			}
		default: // a dial in flight: it sees the cancelled context
		}
	}
	p.mu.Unlock()
	stopOwner()
	for _, conn := range conns {
		conn.Close(p.cfg.Closed)
	}
	p.wg.Wait()
}

// Wait waits for every goroutine of the client, for a second Close.
func (p *Pool) Wait() {
	<-p.ctx.Done()
	p.wg.Wait()
}

// closedByClient reports whether err is the client's closing.
func (p *Pool) closedByClient(err error) bool { return errors.Is(err, p.cfg.Closed) }
