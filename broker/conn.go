package broker

import (
	"bufio"
	"errors"
	"fmt"
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
	ending  bool // the writer flushes what it has, then closes
	held    bool // the read loop flushes the output itself (holdOutput): no signal
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
	// (receipts.go); nil until the first SEND to a log that syncs. Only
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
// (docs/benchmarks.md, "Entries written from where they were read, and
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

// handle runs one command; false ends the connection.
func (cn *conn) handle(f pulsarwire.Frame) bool {
	cmd := f.Cmd
	typ := cmd.GetType()
	if typ != pb.BaseCommand_CONNECT && !cn.connected.Load() {
		cn.log.Warn("closing connection: command before CONNECT", "command", typ.String())
		cn.finish()
		return false
	}
	if cn.c.faults.n.Load() > 0 {
		fault, _, ok := cn.c.faults.match(cn.srv.index, typ, cn.topicOf(cmd))
		if ok {
			if fault.Delay > 0 {
				t := time.NewTimer(fault.Delay)
				select {
				case <-t.C:
				case <-cn.quit:
					t.Stop()
					return false
				}
			}
			if fault.Drop {
				cn.log.Info("fault: dropping the connection", "command", typ.String())
				cn.abort("fault")
				return false
			}
			if fault.answers() {
				cn.log.Debug("fault: answering with an error", "command", typ.String(), "error", fault.Err.String())
				cn.answerError(cmd, fault.Err, fault.message())
				return true
			}
		}
	}
	body := pulsarwire.Body(cmd)
	h := handlerOf(typ)
	if body == nil && typ != pb.BaseCommand_PING && typ != pb.BaseCommand_PONG {
		if h != nil {
			cn.log.Warn("closing connection: command without its body", "command", typ.String())
			cn.finish()
			return false
		}
		cn.unsupported(cmd)
		return true
	}
	if h == nil {
		cn.unsupported(cmd)
		return true
	}
	return h(cn, f, body)
}

// A handler serves one kind of command, given its frame and its body
// (nil for PING and PONG, which may come without one); false ends the
// connection.
type handler func(cn *conn, f pulsarwire.Frame, body proto.Message) bool

// handlers are the commands a client may send that this broker serves,
// by kind. The handlers themselves live in one file per command family.
var handlers = [...]handler{
	pb.BaseCommand_CONNECT: func(cn *conn, _ pulsarwire.Frame, m proto.Message) bool {
		return cn.handleConnect(m.(*pb.CommandConnect))
	},
	pb.BaseCommand_PING: func(cn *conn, _ pulsarwire.Frame, _ proto.Message) bool {
		cn.send(&pb.CommandPong{})
		return true
	},
	pb.BaseCommand_PONG: func(cn *conn, _ pulsarwire.Frame, _ proto.Message) bool {
		select {
		case cn.pong <- struct{}{}:
		default:
		}
		return true
	},
	pb.BaseCommand_SEND: func(cn *conn, f pulsarwire.Frame, _ proto.Message) bool {
		return cn.handleSend(f)
	},
	// We never challenge; a client answering anyway is harmless.
	pb.BaseCommand_AUTH_RESPONSE:                     func(*conn, pulsarwire.Frame, proto.Message) bool { return true },
	pb.BaseCommand_LOOKUP:                            serve((*conn).handleLookup),
	pb.BaseCommand_PARTITIONED_METADATA:              serve((*conn).handlePartitionedMetadata),
	pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:           serve((*conn).handleTopicsOfNamespace),
	pb.BaseCommand_PRODUCER:                          serve((*conn).handleProducer),
	pb.BaseCommand_CLOSE_PRODUCER:                    serve((*conn).handleCloseProducer),
	pb.BaseCommand_SUBSCRIBE:                         serve((*conn).handleSubscribe),
	pb.BaseCommand_FLOW:                              serve((*conn).handleFlow),
	pb.BaseCommand_ACK:                               serve((*conn).handleAck),
	pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES: serve((*conn).handleRedeliver),
	pb.BaseCommand_CLOSE_CONSUMER:                    serve((*conn).handleCloseConsumer),
	pb.BaseCommand_UNSUBSCRIBE:                       serve((*conn).handleUnsubscribe),
	pb.BaseCommand_SEEK:                              serve((*conn).handleSeek),
	pb.BaseCommand_GET_LAST_MESSAGE_ID:               serve((*conn).handleGetLastMessageID),
	pb.BaseCommand_CONSUMER_STATS:                    serve((*conn).handleConsumerStats),
	pb.BaseCommand_GET_SCHEMA:                        serve((*conn).handleGetSchema),
	pb.BaseCommand_GET_OR_CREATE_SCHEMA:              serve((*conn).handleGetOrCreateSchema),
}

// serve makes a handler of a function of the command's body alone.
func serve[M proto.Message](h func(*conn, M)) handler {
	return func(cn *conn, _ pulsarwire.Frame, body proto.Message) bool {
		h(cn, body.(M))
		return true
	}
}

// handlerOf is the handler of kind t, nil when this broker does not serve it.
func handlerOf(t pb.BaseCommand_Type) handler {
	if t < 0 || int(t) >= len(handlers) {
		return nil
	}
	return handlers[t]
}

// unsupported answers a command this broker does not implement
// (transactions, topic-list watchers, anything a server sends): with an
// ERROR when it carries a request id, else by closing the connection, as
// the client's state can no longer be trusted.
func (cn *conn) unsupported(cmd *pb.BaseCommand) {
	typ := cmd.GetType()
	msg := fmt.Sprintf("%s is not supported by the streamrun broker", typ)
	if r := pulsarwire.Refusal(cmd, pb.ServerError_NotAllowedError, msg); r != nil {
		rid, _ := pulsarwire.RequestID(cmd)
		cn.log.Warn("unsupported command refused", "command", typ.String(), "request_id", rid)
		cn.send(r)
		return
	}
	cn.log.Warn("closing connection: unsupported command without a request id to answer", "command", typ.String())
	cn.finish()
}

// answerError answers a command with a server error in the shape the
// client waits for (pulsarwire.Refusal); a refused CONNECT ends the
// connection.
func (cn *conn) answerError(cmd *pb.BaseCommand, code pb.ServerError, msg string) {
	if cmd.GetType() == pb.BaseCommand_CONNECT {
		cn.sendError(noRequest, code, msg)
		cn.finish()
		return
	}
	if r := pulsarwire.Refusal(cmd, code, msg); r != nil {
		cn.send(r)
	}
}

// The failure replies of commands whose answer is not CommandError: the
// client waits for its own response type, with the error inside.

func (cn *conn) lookupFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandLookupTopicResponse{
		RequestId: proto.Uint64(rid),
		Response:  pb.CommandLookupTopicResponse_Failed.Enum(),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	})
}

func (cn *conn) metadataFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandPartitionedTopicMetadataResponse{
		RequestId: proto.Uint64(rid),
		Response:  pb.CommandPartitionedTopicMetadataResponse_Failed.Enum(),
		Error:     code.Enum(),
		Message:   proto.String(msg),
	})
}

func (cn *conn) sendFailed(s *pb.CommandSend, code pb.ServerError, msg string) {
	cn.sendAfterReceipts(&pb.CommandSendError{
		ProducerId: proto.Uint64(s.GetProducerId()),
		SequenceId: proto.Uint64(s.GetSequenceId()),
		Error:      code.Enum(),
		Message:    proto.String(msg),
	})
}

func (cn *conn) getSchemaFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandGetSchemaResponse{RequestId: proto.Uint64(rid), ErrorCode: code.Enum(), ErrorMessage: proto.String(msg)})
}

func (cn *conn) getOrCreateSchemaFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandGetOrCreateSchemaResponse{RequestId: proto.Uint64(rid), ErrorCode: code.Enum(), ErrorMessage: proto.String(msg)})
}

func (cn *conn) consumerStatsFailed(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandConsumerStatsResponse{RequestId: proto.Uint64(rid), ErrorCode: code.Enum(), ErrorMessage: proto.String(msg)})
}

// ackReply answers an ACK that carries a request id (nothing otherwise):
// success when code is nil.
func (cn *conn) ackReply(a *pb.CommandAck, code *pb.ServerError, msg string) {
	if a.RequestId == nil {
		return
	}
	r := &pb.CommandAckResponse{ConsumerId: proto.Uint64(a.GetConsumerId()), RequestId: proto.Uint64(a.GetRequestId())}
	if code != nil {
		r.Error, r.Message = code, proto.String(msg)
	}
	cn.send(r)
}

func (cn *conn) sendError(rid uint64, code pb.ServerError, msg string) {
	cn.send(&pb.CommandError{RequestId: proto.Uint64(rid), Error: code.Enum(), Message: proto.String(msg)})
}

// topicOf names the topic a command is about, for fault matching: the
// one it names, else its producer's or consumer's.
func (cn *conn) topicOf(cmd *pb.BaseCommand) string {
	if name, ok := pulsarwire.TopicOf(cmd); ok {
		return fullName(name)
	}
	if id, ok := pulsarwire.ProducerID(cmd); ok {
		if p := cn.producer(id); p != nil {
			return p.topic.name
		}
		return ""
	}
	if id, ok := pulsarwire.ConsumerID(cmd); ok {
		if c := cn.consumer(id); c != nil {
			return c.sub.t.name
		}
	}
	return ""
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
