package broker

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/rawsock"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

const (
	// writeTimeout bounds one socket write: a client that stops reading
	// for this long is dropped rather than holding memory forever.
	writeTimeout = 30 * time.Second
	// maxOutBuffer is how much unsent output makes the read loop wait for
	// the writer, so a client that sends without reading cannot grow it.
	maxOutBuffer = 16 << 20
	// dispatchHighWater is how much unsent output makes dispatch skip a
	// connection's consumers until the writer catches up (as Apache Pulsar
	// stops at a channel that is not writable): permits bound what a
	// consumer may be sent, not how fast its client reads.
	dispatchHighWater = 4 << 20
	// readBufferSize is each connection's read buffer.
	readBufferSize = 16 << 10
)

// conn is one client connection. Its read loop runs the commands in order;
// everything sent to the client goes through the output buffer, which a
// writer goroutine flushes in as few writes as it can.
type conn struct {
	srv   *server
	c     *Cluster
	nc    net.Conn
	id    uint64
	peer  string
	ip    string // peer without the port: the per-IP limit's key
	since time.Time
	isTLS bool
	log   *slog.Logger

	wmu     sync.Mutex
	wbuf    []byte
	wclosed bool // no more output is taken
	// dropAnswer, read loop only: the command being handled is answered
	// by dropping the connection (a fault, Verdict.DropAnswer).
	dropAnswer bool
	ending     bool // the writer flushes what it has, then closes
	held       bool // the read loop flushes the output itself (holdOutput): no signal
	// sockMu is held from taking output to having written it, by the
	// writer or by the read loop's inline flush, so that output goes out
	// in order; spare is the buffer last written, reused (guarded by it).
	sockMu  sync.Mutex
	spare   []byte
	raw     syscall.RawConn // the TCP socket, for flushHeld's non-blocking write; nil with TLS
	wsig    chan struct{}
	drained chan struct{}
	quit    chan struct{} // closed by abort: stop now
	quitMu  sync.Once

	lastRead atomic.Int64  // unix nanoseconds
	outBytes atomic.Int64  // unsent output waiting for the writer
	wantWake atomic.Bool   // a dispatcher skipped us: wake them when drained
	pong     chan struct{} // a PONG arrived (for liveness checks)

	connected atomic.Bool
	protocol  int32
	principal string
	client    string

	mu              sync.Mutex
	producers       map[uint64]*producer
	consumers       map[uint64]*consumer
	closedProducers map[uint64]bool // closed by the broker; the client may still send for them

	// receipts holds the answers to SENDs waiting for an fsync, in order
	// (conn_receipts.go); nil until the first SEND to a log that syncs. Only
	// the read loop sends on it and closes it.
	receipts     chan pendingAnswer
	receiptsDone chan struct{}
}

func newConn(s *server, nc net.Conn, isTLS bool) *conn {
	id := s.c.connIDs.Add(1)
	peer := nc.RemoteAddr().String()
	cn := &conn{
		srv:             s,
		c:               s.c,
		nc:              nc,
		id:              id,
		peer:            peer,
		ip:              remoteIP(nc.RemoteAddr()),
		since:           time.Now(),
		isTLS:           isTLS,
		log:             s.c.log.With("broker", s.index, "conn", id, "peer", peer),
		wsig:            make(chan struct{}, 1),
		drained:         make(chan struct{}, 1),
		pong:            make(chan struct{}, 1),
		quit:            make(chan struct{}),
		producers:       make(map[uint64]*producer),
		closedProducers: make(map[uint64]bool),
		consumers:       make(map[uint64]*consumer),
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		cn.raw, _ = tc.SyscallConn()
	}
	cn.lastRead.Store(time.Now().UnixNano())
	return cn
}

// abort closes the connection at once, dropping unsent output.
func (cn *conn) abort(reason string) {
	cn.quitMu.Do(func() {
		cn.log.Debug("closing connection", "reason", reason)
		close(cn.quit)
		cn.wmu.Lock()
		cn.wclosed = true
		cn.wmu.Unlock()
		cn.nc.Close()
	})
}

// finish closes the connection after the output already queued is sent.
func (cn *conn) finish() {
	cn.wmu.Lock()
	cn.ending = true
	cn.wmu.Unlock()
	cn.signal()
}

func (cn *conn) signal() {
	select {
	case cn.wsig <- struct{}{}:
	default:
	}
}

// send queues a command for the client.
func (cn *conn) send(m proto.Message) {
	cn.wmu.Lock()
	if cn.wclosed {
		cn.wmu.Unlock()
		return
	}
	out, err := appendCmd(cn.wbuf, m)
	cn.wbuf = out
	cn.wmu.Unlock()
	if err != nil {
		cn.log.Error("broker bug: cannot encode a command", "err", err)
		return
	}
	cn.signal()
}

// out locks the output buffer for a hand-encoded frame; release with done.
// It returns nil when the connection takes no more output.
func (cn *conn) out() *[]byte {
	cn.wmu.Lock()
	if cn.wclosed {
		cn.wmu.Unlock()
		return nil
	}
	return &cn.wbuf
}

func (cn *conn) done() {
	cn.outBytes.Store(int64(len(cn.wbuf)))
	held := cn.held
	cn.wmu.Unlock()
	if !held {
		cn.signal()
	}
}

// directMin is the body size from which doneWith writes a frame's body
// to the socket from where it lies, not copied into the output buffer
// first: at this size the copy costs more than a writev(2) of its own
// (docs/benchmarks/design.md, "Entries written from where they were read, and
// read further ahead").
const directMin = 16 << 10

// doneWith is done for a frame whose head the caller appended (after
// out) and whose body lies elsewhere. A small body is appended; a big one,
// when the socket is a plain TCP one that nobody is writing, goes out with
// everything queued in one writev(2) on the calling goroutine, never
// waiting, and only what the socket does not take is copied. body need
// stay valid only until doneWith returns; wmu held, from out.
func (cn *conn) doneWith(body []byte) {
	// sockMu is taken after wmu here and before it elsewhere: TryLock
	// cannot wait, so the order cannot deadlock.
	if len(body) < directMin || cn.raw == nil || cn.ending || !cn.sockMu.TryLock() {
		cn.wbuf = append(cn.wbuf, body...)
		cn.done()
		return
	}
	buf := cn.wbuf
	n := cn.tryWritev(buf, body)
	cn.sockMu.Unlock()
	switch {
	case n == len(buf)+len(body):
		cn.wbuf = buf[:0]
	case n < len(buf):
		cn.wbuf = append(buf[:copy(buf, buf[n:])], body...)
	default:
		cn.wbuf = append(buf[:0], body[n-len(buf):]...)
	}
	if len(cn.wbuf) > 0 {
		cn.done() // the writer sends the rest (or meets the error)
		return
	}
	cn.outBytes.Store(0)
	cn.wmu.Unlock()
	if cn.wantWake.Swap(false) {
		cn.wakeDispatchers() // as the writer does once drained
	}
}

// tryWritev writes as much of a, then b, as the socket takes without
// waiting, in one system call each time; sockMu held. An error is left for
// the writer to meet.
func (cn *conn) tryWritev(a, b []byte) int {
	n := 0
	cn.raw.Write(func(fd uintptr) bool {
		for n < len(a)+len(b) {
			var k int
			var err syscall.Errno
			if n < len(a) {
				k, err = rawsock.Writev2(fd, a[n:], b)
			} else {
				k, err = rawsock.Write(fd, b[n-len(a):])
			}
			if err == syscall.EINTR {
				continue
			}
			if err != 0 || k <= 0 {
				break
			}
			n += k
		}
		return true // never wait for the socket to be writable
	})
	return n
}

// doneInline is done, then the output written on the calling goroutine
// as flushHeld does: a receipt the read loop (or, at fsync durability,
// the receipt loop) answers SENDs with costs one write(2) there, not a
// wake-up of the writer goroutine per entry; wmu held, from out.
func (cn *conn) doneInline() {
	cn.held = true
	cn.done()
	cn.flushHeld()
}

// holdOutput makes the output queued from now on wait for flushHeld,
// which the read loop calls when it has handled the command: answering a
// FLOW with an entry then costs one write(2) on the read loop, not a
// hand-over to the writer goroutine (a wake-up of another thread) for
// every entry.
func (cn *conn) holdOutput() {
	cn.wmu.Lock()
	cn.held = true
	cn.wmu.Unlock()
}

// flushHeld ends holdOutput and writes what the socket takes at once on
// the calling goroutine, never waiting for it: the rest, and everything
// when the writer is writing or the socket is not a plain TCP one, is the
// writer's. A read loop blocked on a full socket would stop handling the
// client's next FLOWs.
func (cn *conn) flushHeld() {
	cn.wmu.Lock()
	cn.held = false
	pending := len(cn.wbuf) > 0
	cn.wmu.Unlock()
	if !pending {
		return
	}
	if cn.raw == nil || !cn.sockMu.TryLock() {
		cn.signal()
		return
	}
	defer cn.sockMu.Unlock()
	cn.wmu.Lock()
	if cn.wclosed || cn.ending || len(cn.wbuf) == 0 {
		cn.wmu.Unlock()
		cn.signal() // the writer does the closing
		return
	}
	buf := cn.take()
	cn.wmu.Unlock()
	n := cn.tryWrite(buf)
	if n == len(buf) {
		if cap(buf) <= 4<<20 {
			cn.spare = buf
		}
		if cn.wantWake.Swap(false) {
			cn.wakeDispatchers() // as the writer does once drained
		}
		return
	}
	// The rest goes before whatever was queued since the take.
	rest := buf[:copy(buf, buf[n:])]
	cn.wmu.Lock()
	cn.wbuf, cn.spare = append(rest, cn.wbuf...), cn.wbuf[:0]
	cn.outBytes.Store(int64(len(cn.wbuf)))
	cn.wmu.Unlock()
	cn.signal()
}

// tryWrite writes as much of buf as the socket takes without waiting;
// sockMu held. An error is left for the writer to meet.
func (cn *conn) tryWrite(buf []byte) int { return cn.tryWritev(buf, nil) }

// take hands over the queued output to be written; wmu and sockMu held.
func (cn *conn) take() []byte {
	buf := cn.wbuf
	cn.wbuf, cn.spare = cn.spare[:0], nil
	cn.outBytes.Store(0)
	return buf
}

// writeOut writes buf to the socket, closing the connection when that
// fails; sockMu held. It reports whether the connection is still up.
func (cn *conn) writeOut(buf []byte) bool {
	cn.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := cn.nc.Write(buf); err != nil {
		select {
		case <-cn.quit:
		default:
			cn.log.Info("closing connection: write failed", "err", err)
		}
		cn.abort("write failed")
		return false
	}
	if cap(buf) > 4<<20 {
		buf = nil // do not keep a burst's buffer
	}
	cn.spare = buf
	select {
	case cn.drained <- struct{}{}:
	default:
	}
	if cn.wantWake.Swap(false) {
		cn.wakeDispatchers()
	}
	return true
}

// congested reports whether dispatch should hold off this connection; it
// asks the writer to wake the dispatchers once the output has drained.
func (cn *conn) congested() bool {
	if cn.outBytes.Load() < dispatchHighWater {
		return false
	}
	cn.wantWake.Store(true)
	return cn.outBytes.Load() >= dispatchHighWater
}

func (cn *conn) writeLoop() {
	defer cn.srv.wg.Done()
	ka := cn.c.opts.KeepAlive
	ticker := time.NewTicker(ka)
	defer ticker.Stop()
	var pingSent int64 // unix nanoseconds of an unanswered PING
	for {
		select {
		case <-cn.wsig:
		case <-cn.quit:
			return
		case <-ticker.C:
			// As Apache Pulsar: a connection silent for an interval gets
			// a PING; one that has sent nothing since the last PING by the
			// next tick is dead.
			last := cn.lastRead.Load()
			if pingSent != 0 && last < pingSent {
				cn.log.Warn("closing idle connection: no answer to ping", "silent", time.Since(time.Unix(0, last)).Round(time.Millisecond))
				cn.abort("keep-alive timeout")
				return
			}
			pingSent = 0
			if time.Since(time.Unix(0, last)) >= ka {
				if cn.connected.Load() {
					cn.send(&pb.CommandPing{})
				}
				pingSent = time.Now().UnixNano()
			}
			continue
		}
		for {
			cn.sockMu.Lock()
			cn.wmu.Lock()
			if len(cn.wbuf) == 0 {
				ending := cn.ending
				if ending {
					cn.wclosed = true
				}
				cn.wmu.Unlock()
				cn.sockMu.Unlock()
				if ending {
					cn.abort("finished")
					return
				}
				break
			}
			buf := cn.take()
			cn.wmu.Unlock()
			ok := cn.writeOut(buf)
			cn.sockMu.Unlock()
			if !ok {
				return
			}
		}
	}
}

// waitDrained holds the read loop while the client does not read its
// output; false means the connection ended.
func (cn *conn) waitDrained() bool {
	for {
		cn.wmu.Lock()
		n := len(cn.wbuf)
		cn.wmu.Unlock()
		if n < maxOutBuffer {
			return true
		}
		select {
		case <-cn.drained:
		case <-cn.quit:
			return false
		}
	}
}

func (cn *conn) readLoop() {
	defer cn.srv.wg.Done()
	defer cn.cleanup()
	defer func() {
		if r := recover(); r != nil {
			cn.log.Error("BROKER BUG: panic while serving a connection; closing it", "panic", r, "stack", string(debug.Stack()))
			cn.abort("panic")
		}
	}()
	// 16 KiB holds many small frames per read; a larger frame is read
	// straight into its own buffer anyway, so a bigger one would only cost
	// memory on every idle connection.
	r := pulsarwire.NewReader(bufio.NewReaderSize(rawsock.Wrap(cn.nc), readBufferSize), pulsarwire.MaxFrameSize(cn.c.opts.MaxMessageSize))
	// Every command is handled before the next is read, and SEND's entry
	// is copied by the store's append: one buffer serves all frames.
	r.ReuseMessageBuffers()
	defer cn.stopReceipts()
	// Until CONNECT, reads have a deadline: a connection that never speaks
	// is closed (Options.HandshakeTimeout).
	handshaking := cn.c.opts.HandshakeTimeout > 0
	if handshaking {
		cn.nc.SetReadDeadline(time.Now().Add(cn.c.opts.HandshakeTimeout))
	}
	for {
		f, err := r.Next()
		if handshaking && isTimeout(err) {
			cn.log.Warn("closing connection: no CONNECT in time", "timeout", cn.c.opts.HandshakeTimeout)
			cn.abort("handshake timeout")
			return
		}
		if err != nil {
			if errors.Is(err, pulsarwire.ErrChecksum) && f.Cmd != nil {
				cn.lastRead.Store(time.Now().UnixNano())
				cn.checksumError(f, err)
				continue
			}
			cn.readFailed(err)
			return
		}
		cn.lastRead.Store(time.Now().UnixNano())
		if !cn.handle(f) {
			return
		}
		if handshaking && cn.connected.Load() {
			handshaking = false
			cn.nc.SetReadDeadline(time.Time{})
		}
		if !cn.waitDrained() {
			return
		}
	}
}

func (cn *conn) readFailed(err error) {
	select {
	case <-cn.quit:
		return // we closed it
	default:
	}
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		cn.log.Debug("client closed the connection")
	case errors.Is(err, pulsarwire.ErrFrameTooLarge), errors.Is(err, pulsarwire.ErrTruncated), errors.Is(err, pulsarwire.ErrCorrupt):
		cn.log.Warn("closing connection: bad input", "err", err)
	default:
		cn.log.Info("closing connection: read failed", "err", err)
	}
}

// checksumError answers a SEND whose checksum does not match, as Apache
// Pulsar does (the frame was read whole, the connection goes on).
func (cn *conn) checksumError(f pulsarwire.Frame, err error) {
	if f.Cmd.GetType() != pb.BaseCommand_SEND || f.Cmd.GetSend() == nil {
		cn.log.Warn("closing connection: bad checksum", "command", f.Cmd.GetType().String(), "err", err)
		cn.finish()
		return
	}
	s := f.Cmd.GetSend()
	cn.log.Warn("message refused: checksum mismatch", "producer", s.GetProducerId(), "sequence", s.GetSequenceId(), "err", err)
	cn.sendFailed(s, pb.ServerError_ChecksumError, "Checksum failed on the broker")
}

func (cn *conn) producer(id uint64) *producer {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.producers[id]
}

// recentlyClosed reports whether the broker closed producer id (and the
// client has not created it again).
func (cn *conn) recentlyClosed(id uint64) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.closedProducers[id]
}

func (cn *conn) consumer(id uint64) *consumer {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.consumers[id]
}

// cleanup runs when the read loop ends: producers and consumers go away
// (a consumer's unacknowledged messages go back for redelivery).
func (cn *conn) cleanup() {
	cn.mu.Lock()
	ps := make([]*producer, 0, len(cn.producers))
	for _, p := range cn.producers {
		ps = append(ps, p)
	}
	cs := make([]*consumer, 0, len(cn.consumers))
	for _, c := range cn.consumers {
		cs = append(cs, c)
	}
	cn.producers = map[uint64]*producer{}
	cn.consumers = map[uint64]*consumer{}
	cn.mu.Unlock()
	for _, p := range ps {
		p.topic.removeProducer(p)
	}
	for _, c := range cs {
		c.sub.removeConsumer(c)
	}
	cn.srv.removeConn(cn)
	cn.finish()
}

// alive checks that the client still answers: it sends a PING and waits for
// a PONG. Apache Pulsar does this before refusing a second Exclusive
// consumer, so a client that vanished without closing its connection does
// not block its own successor until the keep-alive notices.
func (cn *conn) alive(timeout time.Duration) bool {
	select {
	case <-cn.pong:
	default:
	}
	cn.send(&pb.CommandPing{})
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-cn.pong:
		return true
	case <-cn.quit:
		return false
	case <-t.C:
		return false
	}
}

// wakeDispatchers wakes the subscriptions of this connection's consumers.
func (cn *conn) wakeDispatchers() {
	cn.mu.Lock()
	subs := make([]*subscription, 0, len(cn.consumers))
	for _, c := range cn.consumers {
		subs = append(subs, c.sub)
	}
	cn.mu.Unlock()
	for _, s := range subs {
		s.wakeup()
	}
}
