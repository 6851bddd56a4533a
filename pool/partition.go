package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// partProducer is the producer of one topic or partition on its owner's
// connection: it batches, numbers, sends, resends after a reconnect, and
// completes messages when their receipts arrive.
//
// The hot path (add) encodes each message straight into the open batch's
// buffer, after room left for the frame's header; closing the batch
// writes the header into that room, so the frame is built without
// copying the messages again, and the buffer is kept until the receipt
// for resending.
type partProducer struct {
	c         *state
	p         *Producer
	topic     string
	partition int32 // -1: not partitioned
	id        uint64
	batching  bool
	byKey     bool // BatchingOptions.ByKey: keyed, not cur
	log       *slog.Logger
	// txnJoined is the transaction last registered for this partition, so
	// that its other messages skip the registration's lookup.
	txnJoined atomic.Pointer[txn.Txn]

	mu             sync.Mutex
	conn           *connpool.Conn // nil while (re)connecting
	name           string
	userName       bool
	created        bool
	epoch          uint64
	topicEpoch     *uint64 // given by the broker to an exclusive producer; named when it reconnects
	nextSeq        uint64
	maxMessageSize int
	cur            *batch       // the open batch, nil when none
	keyed          keyedBatches // with byKey: the open batches, one per key
	pending        batchQueue
	holding        int // entries at the end of pending not written (batch.held)
	timer          *time.Timer
	reconnecting   bool
	err            error // set once the producer can no longer send
	codecs         pulsarwire.Codecs
}

// batch is a batch being filled, then a sent entry awaiting its receipt.
type batch struct {
	buf      []byte // room, then the messages (or the payload)
	room     int
	n        int
	firstSeq uint64
	lastSeq  uint64
	fields   pulsarwire.MessageFields // key and ordering key; all fields when not batching
	started  time.Time
	single   bool // one message sent unbatched by a batching producer
	dones    []completer
	bytes    int64 // payload bytes, held in the memory limit
	frame    []byte
	flushed  []chan struct{}
	// txn is the transaction every message of the batch is published in,
	// nil for none; txnID is its id, for the header; reg is the
	// registration of the partition in it, which the entry waits for.
	txn   *txn.Txn
	txnID pulsarwire.TxnID
	reg   *txn.Registration
	// held: pending but not written, waiting for a registration (its
	// own, or an older entry's).
	held bool
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// setTxn makes tx (nil: none) the batch's transaction, published to
// topic.
func (b *batch) setTxn(tx *txn.Txn, topic string) {
	b.txn = tx
	if tx != nil {
		b.txnID = tx.ID()
		b.reg = tx.Partition(topic)
	}
}

// regState reports whether the batch may be written: its partition's
// registration in its transaction is done (or it has none); err is the
// registration's failure, which fails the batch.
func (b *batch) regState() (ready bool, err error) {
	if b.reg == nil {
		return true, nil
	}
	return b.reg.Ready()
}

// header is the transaction id for the SEND header, nil for none.
func (b *batch) header() *pulsarwire.TxnID {
	if b.txn == nil {
		return nil
	}
	return &b.txnID
}

// recycle puts b back in the pool; its buffer is the caller's business.
func (b *batch) recycle() {
	clear(b.dones)
	*b = batch{dones: b.dones[:0], flushed: b.flushed[:0]}
	batches.Put(b)
}

// Buffers. A batch fills a buffer of up to MaxBytes; once closed, a
// batch that used little of it keeps a copy of the right size instead,
// so that what waits for receipts is never much more than the messages
// themselves (Options.MemoryLimit counts payload bytes). The big buffers
// are pooled, in boxes so that pooling them does not allocate: full
// boxes in bufs, empty ones in boxes.

type bufBox struct{ b []byte }

var bufs, boxes sync.Pool

// getBuf returns an empty buffer of at least n bytes' capacity.
func (pp *partProducer) getBuf(n int) []byte {
	if v := bufs.Get(); v != nil {
		box := v.(*bufBox)
		b := box.b
		box.b = nil
		boxes.Put(box)
		if cap(b) >= n {
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

// putBuf pools a buffer of the usual size. The bound comes from the
// options alone: putBuf runs outside pp.mu (after receipts), where the
// broker's maxMessageSize may be changing under a reconnect.
func (pp *partProducer) putBuf(b []byte) {
	mb := pp.p.opts.Batching.MaxBytes
	if c := cap(b); c < 32<<10 || c > 2*(mb+mb/8+512) {
		return
	}
	box, _ := boxes.Get().(*bufBox)
	if box == nil {
		box = new(bufBox)
	}
	box.b = b
	bufs.Put(box)
}

// bufSize is the capacity of a fresh batch buffer.
func (pp *partProducer) bufSize() int {
	mb := pp.p.opts.Batching.MaxBytes
	return min(mb+mb/8, pp.maxMessageSize) + 512
}

func newPartProducer(p *Producer, topic string, partition int32) *partProducer {
	c := p.c
	pp := &partProducer{
		c:              c,
		p:              p,
		topic:          topic,
		partition:      partition,
		id:             c.producerID.Add(1),
		batching:       !p.opts.Batching.Disabled,
		byKey:          !p.opts.Batching.Disabled && p.opts.Batching.ByKey,
		log:            c.log.With("topic", topic),
		name:           p.opts.Name,
		userName:       p.opts.Name != "",
		maxMessageSize: pulsarwire.DefaultMaxMessageSize,
	}
	if pp.byKey {
		pp.keyed.byKey = map[batchKey]*batch{}
	}
	pp.timer = time.AfterFunc(time.Hour, pp.onTimer)
	pp.timer.Stop()
	return pp
}

// add puts one message into the open batch, closing the batch when it is
// full. The caller holds the message's share of the pending limits; tx is
// the message's transaction, nil for none.
func (pp *partProducer) add(m *Message, size int64, tx *txn.Txn, done completer) {
	f := pulsarwire.MessageFields{Key: m.Key, OrderingKey: m.OrderingKey, Properties: m.Properties}
	if !m.EventTime.IsZero() {
		f.EventTime = uint64(m.EventTime.UnixMilli())
	}
	pp.mu.Lock()
	var err error
	if pp.err != nil {
		err = fmt.Errorf("publish to %s: %w", pp.topic, pp.err)
	} else {
		err = pp.addLocked(&f, m.Payload, size, tx, done)
	}
	pp.mu.Unlock()
	if err != nil {
		pp.release(1, size)
		done.complete(pulsarwire.MessageID{}, err)
	}
}

// addLocked numbers f and puts it into the open batch (with ByKey, its
// key's). A batch holds the messages of one transaction (or of none): a
// message of another closes the open batch first. It returns the refusal
// of a message no entry can hold, taking nothing.
func (pp *partProducer) addLocked(f *pulsarwire.MessageFields, payload []byte, size int64, tx *txn.Txn, done completer) error {
	opts := &pp.p.opts.Batching
	f.SequenceID = pp.nextSeq
	need := len(payload)
	if pp.batching {
		need = pulsarwire.SingleMessageSize(f, len(payload))
	}
	if pp.byKey {
		return pp.addKeyedLocked(f, payload, need, size, tx, done)
	}
	if b := pp.cur; b != nil {
		used := len(b.buf) - b.room
		if b.txn != tx || used+need > opts.MaxBytes || !fitsEntry(pp.maxMessageSize, b.room, used+need) {
			pp.flushLocked()
		}
	}
	b := pp.cur
	if b == nil {
		b = pp.newBatchLocked(f, tx)
		if !fitsEntry(pp.maxMessageSize, b.room, need) {
			// Before taking a buffer or setting the clock for nothing.
			b.recycle()
			return pp.sendAloneLocked(f, payload, size, tx, done)
		}
		pp.startLocked(b)
	}
	pp.appendLocked(b, f, payload, size, done)
	if b.n >= opts.MaxMessages || len(b.buf)-b.room >= opts.MaxBytes {
		pp.flushLocked()
	}
	return nil
}

// appendLocked encodes f into batch b and counts it there.
func (pp *partProducer) appendLocked(b *batch, f *pulsarwire.MessageFields, payload []byte, size int64, done completer) {
	if pp.batching {
		b.buf = pulsarwire.AppendSingleMessage(b.buf, f, payload)
	} else {
		b.buf = append(b.buf, payload...)
	}
	pp.nextSeq++
	b.n++
	b.lastSeq = f.SequenceID
	b.bytes += size
	b.dones = append(b.dones, done)
}

// startLocked makes b, fresh from newBatchLocked, the open batch: it
// takes a buffer and sets the clock.
func (pp *partProducer) startLocked(b *batch) {
	if pp.batching {
		b.buf = pp.getBuf(max(pp.bufSize(), b.room+4096))
	} else {
		b.buf = pp.getBuf(b.room + 4096)
	}
	b.buf = b.buf[:b.room]
	pp.cur = b
	if pp.batching {
		pp.timer.Reset(pp.p.opts.Batching.MaxDelay)
	}
}

// newBatchLocked returns a batch whose first message is f, published in
// tx (nil: none), without its buffer: room is how many bytes its header
// will need.
func (pp *partProducer) newBatchLocked(f *pulsarwire.MessageFields, tx *txn.Txn) *batch {
	b := batches.Get().(*batch)
	b.firstSeq = f.SequenceID
	if pp.batching {
		b.fields = pulsarwire.MessageFields{Key: f.Key, OrderingKey: f.OrderingKey}
	} else {
		b.fields = *f
	}
	b.setTxn(tx, pp.topic)
	b.room = pulsarwire.SendHeaderRoom(&pulsarwire.SendHeader{
		ProducerName: pp.name, Batch: pp.batching, Message: b.fields, Txn: b.header(),
	})
	b.started = time.Now()
	return b
}

// onTimer closes a batch that waited MaxDelay (with ByKey, every open
// batch once the oldest did).
func (pp *partProducer) onTimer() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	b := pp.cur
	if pp.byKey && len(pp.keyed.order) > 0 {
		b = pp.keyed.order[0]
	}
	if b == nil || pp.err != nil {
		return
	}
	wait := pp.p.opts.Batching.MaxDelay
	if age := time.Since(b.started); age < wait-wait/8 {
		// A younger batch than the one the timer was set for.
		pp.timer.Reset(wait - age)
		return
	}
	pp.flushLocked()
}

// flushLocked closes the open batch (with ByKey, every open batch): it
// becomes a frame, joins the pending queue and, when connected, goes out.
func (pp *partProducer) flushLocked() {
	if pp.byKey {
		pp.flushKeyedLocked()
		return
	}
	b := pp.cur
	if b == nil {
		return
	}
	pp.cur = nil
	pp.sendLocked(b)
}

// sendLocked closes batch b: it becomes a frame, joins the pending queue
// and, when connected, goes out.
func (pp *partProducer) sendLocked(b *batch) {
	h := pulsarwire.SendHeader{
		ProducerID:        pp.id,
		SequenceID:        b.firstSeq,
		HighestSequenceID: b.lastSeq,
		NumMessages:       int32(b.n),
		Batch:             pp.batching && !b.single,
		ProducerName:      pp.name,
		PublishTime:       uint64(b.started.UnixMilli()),
		Message:           b.fields,
		Txn:               b.header(),
	}
	if pp.byKey {
		// A key's batch holds sequence ids interleaved with other keys'
		// batches: the entry is named by its first alone (as the Java
		// client's key-based batches are), so that a broker deduplicating
		// by the highest sequence id seen does not drop the next entry.
		h.HighestSequenceID = b.firstSeq
	}
	if ct, _ := pp.p.opts.Compression.wire(); ct != pb.CompressionType_NONE { // checked by New
		out := pp.getBuf(len(b.buf))[:b.room]
		out, err := pp.codecs.Compress(ct, out, b.buf[b.room:])
		if err == nil {
			h.Compression = ct
			h.UncompressedSize = uint32(len(b.buf) - b.room)
			b.buf, out = out, b.buf
		}
		// Compression is per entry: one that does not compress (LZ4
		// gives up on incompressible input) goes out as it is.
		pp.putBuf(out)
	}
	if n := len(b.buf); cap(b.buf) > 4*n+8<<10 {
		small := make([]byte, n)
		copy(small, b.buf)
		pp.putBuf(b.buf)
		b.buf = small
	}
	b.fields.Properties = nil // read; the caller's map is not kept
	frame, err := pulsarwire.PutSendHeader(b.buf, b.room, &h)
	if err != nil {
		pp.failBatchLocked(b, fmt.Errorf("publish to %s: %w", pp.topic, err))
		return
	}
	b.frame = frame
	ready, err := b.regState()
	if err != nil {
		pp.failBatchLocked(b, fmt.Errorf("publish to %s: %w", pp.topic, err))
		return
	}
	pp.pending.push(b)
	if pp.holding > 0 || !ready {
		// In order: after the entries held before it.
		b.held = true
		pp.holding++
		return
	}
	if pp.conn != nil {
		pp.conn.WriteFrame(frame)
	}
}

// releaseHeld writes the held entries whose registrations are done, in
// order, up to the first that still waits; an entry whose registration
// failed fails (it was never written). A registration runs it when done.
func (pp *partProducer) releaseHeld() {
	pp.mu.Lock()
	if pp.holding == 0 {
		pp.mu.Unlock()
		return
	}
	var failed []*batch
	var cause error
	for b := range pp.pending.all() {
		if !b.held {
			continue
		}
		ready, err := b.regState()
		if !ready {
			break
		}
		b.held = false
		pp.holding--
		if err != nil {
			failed, cause = append(failed, b), err
		} else if pp.conn != nil {
			pp.conn.WriteFrame(b.frame)
		}
	}
	if len(failed) > 0 {
		kept := batchQueue{}
		for b := range pp.pending.all() {
			if !slices.Contains(failed, b) {
				kept.push(b)
			}
		}
		pp.pending = kept
	}
	pp.mu.Unlock()
	for _, b := range failed {
		pp.finish(b, pulsarwire.MessageID{}, fmt.Errorf("publish to %s: %w", pp.topic, cause))
	}
}

// failBatchLocked fails a batch that never made it to the queue; its
// callbacks run once the lock is released.
func (pp *partProducer) failBatchLocked(b *batch, err error) {
	// (It cannot happen unless SendHeaderRoom is wrong.)
	if !pp.c.pool.Spawn(func() { pp.finish(b, pulsarwire.MessageID{}, err) }) {
		pp.finish(b, pulsarwire.MessageID{}, err)
	}
}

func (pp *partProducer) release(messages, bytes int64) {
	pp.p.pending.release(messages)
	pp.c.memory.release(bytes)
}

// finish completes every message of b with its id or err.
func (pp *partProducer) finish(b *batch, id pulsarwire.MessageID, err error) {
	pp.release(int64(b.n), b.bytes)
	id.Partition = pp.partition
	id.BatchIndex = -1
	batched := pp.batching && !b.single
	if batched && err == nil {
		id.BatchSize = int32(b.n)
	}
	for i, d := range b.dones {
		if batched && err == nil {
			id.BatchIndex = int32(i)
		}
		d.complete(id, err)
	}
	for _, ch := range b.flushed {
		close(ch)
	}
	pp.putBuf(b.buf)
	b.recycle()
}

// receipt completes the oldest pending batch.
func (pp *partProducer) Receipt(conn *connpool.Conn, r *pb.CommandSendReceipt) {
	seq := r.GetSequenceId()
	pp.mu.Lock()
	if pp.conn != conn {
		pp.mu.Unlock()
		return
	}
	b := pp.pending.peek()
	if b == nil || seq < b.firstSeq {
		// A batch sent twice (before and after a reconnect) is
		// acknowledged twice; the second receipt finds it gone.
		pp.mu.Unlock()
		return
	}
	if seq > b.firstSeq {
		// Apache Pulsar holds a topic's transactional entries while it
		// takes the topic's first transaction buffer snapshot, and
		// stores entries outside a transaction meanwhile: a receipt may
		// pass pending transactional entries, and takes its own.
		if b = pp.pending.takePastTxns(seq); b == nil {
			pp.mu.Unlock()
			// The broker skipped something: resend everything on a new
			// connection, as Apache Pulsar's clients do.
			conn.Close(fmt.Errorf("%w: receipt for sequence id %d of %s while %d is the oldest pending",
				pulsarwire.ErrCorrupt, seq, pp.topic, pp.pending.peek().firstSeq))
			return
		}
		pp.mu.Unlock()
		pp.finish(b, pulsarwire.MessageIDFromProto(r.GetMessageId()), nil)
		return
	}
	pp.pending.pop()
	pp.mu.Unlock()
	pp.finish(b, pulsarwire.MessageIDFromProto(r.GetMessageId()), nil)
}

// sendError handles the broker's refusal of an entry.
func (pp *partProducer) SendError(conn *connpool.Conn, e *pb.CommandSendError) {
	err := pulsarwire.NewServerError(e.GetError(), e.GetMessage())
	pp.mu.Lock()
	if pp.conn != conn {
		pp.mu.Unlock()
		return
	}
	switch e.GetError() {
	case pb.ServerError_TopicTerminatedError:
		pp.mu.Unlock()
		pp.p.fail(fmt.Errorf("publish to %s: %w", pp.topic, err))
		return
	case pb.ServerError_NotAllowedError, pb.ServerError_InvalidTopicName, pb.ServerError_IncompatibleSchema,
		pb.ServerError_AuthorizationError, pb.ServerError_ProducerFenced,
		// A SEND in a transaction that is not open (it ended, or its
		// timeout aborted it): the entry fails, and so does its commit.
		pb.ServerError_TransactionNotFound, pb.ServerError_InvalidTxnStatus, pb.ServerError_TransactionConflict:
		// Final for this entry: fail it, carry on with the rest.
		var failed *batch
		if b := pp.pending.peek(); b != nil && b.firstSeq == e.GetSequenceId() {
			failed = pp.pending.pop()
		} else if b != nil {
			failed = pp.pending.takePastTxns(e.GetSequenceId()) // see Receipt
		}
		pp.mu.Unlock()
		if failed != nil {
			pp.finish(failed, pulsarwire.MessageID{}, fmt.Errorf("publish to %s: %w", pp.topic, err))
		}
		return
	}
	pp.mu.Unlock()
	// Anything else ("not now", a checksum error): resend on a new
	// connection, as Apache Pulsar's clients do.
	conn.Close(fmt.Errorf("SEND_ERROR for %s: %w", pp.topic, err))
}

// closedByBroker handles CLOSE_PRODUCER: the topic moved or is being
// unloaded. Look it up again and re-create the producer.
func (pp *partProducer) ClosedByBroker(conn *connpool.Conn) {
	pp.mu.Lock()
	if pp.conn != conn {
		pp.mu.Unlock()
		return
	}
	pp.conn = nil
	pp.mu.Unlock()
	conn.UnregisterProducer(pp.id, pp)
	pp.log.Info("producer closed by the broker; re-creating it")
	pp.startReconnect()
}

// connClosed handles the loss of the producer's connection.
func (pp *partProducer) ConnClosed(conn *connpool.Conn, err error) {
	pp.mu.Lock()
	if pp.conn != conn {
		pp.mu.Unlock()
		return
	}
	pp.conn = nil
	pp.mu.Unlock()
	if !errors.Is(err, ErrClosed) {
		pp.startReconnect()
	}
}

func (pp *partProducer) startReconnect() {
	pp.mu.Lock()
	if pp.reconnecting || pp.err != nil || pp.c.pool.Context().Err() != nil {
		pp.mu.Unlock()
		return
	}
	pp.reconnecting = true
	pp.mu.Unlock()
	if !pp.c.pool.Spawn(pp.reconnect) {
		pp.mu.Lock()
		pp.reconnecting = false
		pp.mu.Unlock()
	}
}

func (pp *partProducer) reconnect() {
	err := pp.c.retry(pp.c.pool.Context(), "re-create producer for "+pp.topic, pp.connect)
	pp.mu.Lock()
	pp.reconnecting = false
	lost := err == nil && pp.conn == nil
	pp.mu.Unlock()
	if err != nil && !errors.Is(err, ErrClosed) {
		pp.p.fail(err)
	}
	if lost {
		// The new connection closed before we got here, and its notice
		// found us still reconnecting.
		pp.startReconnect()
	}
}

// connect looks the topic up, creates the producer on the owner's
// connection and resends, in order, every entry still awaiting a receipt.
// One attempt.
func (pp *partProducer) connect(ctx context.Context) error {
	conn, err := pp.c.pool.Conn(ctx, pp.topic)
	if err != nil {
		return err
	}
	if err := conn.RegisterProducer(pp.id, pp); err != nil {
		return err
	}
	pp.mu.Lock()
	cmd := &pb.CommandProducer{
		Topic:                    proto.String(pp.topic),
		ProducerId:               proto.Uint64(pp.id),
		Epoch:                    proto.Uint64(pp.epoch),
		UserProvidedProducerName: proto.Bool(pp.userName),
	}
	if mode := pp.p.opts.AccessMode; mode != AccessShared {
		if pp.topicEpoch != nil {
			cmd.TopicEpoch = proto.Uint64(*pp.topicEpoch)
			if mode == AccessExclusiveWithFencing {
				mode = AccessExclusive // see AccessExclusiveWithFencing
			}
		}
		cmd.ProducerAccessMode = pb.ProducerAccessMode(mode).Enum()
	}
	if pp.name != "" {
		cmd.ProducerName = proto.String(pp.name)
	}
	pp.epoch++
	pp.mu.Unlock()
	resp, err := conn.Request(ctx, pulsarwire.Wrap(cmd))
	if err != nil {
		conn.UnregisterProducer(pp.id, pp)
		if own := pp.ownGhost(err); own != nil {
			return own
		}
		if _, isServer := pulsarwire.ServerCode(err); !isServer && !conn.Closed() {
			// No answer in time: the broker may still create it; tell it
			// to drop that one before we try again.
			conn.Send(pulsarwire.Wrap(&pb.CommandCloseProducer{
				ProducerId: proto.Uint64(pp.id), RequestId: proto.Uint64(pp.c.pool.NewRequestID()),
			}))
		}
		return fmt.Errorf("create producer for %s on %s: %w", pp.topic, conn.Host(), err)
	}
	ps := resp.GetProducerSuccess()
	if ps == nil {
		conn.UnregisterProducer(pp.id, pp)
		return fmt.Errorf("create producer for %s: broker answered %s: %w", pp.topic, resp.GetType(), pulsarwire.ErrCorrupt)
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.err != nil {
		conn.UnregisterProducer(pp.id, pp)
		return pp.err
	}
	if pp.name == "" {
		pp.name = ps.GetProducerName()
	}
	if ps.TopicEpoch != nil && pp.p.opts.AccessMode != AccessShared {
		e := ps.GetTopicEpoch()
		pp.topicEpoch = &e
	}
	if !pp.created {
		pp.created = true
		if last := ps.GetLastSequenceId(); last >= 0 {
			pp.nextSeq = uint64(last) + 1
		}
	}
	pp.maxMessageSize = conn.MaxMessageSize()
	if conn.Closed() {
		// It closed before we were on it, so its notice passed us by.
		conn.UnregisterProducer(pp.id, pp)
		return conn.Err()
	}
	pp.conn = conn
	lost := pp.dropTxnEntriesLocked()
	if len(lost) > 0 {
		// Completing them runs callbacks: not under the lock.
		err := fmt.Errorf("publish to %s in a transaction: the connection was lost before the receipt; "+
			"the broker may hold the entry already, so it is not sent again and the transaction must abort", pp.topic)
		if !pp.c.pool.Spawn(func() {
			for _, b := range lost {
				pp.finish(b, pulsarwire.MessageID{}, err)
			}
		}) {
			for _, b := range lost {
				pp.finish(b, pulsarwire.MessageID{}, err)
			}
		}
	}
	n := 0
	for b := range pp.pending.all() {
		if b.held {
			break // written once its registration is done
		}
		conn.WriteFrame(b.frame)
		n++
	}
	if n > 0 || len(lost) > 0 {
		pp.log.Info("producer re-created; resent pending entries", "broker", conn.Host(), "entries", n, "transactional_entries_failed", len(lost))
	}
	return nil
}

// ownGhost turns a reconnect's refusal naming this very producer as the
// topic's exclusive one into a retryable error: the broker has not yet
// seen our previous connection go, and drops it in time. Only a producer
// that reconnects is concerned; the name is the broker's answer to our
// first PRODUCER, which we name again.
func (pp *partProducer) ownGhost(err error) error {
	var se *pulsarwire.ServerError
	if !errors.As(err, &se) || se.Code != pb.ServerError_ProducerFenced {
		return nil
	}
	pp.mu.Lock()
	name, again := pp.name, pp.topicEpoch != nil
	pp.mu.Unlock()
	if !again || name == "" || !strings.HasSuffix(se.Message, "Topic has an existing exclusive producer: "+name) {
		return nil
	}
	return fmt.Errorf("create producer for %s: the broker still holds this producer's previous connection: %w",
		pp.topic, pulsarwire.NewServerError(pb.ServerError_ServiceNotReady, se.Message))
}

// dropTxnEntriesLocked takes the entries published in a transaction out
// of the pending queue. After a lost connection they are never sent
// again: the broker may have stored one whose receipt was lost, and a
// second copy would be a duplicate inside the transaction. Their failure
// makes the transaction abort, and its inputs come again.
func (pp *partProducer) dropTxnEntriesLocked() []*batch {
	var lost []*batch
	kept := batchQueue{}
	for b := range pp.pending.all() {
		if b.txn != nil && !b.held { // a held entry was never sent
			lost = append(lost, b)
		} else {
			kept.push(b)
		}
	}
	if len(lost) > 0 {
		pp.pending = kept
	}
	return lost
}

// flushTxn sends the open batches now; a transaction that published
// through this producer runs it as it commits.
func (pp *partProducer) flushTxn(context.Context) error {
	pp.mu.Lock()
	pp.flushLocked()
	pp.mu.Unlock()
	return nil
}

// flushMark closes the open batch and returns a channel closed when the
// newest pending entry is done.
func (pp *partProducer) flushMark() <-chan struct{} {
	ch := make(chan struct{})
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.flushLocked()
	last := pp.pending.back()
	if last == nil {
		close(ch)
		return ch
	}
	last.flushed = append(last.flushed, ch)
	return ch
}

func (pp *partProducer) closeOnBroker(ctx context.Context) {
	pp.mu.Lock()
	conn := pp.conn
	pp.mu.Unlock()
	if conn == nil || ctx.Err() != nil {
		return
	}
	conn.Request(ctx, pulsarwire.Wrap(&pb.CommandCloseProducer{ProducerId: proto.Uint64(pp.id)}))
	conn.UnregisterProducer(pp.id, pp)
}

func (pp *partProducer) setFailed(err error) {
	pp.mu.Lock()
	if pp.err == nil {
		pp.err = err
	}
	pp.mu.Unlock()
}

// shutdown stops the producer for good: everything not yet acknowledged
// fails with err.
func (pp *partProducer) shutdown(err error) {
	pp.timer.Stop()
	pp.mu.Lock()
	if pp.err == nil {
		pp.err = err
	}
	err = pp.err
	var failed []*batch
	if pp.cur != nil {
		failed = append(failed, pp.cur)
		pp.cur = nil
	}
	failed = append(failed, pp.keyed.takeAll()...)
	for b := range pp.pending.all() {
		failed = append(failed, b)
	}
	pp.pending = batchQueue{}
	pp.holding = 0
	conn := pp.conn
	pp.conn = nil
	pp.codecs.Close()
	pp.mu.Unlock()
	if conn != nil {
		conn.UnregisterProducer(pp.id, pp)
	}
	for _, b := range failed {
		pp.finish(b, pulsarwire.MessageID{}, fmt.Errorf("publish to %s: %w", pp.topic, err))
	}
}

// batchQueue is the FIFO of entries awaiting receipts.
type batchQueue struct {
	items []*batch
	head  int
}

func (q *batchQueue) push(b *batch) {
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 64 && q.head > len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, b)
}

func (q *batchQueue) peek() *batch {
	if q.head == len(q.items) {
		return nil
	}
	return q.items[q.head]
}

func (q *batchQueue) pop() *batch {
	b := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	return b
}

// takePastTxns takes out the batch whose first sequence id is seq when
// every batch before it is transactional (nil, taking nothing, when there
// is none such): a broker may store entries outside a transaction before
// transactional ones sent earlier (Receipt).
func (q *batchQueue) takePastTxns(seq uint64) *batch {
	for i := q.head; i < len(q.items); i++ {
		b := q.items[i]
		if b.firstSeq == seq {
			copy(q.items[q.head+1:i+1], q.items[q.head:i])
			q.items[q.head] = nil
			q.head++
			return b
		}
		if b.txn == nil || b.firstSeq > seq {
			return nil
		}
	}
	return nil
}

func (q *batchQueue) back() *batch {
	if q.head == len(q.items) {
		return nil
	}
	return q.items[len(q.items)-1]
}

func (q *batchQueue) all() func(func(*batch) bool) {
	return func(yield func(*batch) bool) {
		for _, b := range q.items[q.head:] {
			if !yield(b) {
				return
			}
		}
	}
}
