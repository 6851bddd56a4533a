package connpool

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/rawsock"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// ClientVersion is what CONNECT tells the broker this client is.
const ClientVersion = "streamrun-go"

// Handler receives what a broker sends to one consumer. Package
// subscribe implements it; see (*Conn).RegisterConsumer.
//
// Both methods run on the connection's reader goroutine: they must not
// block (hand the frame to the consumer's own queue; flow permits bound
// it) and must not call (*Conn).Request on the same connection and wait.
type Handler interface {
	// HandleFrame gets the frames addressed to the consumer id: MESSAGE
	// (f.Payload and f.Metadata set), ACTIVE_CONSUMER_CHANGE,
	// CLOSE_CONSUMER (the broker closed the consumer: subscribe again,
	// after a new lookup), REACHED_END_OF_TOPIC, and ACK_RESPONSE without
	// a request id. err is non-nil, matching pulsarwire.ErrChecksum, when
	// a message's checksum did not match: drop it (Pulsar's clients ack
	// it with the ChecksumMismatch validation error).
	HandleFrame(f pulsarwire.Frame, err error)
	// ConnectionClosed is called once when the connection is gone; err
	// matches pulsarwire.ErrConnectionClosed, and Config.Closed
	// (pool.ErrClosed) too when the client is closing (then do not
	// reconnect). The consumer is no longer registered.
	ConnectionClosed(err error)
}

// ProducerHandler receives what a broker sends to one producer: package
// pool's partition producers implement it; see (*Conn).RegisterProducer.
// Its methods run on the connection's reader goroutine, except
// ConnClosed, which runs on whichever goroutine closed the connection;
// none may block.
type ProducerHandler interface {
	// Receipt is a SEND_RECEIPT.
	Receipt(conn *Conn, r *pb.CommandSendReceipt)
	// SendError is a SEND_ERROR.
	SendError(conn *Conn, e *pb.CommandSendError)
	// ClosedByBroker is a CLOSE_PRODUCER: the producer is to be created
	// again, after a new lookup.
	ClosedByBroker(conn *Conn)
	// ConnClosed is called once when the connection is gone, as
	// Handler.ConnectionClosed.
	ConnClosed(conn *Conn, err error)
}

// connKey names a pooled connection: the broker it reaches (logical) and
// the address dialed (physical: the same, or a proxy's).
type connKey struct {
	logical  string // host:port
	physical string // host:port
	tls      bool
}

// Conn is one connection to a broker, shared by every producer, consumer
// and lookup of the client that talks to that broker. Its methods are
// safe for concurrent use. A Conn is never re-opened: once Done is
// closed, get a new one from the Pool.
type Conn struct {
	pool *Pool
	key  connKey
	nc   net.Conn
	log  *slog.Logger

	serverVersion   string
	protocolVersion int32
	maxMessageSize  int

	reads atomic.Uint64 // frames received, for keep-alive

	mu        sync.Mutex
	calls     map[uint64]call
	consumers map[uint64]Handler
	producers map[uint64]ProducerHandler
	closeErr  error
	done      chan struct{}

	wmu     sync.Mutex
	wq      writeQueue // what the writer writes next
	wclosed bool
	wkick   chan struct{}
}

// writeQueue is what queued up for the writer: frames in order, as
// references (a producer's frames stay in its buffers until their
// receipts, so they are written from there, not copied) and small
// commands encoded into a buffer of the queue's own.
type writeQueue struct {
	segs      net.Buffers
	small     []byte
	lastSmall bool // the last segment ends where small ends
}

// addSmall queues small[start:], just appended to small.
func (q *writeQueue) addSmall(start int) {
	if n := len(q.segs); q.lastSmall && n > 0 {
		last := q.segs[n-1]
		// Extend the last segment when small did not move meanwhile.
		if cap(last)-len(last) >= len(q.small)-start && &last[:len(last)+1][len(last)] == &q.small[start] {
			q.segs[n-1] = last[:len(last)+len(q.small)-start]
			return
		}
	}
	q.segs = append(q.segs, q.small[start:])
	q.lastSmall = true
}

func (q *writeQueue) addFrame(frame []byte) {
	q.segs = append(q.segs, frame)
	q.lastSmall = false
}

func (q *writeQueue) reset() {
	clear(q.segs)
	q.segs, q.small, q.lastSmall = q.segs[:0], q.small[:0], false
}

type callResult struct {
	cmd *pb.BaseCommand
	err error
}

// call is a request waiting for its answer: Request's caller on ch, or
// RequestAsync's fn (with the timer that gives up on the answer).
type call struct {
	ch    chan callResult
	fn    func(*pb.BaseCommand, error)
	timer *time.Timer
}

// answer hands the answer to whoever waits for it. The call must be out
// of c.calls already, so that it is answered once.
func (k call) answer(cmd *pb.BaseCommand, err error) {
	if k.ch != nil {
		k.ch <- callResult{cmd: cmd, err: err}
		return
	}
	if k.timer != nil {
		k.timer.Stop()
	}
	k.fn(cmd, err)
}

// Addr is the broker's URL, as lookups name it (pulsar://host:port or
// pulsar+ssl://host:port).
func (c *Conn) Addr() string {
	if c.key.tls {
		return "pulsar+ssl://" + c.key.logical
	}
	return "pulsar://" + c.key.logical
}

// String is Addr, with " via <proxy>" when proxied.
func (c *Conn) String() string {
	if c.key.physical != c.key.logical {
		return c.Addr() + " via " + c.key.physical
	}
	return c.Addr()
}

// Host is the broker's host:port.
func (c *Conn) Host() string { return c.key.logical }

// MaxMessageSize is the broker's max_message_size from CONNECTED.
func (c *Conn) MaxMessageSize() int { return c.maxMessageSize }

// ServerVersion is the broker's version from CONNECTED.
func (c *Conn) ServerVersion() string { return c.serverVersion }

// ProtocolVersion is the protocol version both sides speak.
func (c *Conn) ProtocolVersion() int32 { return c.protocolVersion }

// Done is closed when the connection is gone.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection is gone, nil while it is open. It matches
// pulsarwire.ErrConnectionClosed.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// dial opens and handshakes a connection. ctx bounds the whole of it.
func (p *Pool) dial(ctx context.Context, key connKey) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectionTimeout)
	defer cancel()
	nc, err := p.cfg.Dial(ctx, "tcp", key.physical)
	if err != nil {
		return nil, p.cfg.ConnectError(key.physical, err)
	}
	if key.tls {
		conf := p.cfg.TLS.Clone()
		if conf.ServerName == "" {
			host, _, _ := net.SplitHostPort(key.physical)
			conf.ServerName = host
		}
		tc := tls.Client(nc, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, p.cfg.ConnectError(key.physical, fmt.Errorf("TLS handshake: %w", err))
		}
		nc = tc
	}
	c := &Conn{
		pool:           p,
		key:            key,
		nc:             nc,
		log:            p.cfg.Log.With("broker", key.logical),
		maxMessageSize: pulsarwire.DefaultMaxMessageSize,
		calls:          map[uint64]call{},
		consumers:      map[uint64]Handler{},
		producers:      map[uint64]ProducerHandler{},
		done:           make(chan struct{}),
		wkick:          make(chan struct{}, 1),
	}
	// Frames are read straight into shared, recycled buffers: no copy
	// from a read buffer, and payloads that cost no allocation once the
	// buffers are recycled (see pulsarwire.Reader.ShareMessageBuffers).
	// Read by raw system calls on a TCP socket (internal/rawsock): the
	// runtime's entry and exit around each read, and its monitor thread
	// woken by them, were a good part of a transaction's CPU
	// (docs/benchmarks/exactly-once.md, "Client transactions").
	rd := pulsarwire.NewReader(rawsock.Wrap(nc), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))
	rd.ShareMessageBuffers()
	if err := c.handshake(ctx, rd); err != nil {
		nc.Close()
		return nil, p.cfg.ConnectError(key.physical, err)
	}
	rd.SetMaxFrameSize(pulsarwire.MaxFrameSize(c.maxMessageSize))
	p.wg.Add(2)
	go c.readLoop(rd)
	go c.writeLoop()
	c.log.Debug("connected", "via", key.physical, "server", c.serverVersion, "protocol", c.protocolVersion)
	return c, nil
}

func (c *Conn) connectCommand() (*pb.BaseCommand, error) {
	cmd := &pb.CommandConnect{
		ClientVersion:   proto.String(ClientVersion),
		ProtocolVersion: proto.Int32(pulsarwire.ProtocolVersion),
		FeatureFlags: &pb.FeatureFlags{
			SupportsAuthRefresh:         proto.Bool(true),
			SupportsBrokerEntryMetadata: proto.Bool(true),
		},
	}
	if c.key.physical != c.key.logical {
		cmd.ProxyToBrokerUrl = proto.String(c.key.logical)
	}
	a, err := c.authData()
	if err != nil {
		return nil, err
	}
	if a != nil {
		cmd.AuthMethodName, cmd.AuthData = a.AuthMethodName, a.AuthData
	}
	return pulsarwire.Wrap(cmd), nil
}

// authData is the client's credentials, nil without a token.
func (c *Conn) authData() (*pb.AuthData, error) {
	tok := c.pool.cfg.Token
	if tok == nil {
		return nil, nil
	}
	t, err := tok()
	if err != nil {
		return nil, err
	}
	return &pb.AuthData{AuthMethodName: proto.String("token"), AuthData: []byte(t)}, nil
}

// authResponse answers AUTH_CHALLENGE with fresh credentials.
func (c *Conn) authResponse() (*pb.BaseCommand, error) {
	a, err := c.authData()
	if err != nil {
		return nil, err
	}
	if a == nil {
		a = &pb.AuthData{AuthMethodName: proto.String("none")}
	}
	return pulsarwire.Wrap(&pb.CommandAuthResponse{
		ClientVersion:   proto.String(ClientVersion),
		ProtocolVersion: proto.Int32(pulsarwire.ProtocolVersion),
		Response:        a,
	}), nil
}

// handshake sends CONNECT and waits for CONNECTED.
func (c *Conn) handshake(ctx context.Context, rd *pulsarwire.Reader) error {
	if dl, ok := ctx.Deadline(); ok {
		c.nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		c.nc.SetDeadline(time.Time{})
	}()
	cmd, err := c.connectCommand()
	if err != nil {
		return err
	}
	b, err := pulsarwire.AppendCommand(nil, cmd)
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("send CONNECT: %w", err)
	}
	for {
		f, err := rd.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for CONNECTED: %w", ctx.Err())
			}
			return fmt.Errorf("waiting for CONNECTED: %w", err)
		}
		switch f.Cmd.GetType() {
		case pb.BaseCommand_CONNECTED:
			ok := f.Cmd.GetConnected()
			c.serverVersion = ok.GetServerVersion()
			c.protocolVersion = ok.GetProtocolVersion()
			if n := int(ok.GetMaxMessageSize()); n > 0 {
				c.maxMessageSize = n
			}
			return nil
		case pb.BaseCommand_ERROR:
			return pulsarwire.Refused(f.Cmd)
		case pb.BaseCommand_AUTH_CHALLENGE:
			cmd, err := c.authResponse()
			if err != nil {
				return err
			}
			if b, err = pulsarwire.AppendCommand(b[:0], cmd); err != nil {
				return err
			}
			if _, err := c.nc.Write(b); err != nil {
				return fmt.Errorf("send AUTH_RESPONSE: %w", err)
			}
		default:
			return fmt.Errorf("broker answered CONNECT with %s: %w", f.Cmd.GetType(), pulsarwire.ErrCorrupt)
		}
	}
}

func (c *Conn) readLoop(rd *pulsarwire.Reader) {
	defer c.pool.wg.Done()
	for {
		f, err := rd.Next()
		if err != nil && (f.Cmd == nil || !errors.Is(err, pulsarwire.ErrChecksum)) {
			c.Close(fmt.Errorf("read: %w", err))
			return
		}
		c.reads.Add(1)
		c.dispatch(f, err)
	}
}

func (c *Conn) dispatch(f pulsarwire.Frame, ferr error) {
	cmd := f.Cmd
	switch cmd.GetType() {
	case pb.BaseCommand_SEND_RECEIPT:
		if p := c.producer(cmd.GetSendReceipt().GetProducerId()); p != nil {
			p.Receipt(c, cmd.GetSendReceipt())
		}
	case pb.BaseCommand_SEND_ERROR:
		if p := c.producer(cmd.GetSendError().GetProducerId()); p != nil {
			p.SendError(c, cmd.GetSendError())
		}
	case pb.BaseCommand_CLOSE_PRODUCER:
		if p := c.producer(cmd.GetCloseProducer().GetProducerId()); p != nil {
			p.ClosedByBroker(c)
		}
	case pb.BaseCommand_MESSAGE:
		c.toConsumer(cmd.GetMessage().GetConsumerId(), f, ferr)
	case pb.BaseCommand_ACTIVE_CONSUMER_CHANGE:
		c.toConsumer(cmd.GetActiveConsumerChange().GetConsumerId(), f, nil)
	case pb.BaseCommand_CLOSE_CONSUMER:
		c.toConsumer(cmd.GetCloseConsumer().GetConsumerId(), f, nil)
	case pb.BaseCommand_REACHED_END_OF_TOPIC:
		c.toConsumer(cmd.GetReachedEndOfTopic().GetConsumerId(), f, nil)
	case pb.BaseCommand_ACK_RESPONSE:
		r := cmd.GetAckResponse()
		if r.RequestId == nil || !c.complete(r.GetRequestId(), cmd) {
			c.toConsumer(r.GetConsumerId(), f, nil)
		}
	case pb.BaseCommand_PING:
		c.Send(pulsarwire.Wrap(&pb.CommandPong{}))
	case pb.BaseCommand_PONG:
	case pb.BaseCommand_AUTH_CHALLENGE:
		r, err := c.authResponse()
		if err == nil {
			err = c.Send(r)
		}
		if err != nil {
			c.Close(fmt.Errorf("answer AUTH_CHALLENGE: %w", err))
		}
	default:
		if id, ok := answerRequestID(cmd); ok {
			if !c.complete(id, cmd) {
				c.log.Debug("answer to a request no one waits for", "type", cmd.GetType(), "request_id", id)
			}
			return
		}
		c.log.Warn("unexpected command from broker", "type", cmd.GetType())
	}
}

// answerRequestID is the request id an answer refers to; false for a
// command that is not an answer.
func answerRequestID(cmd *pb.BaseCommand) (uint64, bool) {
	if !pulsarwire.Describe(cmd.GetType()).IsAnswer {
		return 0, false
	}
	return pulsarwire.RequestID(cmd)
}

func (c *Conn) producer(id uint64) ProducerHandler {
	c.mu.Lock()
	p := c.producers[id]
	c.mu.Unlock()
	return p
}

func (c *Conn) toConsumer(id uint64, f pulsarwire.Frame, err error) {
	c.mu.Lock()
	h := c.consumers[id]
	c.mu.Unlock()
	if h != nil {
		h.HandleFrame(f, err)
	} else {
		c.log.Debug("frame for an unknown consumer", "type", f.Cmd.GetType(), "consumer_id", id)
	}
}

// complete hands an answer to the request waiting for it.
func (c *Conn) complete(id uint64, cmd *pb.BaseCommand) bool {
	if ps := cmd.GetProducerSuccess(); ps != nil && ps.ProducerReady != nil && !ps.GetProducerReady() {
		// WaitForExclusive: the broker answers again when it is ready.
		return true
	}
	c.mu.Lock()
	k, ok := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if ok {
		k.answer(cmd, pulsarwire.Refused(cmd))
	}
	return ok
}

// Request sends cmd with a fresh request id (set in cmd) and waits for
// the broker's answer: the response command, or an error. A broker error
// (ERROR, or a response whose status is Failed) is a
// *pulsarwire.ServerError; a connection lost meanwhile matches
// pulsarwire.ErrConnectionClosed. Request makes one attempt; wrap it in
// pool's (*Client).RetryWith to retry "not now".
func (c *Conn) Request(ctx context.Context, cmd *pb.BaseCommand) (*pb.BaseCommand, error) {
	id := c.pool.NewRequestID()
	if !pulsarwire.SetRequestID(cmd, id) {
		return nil, fmt.Errorf("request %s: the command carries no request id", cmd.GetType())
	}
	ch := make(chan callResult, 1)
	c.mu.Lock()
	if c.closeErr != nil {
		err := c.closeErr
		c.mu.Unlock()
		return nil, err
	}
	c.calls[id] = call{ch: ch}
	c.mu.Unlock()
	if err := c.Send(cmd); err != nil {
		c.forgetCall(id)
		return nil, err
	}
	select {
	case r := <-ch:
		return r.cmd, r.err
	case <-ctx.Done():
		c.forgetCall(id)
		return nil, fmt.Errorf("%s to %s: %w", cmd.GetType(), c.key.logical, ctx.Err())
	}
}

func (c *Conn) forgetCall(id uint64) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// RequestAsync is Request without waiting: done gets the answer or the
// error, once, on the connection's reader goroutine (or the goroutine
// that closed the connection, or a timer's when no answer came within
// timeout: then its error matches pulsarwire.ErrTimeout), and must not
// block. It saves a goroutine and its wake-up per request where the
// answer only has to be passed on (internal/txn's transaction requests).
// Sending fails at once, in done on the caller's goroutine, when the
// connection is gone or cmd cannot be encoded.
func (c *Conn) RequestAsync(cmd *pb.BaseCommand, timeout time.Duration, done func(*pb.BaseCommand, error)) {
	id := c.pool.NewRequestID()
	if !pulsarwire.SetRequestID(cmd, id) {
		done(nil, fmt.Errorf("request %s: the command carries no request id", cmd.GetType()))
		return
	}
	c.mu.Lock()
	if c.closeErr != nil {
		err := c.closeErr
		c.mu.Unlock()
		done(nil, err)
		return
	}
	typ := cmd.GetType()
	c.calls[id] = call{fn: done, timer: time.AfterFunc(timeout, func() {
		c.mu.Lock()
		k, ok := c.calls[id]
		delete(c.calls, id)
		c.mu.Unlock()
		if ok {
			k.fn(nil, fmt.Errorf("%s to %s: %w: no answer in %s", typ, c.key.logical, pulsarwire.ErrTimeout, timeout))
		}
	})}
	c.mu.Unlock()
	if err := c.Send(cmd); err != nil {
		c.mu.Lock()
		k, ok := c.calls[id]
		delete(c.calls, id)
		c.mu.Unlock()
		if ok {
			k.answer(nil, err)
		}
	}
}

// Send queues cmd for writing, without waiting for an answer (FLOW, ACK,
// REDELIVER_UNACKNOWLEDGED_MESSAGES, ...). It fails only when the
// connection is gone or cmd cannot be encoded.
func (c *Conn) Send(cmd *pb.BaseCommand) error {
	c.wmu.Lock()
	if c.wclosed {
		c.wmu.Unlock()
		return c.Err()
	}
	start := len(c.wq.small)
	var err error
	c.wq.small, err = pulsarwire.AppendCommand(c.wq.small, cmd)
	if err == nil {
		c.wq.addSmall(start)
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	c.kick()
	return nil
}

// SendPayload queues a frame carrying a message (cmd, its metadata and
// payload), checksummed.
func (c *Conn) SendPayload(cmd *pb.BaseCommand, md *pb.MessageMetadata, payload []byte) error {
	c.wmu.Lock()
	if c.wclosed {
		c.wmu.Unlock()
		return c.Err()
	}
	start := len(c.wq.small)
	var err error
	c.wq.small, err = pulsarwire.AppendPayloadCommand(c.wq.small, cmd, md, payload)
	if err == nil {
		c.wq.addSmall(start)
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	c.kick()
	return nil
}

// WriteFrame queues an encoded frame, which must stay unchanged until
// the broker answered it (a producer keeps it until its receipt); false
// when the connection is gone.
func (c *Conn) WriteFrame(frame []byte) bool {
	c.wmu.Lock()
	if c.wclosed {
		c.wmu.Unlock()
		return false
	}
	c.wq.addFrame(frame)
	c.wmu.Unlock()
	c.kick()
	return true
}

func (c *Conn) kick() {
	select {
	case c.wkick <- struct{}{}:
	default:
	}
}

// writeLoop is the connection's one writer: it takes whatever frames
// queued up since its last write and writes them at once. It also sends
// the keep-alive PINGs and declares the connection dead when nothing at
// all arrived for a whole interval after one.
func (c *Conn) writeLoop() {
	defer c.pool.wg.Done()
	interval := c.pool.cfg.KeepAliveInterval
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var out writeQueue
	// A TCP connection takes the frames as they lie (writev); others (TLS)
	// get them gathered into records of up to 64 KiB.
	// On Linux a TCP connection is written by raw writev(2)
	// (internal/rawsock), as it is read.
	var bw *bufio.Writer
	var rw *rawsock.BuffersWriter
	if _, ok := c.nc.(*net.TCPConn); !ok {
		bw = bufio.NewWriterSize(c.nc, 64<<10)
	} else {
		rw = rawsock.NewBuffersWriter(c.nc)
	}
	var seen uint64
	pinged := false
	for {
		select {
		case <-c.wkick:
		case <-ticker.C:
			n := c.reads.Load()
			if pinged && n == seen {
				c.Close(fmt.Errorf("%w: nothing received for %s after a PING", pulsarwire.ErrTimeout, interval))
				return
			}
			seen, pinged = n, true
			c.Send(pulsarwire.Wrap(&pb.CommandPing{}))
		case <-c.done:
			return
		}
		out.reset()
		c.wmu.Lock()
		out, c.wq = c.wq, out
		c.wmu.Unlock()
		if len(out.segs) == 0 {
			continue
		}
		c.nc.SetWriteDeadline(time.Now().Add(2 * interval))
		var err error
		if rw != nil {
			err = rw.WriteBuffers(out.segs)
		} else if bw == nil {
			bufs := out.segs
			_, err = bufs.WriteTo(c.nc)
		} else {
			for _, b := range out.segs {
				if _, err = bw.Write(b); err != nil {
					break
				}
			}
			if err == nil {
				err = bw.Flush()
			}
		}
		if err != nil {
			c.Close(fmt.Errorf("write: %w", err))
			return
		}
		if cap(out.small) > 1<<20 {
			out.small = nil
		}
	}
}

// Close shuts the connection for good: pending requests fail, producers
// and consumers on it are told, the pool forgets it.
func (c *Conn) Close(cause error) {
	c.mu.Lock()
	if c.closeErr != nil {
		c.mu.Unlock()
		return
	}
	err := fmt.Errorf("connection to %s: %w: %w", c.key.logical, pulsarwire.ErrConnectionClosed, cause)
	c.closeErr = err
	calls, producers, consumers := c.calls, c.producers, c.consumers
	c.calls, c.producers, c.consumers = nil, nil, nil
	close(c.done)
	c.mu.Unlock()

	c.wmu.Lock()
	c.wclosed = true
	c.wq = writeQueue{}
	c.wmu.Unlock()
	c.nc.Close()
	c.pool.forgetConn(c)
	if !c.pool.closedByClient(cause) {
		c.log.Info("connection closed", "err", cause)
	}
	for _, k := range calls {
		k.answer(nil, err)
	}
	for _, p := range producers {
		p.ConnClosed(c, err)
	}
	for _, h := range consumers {
		h.ConnectionClosed(err)
	}
}

// RegisterConsumer routes the frames the broker sends for consumer id to
// h, until UnregisterConsumer or the connection's end (then
// h.ConnectionClosed). Register before sending SUBSCRIBE, so that no
// MESSAGE is missed. It fails when the connection is already gone or id
// is taken on it.
func (c *Conn) RegisterConsumer(id uint64, h Handler) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr != nil {
		return c.closeErr
	}
	if _, dup := c.consumers[id]; dup {
		return fmt.Errorf("consumer id %d is already registered on %s", id, c.key.logical)
	}
	c.consumers[id] = h
	return nil
}

// UnregisterConsumer stops routing frames to consumer id. Its handler
// gets no ConnectionClosed afterwards.
func (c *Conn) UnregisterConsumer(id uint64) {
	c.mu.Lock()
	delete(c.consumers, id)
	c.mu.Unlock()
}

// RegisterProducer routes the frames the broker sends for producer id to
// p, until UnregisterProducer or the connection's end (then
// p.ConnClosed). It fails when the connection is already gone.
func (c *Conn) RegisterProducer(id uint64, p ProducerHandler) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr != nil {
		return c.closeErr
	}
	c.producers[id] = p
	return nil
}

// UnregisterProducer stops routing frames for producer id to p (and
// leaves them to whoever registered the id since).
func (c *Conn) UnregisterProducer(id uint64, p ProducerHandler) {
	c.mu.Lock()
	if c.producers[id] == p {
		delete(c.producers, id)
	}
	c.mu.Unlock()
}

// Closed reports whether the connection is gone.
func (c *Conn) Closed() bool { return c.closed() }

func (c *Conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
