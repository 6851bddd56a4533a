// Package broker is streamrun's embedded Apache Pulsar broker: one process,
// one or more brokers, speaking Pulsar's binary protocol so that the
// official clients (Java, Go, Python) work against it unchanged.
//
// Topics live in a store (broker/store) under a data directory, or in
// memory for tests. With several brokers each owns the topics whose name
// hashes to it; lookups redirect clients to the owner, which is the only
// broker that accepts producers and consumers for the topic.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/broker/auth"
	"github.com/streamrun/streamrun/broker/store"
)

// Cluster is a running set of embedded brokers sharing one store.
type Cluster struct {
	opts   Options
	log    *slog.Logger
	store  *store.Store
	tlsCfg *tls.Config

	verifier *auth.TokenVerifier // nil without a token key
	permMu   sync.Mutex          // serializes changes of namespace permissions

	ctx    context.Context // canceled by Close; stops dispatchers and the flusher
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines owned by the cluster (not by a broker)

	mu      sync.Mutex
	closed  bool
	brokers []*server
	topics  map[string]*topic

	connIDs   atomic.Uint64
	trimmed   atomic.Int64  // bytes trimmed from memory since memory was last given back
	producers atomic.Uint64 // for generated producer names

	httpSrv     *http.Server
	adminURL    string
	adminURLTLS string

	pprofSrv  *http.Server // the profiler (Options.Pprof), nil when off
	pprofURL  string
	pprofDone chan struct{} // closed when pprofSrv stopped serving

	moves topicMoves // owners set by an unload with a destination broker

	txns *txnCoordinator // nil with transactions off
}

// Start opens the store and starts the brokers and the admin API. ctx bounds
// the start only; Close stops the cluster.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.Check(); err != nil {
		return nil, err
	}
	so := store.Options{Dir: opts.DataDir, Sync: opts.Sync, SegmentBytes: opts.SegmentBytes, CacheBytes: opts.CacheBytes, Logger: opts.Logger}
	if opts.Memory {
		so.Dir = ""
	}
	tlsCfg, err := loadTLS(opts)
	if err != nil {
		return nil, err
	}
	verifier, err := newTokenVerifier(opts)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(so)
	if err != nil {
		return nil, fmt.Errorf("broker: open store: %w", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Cluster{
		opts:     opts,
		log:      opts.Logger,
		store:    st,
		tlsCfg:   tlsCfg,
		verifier: verifier,
		ctx:      cctx,
		cancel:   cancel,
		topics:   make(map[string]*topic),
	}
	if opts.Transactions {
		if c.txns, err = newTxnCoordinator(c); err != nil {
			st.Close()
			cancel()
			return nil, fmt.Errorf("broker: transactions: %w", err)
		}
	}
	if err := c.startBrokers(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.startHTTP(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.startPprof(); err != nil {
		c.Close()
		return nil, err
	}
	c.wg.Add(1)
	go c.flushLoop()
	if c.txns != nil {
		c.wg.Add(1)
		go c.txns.run()
	}
	return c, nil
}

func (c *Cluster) startBrokers(ctx context.Context) error {
	host, port := "", 0
	if c.opts.Listen != "-" {
		var err error
		if host, port, err = splitHostPort(c.opts.Listen); err != nil {
			return fmt.Errorf("broker: listen address %q: %w", c.opts.Listen, err)
		}
	}
	var err error
	var tlsHost string
	var tlsPort int
	if c.tlsCfg != nil {
		if tlsHost, tlsPort, err = splitHostPort(c.opts.TLSListen); err != nil {
			return fmt.Errorf("broker: TLS listen address %q: %w", c.opts.TLSListen, err)
		}
	}
	adv := c.opts.AdvertisedHost
	if adv == "" {
		adv = host
		if c.opts.Listen == "-" {
			adv = tlsHost
		}
		if adv == "" || adv == "0.0.0.0" || adv == "::" {
			adv = "127.0.0.1"
		}
	}
	// All servers exist before any accepts: c.brokers never changes after.
	brokers := make([]*server, c.opts.Brokers)
	for i := range brokers {
		s := &server{c: c, index: i, advHost: adv, conns: make(map[*conn]struct{}), perIP: make(map[string]int)}
		if c.opts.Listen != "-" {
			s.addr = net.JoinHostPort(host, strconv.Itoa(portPlus(port, i)))
		}
		if c.tlsCfg != nil {
			s.tlsAddr = net.JoinHostPort(tlsHost, strconv.Itoa(portPlus(tlsPort, i)))
		}
		brokers[i] = s
	}
	c.mu.Lock()
	c.brokers = brokers
	c.mu.Unlock()
	for _, s := range brokers {
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

func portPlus(port, i int) int {
	if port == 0 {
		return 0
	}
	return port + i
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, n, nil
}

// ServiceURL is the URL clients start from: broker 0's pulsar:// address
// (any broker answers lookups for every topic).
func (c *Cluster) ServiceURL() string { return c.broker(0).url() }

// ServiceURLTLS is broker 0's pulsar+ssl:// address, "" without TLS.
func (c *Cluster) ServiceURLTLS() string { return c.broker(0).tlsURL() }

// BrokerURLs lists every broker's pulsar:// address, by index.
func (c *Cluster) BrokerURLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.brokers))
	for i, s := range c.brokers {
		out[i] = s.url()
	}
	return out
}

// AdminURL is the admin REST API's http:// address, "" when it is off.
func (c *Cluster) AdminURL() string { return c.adminURL }

// AdminURLTLS is the admin REST API's https:// address, "" when it is off.
func (c *Cluster) AdminURLTLS() string { return c.adminURLTLS }

func (c *Cluster) broker(i int) *server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[i]
}

// Brokers is how many brokers run.
func (c *Cluster) Brokers() int { return c.opts.Brokers }

// OwnerOf returns the index of the broker that owns a topic (a partition is
// a topic of its own): fnv32a of the full name modulo the broker count,
// unless an unload moved it (MoveTopic).
// Short names are accepted.
func (c *Cluster) OwnerOf(topic string) int {
	if c.opts.Brokers == 1 {
		return 0
	}
	name := fullName(topic)
	if i, ok := c.moves.owner(name); ok {
		return i
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(c.opts.Brokers))
}

// Interceptor returns Options.Intercept, the interceptor the cluster was
// started with (nil without one).
func (c *Cluster) Interceptor() Interceptor { return c.opts.Intercept }

// DropConnections closes every client connection of broker i (-1: of all
// brokers) at once, as a network failure would. The brokers keep listening.
func (c *Cluster) DropConnections(i int) {
	c.mu.Lock()
	brokers := append([]*server(nil), c.brokers...)
	c.mu.Unlock()
	for _, s := range brokers {
		if i < 0 || s.index == i {
			s.dropConns()
		}
	}
}

// RestartBroker stops broker i (its connections drop, its topics are
// unloaded with their cursors saved) and starts it again on the same
// addresses with the same data.
func (c *Cluster) RestartBroker(i int) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("broker: cluster closed")
	}
	if i < 0 || i >= len(c.brokers) {
		c.mu.Unlock()
		return fmt.Errorf("broker: no broker %d", i)
	}
	s := c.brokers[i]
	c.mu.Unlock()
	s.stop()
	c.unloadTopics(func(t *topic) bool { return t.owner == i })
	return s.start(context.Background())
}

// RestartBrokerAfter is RestartBroker with the broker down for a while
// between stop and start: lookups of its topics still name it, so clients
// are sent to a broker that is down. ctx ends the wait early.
func (c *Cluster) RestartBrokerAfter(ctx context.Context, i int, down time.Duration) error {
	if down == 0 {
		return c.RestartBroker(i)
	}
	c.mu.Lock()
	if c.closed || i < 0 || i >= len(c.brokers) {
		c.mu.Unlock()
		return fmt.Errorf("broker: no broker %d to restart", i)
	}
	s := c.brokers[i]
	c.mu.Unlock()
	s.stop()
	c.unloadTopics(func(t *topic) bool { return t.owner == i })
	select {
	case <-time.After(down):
	case <-ctx.Done():
	case <-c.ctx.Done():
		return errors.New("broker: cluster closed")
	}
	return s.start(context.Background())
}

// Close stops every broker and the admin API, saves the cursors, closes the
// store and waits for every goroutine. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	brokers := append([]*server(nil), c.brokers...)
	c.mu.Unlock()
	c.stopPprof()
	if c.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := c.httpSrv.Shutdown(ctx); err != nil {
			c.httpSrv.Close()
		}
		cancel()
	}
	for _, s := range brokers {
		s.stop()
	}
	c.unloadTopics(func(*topic) bool { return true })
	c.cancel()
	c.wg.Wait()
	if err := c.store.Close(); err != nil {
		return fmt.Errorf("broker: close store: %w", err)
	}
	return nil
}

// flushLoop saves changed cursors and trims acknowledged data now and then.
func (c *Cluster) flushLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.CursorFlush)
	defer t.Stop()
	var lastRelease, lastCompactionCheck time.Time
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		check := time.Since(lastCompactionCheck) >= c.opts.CompactionCheck
		if check {
			lastCompactionCheck = time.Now()
		}
		for _, tp := range c.loadedTopics() {
			tp.flushCursors()
			tp.trim()
			if check {
				tp.compactPastThreshold()
			}
		}
		lastRelease = c.releaseMemory(lastRelease)
	}
}

func (c *Cluster) loadedTopics() []*topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*topic, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	return out
}
