package subscribe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// partConsumer consumes one topic or one partition: a consumer id that
// it keeps for life, and the session (the SUBSCRIBE on one connection)
// it currently has, replaced after every loss.
//
// Flow control: flow holds the generation of the current session and
// the messages taken from the receive queue since the last FLOW. Every
// session starts with ReceiverQueue permits; taking half of them sends a
// FLOW for what was taken. Entries of an older generation are stale (the
// broker sends them again to the new session) and are dropped without
// counting, so the broker never has more than ReceiverQueue messages
// outstanding for a session.
type partConsumer struct {
	c *Consumer
	// txnJoined is the transaction whose subscription registration for
	// this partition was answered last, so that its other
	// acknowledgements skip the registration's lookup.
	txnJoined atomic.Pointer[txn.Txn]
	topic     string // full name of the topic or partition
	base      string // the partitioned topic's name, or topic
	partition int32  // -1: not a partition
	id        uint64
	// discovered: found by a pattern; it leaves when its topic does, and
	// is never created by subscribing.
	discovered bool
	initial    InitialPosition

	ctx    context.Context // ends when the part closes
	cancel context.CancelFunc

	// permits are granted to the broker and not used yet (Permits).
	permits atomic.Int64

	flow    atomic.Uint64 // gen<<countBits | messages taken since the last FLOW
	genSeq  atomic.Uint64
	seq     atomic.Uint64 // arrival number of the last entry queued
	drop    atomic.Uint64 // entries numbered below this are dropped (and counted)
	epoch   atomic.Uint64 // consumer epoch: raised by a redelivery of everything
	stale   staleWatch    // entries dropped for an old epoch (stalewatch.go)
	partial partialAcks   // batches partly acknowledged
	// skipSet says skip is set, so that split, which asks for every
	// batch entry, takes mu only after a seek to a batch message.
	skipSet atomic.Bool

	turn chan struct{} // held while connecting or seeking

	mu           sync.Mutex
	sess         *session // nil while disconnected
	subscribed   bool     // a session was installed before (Resubscribed)
	reconnecting bool
	closed       bool
	skip         seekSkip // after a seek to a batch message
}

const (
	countBits = 40
	countMask = 1<<countBits - 1
	genMask   = 1<<(64-countBits) - 1
)

// seekSkip drops the messages of one entry before a batch index, once.
type seekSkip struct {
	ledger, entry uint64
	batchIndex    int32 // 0: nothing to skip
}

func newPart(c *Consumer, spec topicSpec, initial InitialPosition) *partConsumer {
	pc := &partConsumer{
		c:          c,
		topic:      spec.name,
		base:       spec.base,
		partition:  spec.partition,
		id:         c.conns.NewConsumerID(),
		discovered: spec.discovered,
		initial:    initial,
		turn:       make(chan struct{}, 1),
	}
	pc.ctx, pc.cancel = context.WithCancel(c.ctx)
	pc.partial.m = map[entryPos]*batchAcks{}
	pc.flow.Store(pc.genSeq.Add(1) << countBits)
	return pc
}

// session is one SUBSCRIBE of the part on one connection; it receives
// what the broker sends for the consumer id there.
type session struct {
	pc   *partConsumer
	conn *connpool.Conn
	gen  uint64

	seeking     atomic.Bool // a SEEK is under way: the broker's CLOSE_CONSUMER is expected
	closedByBkr atomic.Bool
	dead        bool // guarded by pc.mu: its connection or consumer is gone
}

// HandleFrame runs on the connection's reader goroutine.
func (s *session) HandleFrame(f pulsarwire.Frame, ferr error) {
	pc := s.pc
	switch f.Cmd.GetType() {
	case pb.BaseCommand_MESSAGE:
		m := f.Cmd.GetMessage()
		n := int64(1)
		if f.Metadata != nil {
			n = int64(max(f.Metadata.GetNumMessagesInBatch(), 1))
		}
		pc.permits.Add(-n)
		if ferr != nil || f.Metadata == nil {
			pc.c.log.Error("dropping a message that failed its checksum", "topic", pc.topic, "id", pulsarwire.MessageIDFromProto(m.GetMessageId()), "err", ferr)
			s.discard(m.GetMessageId(), pb.CommandAck_ChecksumMismatch, n)
			return
		}
		if m.ConsumerEpoch != nil {
			pos := entryPos{m.GetMessageId().GetLedgerId(), m.GetMessageId().GetEntryId()}
			if cur := pc.epoch.Load(); m.GetConsumerEpoch() < cur {
				// Sent before a redelivery of everything: it comes again.
				pc.stale.stale(pos, cur)
				pc.consume(s.gen, n)
				return
			}
			if q, gap := pc.stale.arrived(pos, m.GetConsumerEpoch()); gap {
				// It comes again with the rest.
				pc.consume(s.gen, n)
				pc.rewindSkipped(q, pos)
				return
			}
		}
		e := entry{s: s, seq: pc.seq.Add(1), cmd: m, md: f.Metadata, payload: f.Payload}
		if d := pc.c.dlq; d != nil && int(m.GetRedeliveryCount()) >= d.policy.MaxDeliveries {
			// Delivered often enough: to the dead-letter topic, whether
			// or not anyone is receiving.
			pc.consume(s.gen, n)
			d.add(e)
			return
		}
		pc.c.q.push(e)
	case pb.BaseCommand_ACTIVE_CONSUMER_CHANGE:
		active := f.Cmd.GetActiveConsumerChange().GetIsActive()
		if !active {
			// The broker gives our unacknowledged messages to the active
			// consumer: what waits here would only be a duplicate.
			pc.drop.Store(pc.seq.Load() + 1)
		}
		pc.c.log.Debug("active consumer changed", "topic", pc.topic, "active", active)
		if fn := pc.c.opts.OnActiveChange; fn != nil {
			fn(pc.topic, active)
		}
	case pb.BaseCommand_CLOSE_CONSUMER:
		s.conn.UnregisterConsumer(pc.id)
		s.closedByBkr.Store(true)
		if s.seeking.Load() {
			return // the seek re-subscribes
		}
		pc.c.log.Info("consumer closed by the broker; subscribing again", "topic", pc.topic)
		pc.lost(s, errors.New("closed by the broker"))
	case pb.BaseCommand_REACHED_END_OF_TOPIC:
		pc.c.log.Info("reached the end of a terminated topic", "topic", pc.topic)
	}
}

// ConnectionClosed runs once when the session's connection is gone.
func (s *session) ConnectionClosed(err error) { s.pc.lost(s, err) }

// discard acknowledges an entry that cannot be delivered, as Apache
// Pulsar's clients do, and counts its messages as taken.
func (s *session) discard(id *pb.MessageIdData, why pb.CommandAck_ValidationError, n int64) {
	if id != nil {
		s.conn.Send(pulsarwire.Wrap(&pb.CommandAck{
			ConsumerId:      proto.Uint64(s.pc.id),
			AckType:         pb.CommandAck_Individual.Enum(),
			MessageId:       []*pb.MessageIdData{entryPos{id.GetLedgerId(), id.GetEntryId()}.wire()},
			ValidationError: why.Enum(),
		}))
	}
	s.pc.consume(s.gen, n)
}

// consume counts n messages of generation gen as taken from the queue
// and grants the broker more permits once half the queue was taken. It
// reports false, counting nothing, when gen is not the current session's.
func (pc *partConsumer) consume(gen uint64, n int64) bool {
	gen &= genMask
	for {
		v := pc.flow.Load()
		if v>>countBits != gen {
			return false
		}
		nv := v + uint64(n)
		if !pc.flow.CompareAndSwap(v, nv) {
			continue
		}
		if taken := nv & countMask; int64(taken) >= pc.c.flowThreshold && pc.flow.CompareAndSwap(nv, nv&^countMask) {
			pc.sendFlow(gen, uint32(taken))
		}
		return true
	}
}

func (pc *partConsumer) sendFlow(gen uint64, permits uint32) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if s := pc.sess; s != nil && s.gen&genMask == gen {
		s.conn.Send(flowCommand(pc.id, permits))
		pc.permits.Add(int64(permits))
	}
}

func flowCommand(id uint64, permits uint32) *pb.BaseCommand {
	return pulsarwire.Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(id), MessagePermits: proto.Uint32(permits)})
}

// current reports whether gen is the current session's.
func (pc *partConsumer) current(gen uint64) bool { return pc.flow.Load()>>countBits == gen&genMask }

func (pc *partConsumer) subscribeCommand() *pb.CommandSubscribe {
	o := &pc.c.opts
	cmd := &pb.CommandSubscribe{
		Topic:              proto.String(pc.topic),
		Subscription:       proto.String(o.Subscription),
		SubType:            o.Type.Wire().Enum(),
		ConsumerId:         proto.Uint64(pc.id),
		ConsumerName:       proto.String(o.Name),
		Durable:            proto.Bool(true),
		InitialPosition:    pc.initial.wire().Enum(),
		ForceTopicCreation: proto.Bool(!pc.discovered),
		ConsumerEpoch:      proto.Uint64(pc.epoch.Load()),
	}
	if o.ReadCompacted {
		cmd.ReadCompacted = proto.Bool(true)
	}
	if o.Type == KeyShared {
		cmd.KeySharedMeta = &pb.KeySharedMeta{KeySharedMode: pb.KeySharedMode_AUTO_SPLIT.Enum()}
	}
	return cmd
}

// subscribeOnce sends SUBSCRIBE on conn: one attempt.
func (pc *partConsumer) subscribeOnce(ctx context.Context, conn *connpool.Conn) (*session, error) {
	s := &session{pc: pc, conn: conn, gen: pc.genSeq.Add(1)}
	if err := conn.RegisterConsumer(pc.id, s); err != nil {
		return nil, err
	}
	if _, err := conn.Request(ctx, pulsarwire.Wrap(pc.subscribeCommand())); err != nil {
		conn.UnregisterConsumer(pc.id)
		if _, isServer := pulsarwire.ServerCode(err); !isServer {
			// No answer: the broker may have made the consumer anyway.
			pc.closeOnBroker(conn)
		}
		return nil, fmt.Errorf("on %s: %w", conn.Addr(), err)
	}
	return s, nil
}

// closeOnBroker sends CLOSE_CONSUMER without waiting for the answer.
func (pc *partConsumer) closeOnBroker(conn *connpool.Conn) {
	conn.Send(pulsarwire.Wrap(&pb.CommandCloseConsumer{
		ConsumerId: proto.Uint64(pc.id), RequestId: proto.Uint64(pc.c.conns.NewRequestID()),
	}))
}

// acquire takes the part's turn to connect or seek.
func (pc *partConsumer) acquire(ctx context.Context) error {
	select {
	case pc.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (pc *partConsumer) release() { <-pc.turn }

// connect looks the topic up and subscribes, first moving the cursor to
// rewind when it is set; then it grants the permits. One attempt.
func (pc *partConsumer) connect(ctx context.Context, rewind Position) error {
	if err := pc.acquire(ctx); err != nil {
		return err
	}
	defer pc.release()
	conn, err := pc.c.conns.Conn(ctx, pc.topic)
	if err != nil {
		return err
	}
	s, err := pc.subscribeOnce(ctx, conn)
	if err != nil {
		return err
	}
	if seek := rewind.seekCommand(pc.id); seek != nil {
		if s, err = pc.seekAndResubscribe(ctx, s, seek); err != nil {
			return err
		}
		pc.setSkip(rewind)
	}
	return pc.install(s)
}

// seekAndResubscribe moves the subscription's cursor with s's consumer,
// then subscribes again on the same connection: Apache Pulsar closes
// every consumer of a subscription that is reset.
func (pc *partConsumer) seekAndResubscribe(ctx context.Context, s *session, seek *pb.CommandSeek) (*session, error) {
	s.seeking.Store(true)
	_, err := s.conn.Request(ctx, pulsarwire.Wrap(seek))
	s.conn.UnregisterConsumer(pc.id)
	if !s.closedByBkr.Load() {
		pc.closeOnBroker(s.conn)
	}
	if err != nil {
		return nil, fmt.Errorf("seek to %s: %w", describeSeek(seek), err)
	}
	return pc.subscribeOnce(ctx, s.conn)
}

func describeSeek(cmd *pb.CommandSeek) string {
	if cmd.MessagePublishTime != nil {
		return fmt.Sprintf("publish time %d", cmd.GetMessagePublishTime())
	}
	return pulsarwire.MessageIDFromProto(cmd.GetMessageId()).String()
}

func (pc *partConsumer) setSkip(p Position) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.skip = seekSkip{}
	if id, ok := p.MessageID(); ok && id.BatchIndex > 0 {
		pc.skip = seekSkip{ledger: id.Ledger, entry: id.Entry, batchIndex: id.BatchIndex}
	}
	pc.skipSet.Store(pc.skip.batchIndex != 0)
}

// takeSkip returns how many messages of entry pos to skip after a seek.
func (pc *partConsumer) takeSkip(pos entryPos) int32 {
	if !pc.skipSet.Load() {
		return 0
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	sk := pc.skip
	if sk.batchIndex == 0 || sk.ledger != pos.ledger || sk.entry != pos.entry {
		return 0
	}
	pc.skip = seekSkip{}
	pc.skipSet.Store(false)
	return sk.batchIndex
}

// install makes s the current session, sends the acknowledgements that
// waited for it and grants the permits.
func (pc *partConsumer) install(s *session) error {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		s.conn.UnregisterConsumer(pc.id)
		pc.closeOnBroker(s.conn)
		return ErrClosed
	}
	if s.dead {
		pc.mu.Unlock()
		return fmt.Errorf("consumer of %s lost right after subscribing: %w", pc.topic, pulsarwire.ErrConnectionClosed)
	}
	pc.sess = s
	pc.flow.Store((s.gen & genMask) << countBits)
	if pc.subscribed {
		// Before the permits: no message of s is received before.
		pc.c.resubscribed.Add(1)
	}
	pc.subscribed = true
	pc.mu.Unlock()
	pc.stale.reset()
	pc.c.acks.flushPart(pc)
	pc.permits.Store(int64(pc.c.opts.ReceiverQueue)) // a new session starts afresh
	return s.conn.Send(flowCommand(pc.id, uint32(pc.c.opts.ReceiverQueue)))
}

// session returns the current session, nil while disconnected.
func (pc *partConsumer) session() *session {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.sess
}

// lost handles the end of session s: its connection closed, the broker
// closed the consumer, or a seek moved the cursor. What s delivered and
// is still queued becomes stale; the part subscribes again.
func (pc *partConsumer) lost(s *session, cause error) {
	pc.mu.Lock()
	s.dead = true
	if pc.sess != s {
		pc.mu.Unlock()
		return
	}
	pc.sess = nil
	pc.flow.Store((pc.genSeq.Add(1) & genMask) << countBits)
	closed := pc.closed
	pc.mu.Unlock()
	s.conn.UnregisterConsumer(pc.id)
	if closed {
		return
	}
	if errors.Is(cause, pool.ErrClosed) {
		pc.c.fail(fmt.Errorf("%w: the client closed", ErrClosed))
		return
	}
	pc.c.log.Info("consumer disconnected; subscribing again", "topic", pc.topic, "subscription", pc.c.opts.Subscription, "err", cause)
	pc.startReconnect()
}

func (pc *partConsumer) startReconnect() {
	pc.mu.Lock()
	if pc.reconnecting || pc.closed || pc.sess != nil {
		pc.mu.Unlock()
		return
	}
	pc.reconnecting = true
	pc.mu.Unlock()
	if !pc.c.spawn(pc.reconnect) {
		pc.mu.Lock()
		pc.reconnecting = false
		pc.mu.Unlock()
	}
}

// reconnect subscribes again, with the same name and consumer id, under
// the consumer's OperationRetries, until it is connected (or closed).
func (pc *partConsumer) reconnect() {
	for {
		err := pc.c.client.RetryWith(pc.ctx, pc.c.opts.Retries,
			"subscribe "+pc.c.opts.Subscription+" to "+pc.topic+" again",
			func(ctx context.Context) error { return pc.connect(ctx, Position{}) })
		pc.mu.Lock()
		if err == nil && pc.sess == nil && !pc.closed {
			pc.mu.Unlock()
			continue // lost again before we noticed
		}
		pc.reconnecting = false
		closed := pc.closed
		pc.mu.Unlock()
		if err == nil || closed || pc.ctx.Err() != nil {
			return
		}
		if pc.discovered && errors.Is(err, pulsarwire.ErrTopicNotFound) {
			pc.c.log.Info("topic is gone; leaving it", "topic", pc.topic)
			pc.c.removePart(pc)
			return
		}
		pc.c.fail(&SubscribeError{Topic: pc.topic, Subscription: pc.c.opts.Subscription, Err: err})
		return
	}
}

// close ends the part: its acknowledgements are sent, its consumer is
// closed on the broker (while ctx allows) and what it queued is dropped.
func (pc *partConsumer) close(ctx context.Context) {
	pc.c.acks.flushPart(pc)
	pc.mu.Lock()
	pc.closed = true
	s := pc.sess
	pc.sess = nil
	pc.flow.Store((pc.genSeq.Add(1) & genMask) << countBits)
	pc.mu.Unlock()
	pc.cancel()
	if s == nil {
		return
	}
	s.conn.UnregisterConsumer(pc.id)
	s.conn.Request(ctx, pulsarwire.Wrap(&pb.CommandCloseConsumer{ConsumerId: proto.Uint64(pc.id)}))
}

// seek moves the cursor to p with the current session, then lets the
// part subscribe again from there. One attempt.
func (pc *partConsumer) seek(ctx context.Context, p Position) error {
	if err := pc.acquire(ctx); err != nil {
		return err
	}
	defer pc.release()
	s := pc.session()
	if s == nil {
		return fmt.Errorf("seek %s: not connected: %w", pc.topic, pulsarwire.ErrConnectionClosed)
	}
	s.seeking.Store(true)
	_, err := s.conn.Request(ctx, pulsarwire.Wrap(p.seekCommand(pc.id)))
	if err != nil && !s.closedByBkr.Load() {
		s.seeking.Store(false)
		return fmt.Errorf("seek %s to %s: %w", pc.topic, p, err)
	}
	if !s.closedByBkr.Load() {
		pc.closeOnBroker(s.conn)
	}
	pc.setSkip(p)
	pc.lost(s, fmt.Errorf("sought to %s", p))
	if err != nil {
		return fmt.Errorf("seek %s to %s: %w", pc.topic, p, err)
	}
	return nil
}

// redeliver asks the broker to send the given entries again (Shared and
// KeyShared: each goes to whichever consumer may take it).
func (pc *partConsumer) redeliver(ids []entryPos) {
	s := pc.session()
	if s == nil {
		return // a new session gets every unacknowledged message anyway
	}
	cmd := &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(pc.id)}
	for _, id := range ids {
		cmd.MessageIds = append(cmd.MessageIds, id.wire())
	}
	s.conn.Send(pulsarwire.Wrap(cmd))
}

// rewindSkipped asks for everything again when the broker's rewind
// skipped entry q, dropped here as stale, and went on at p (stalewatch.go).
func (pc *partConsumer) rewindSkipped(q, p entryPos) {
	pc.c.log.Warn("the broker skipped unacknowledged entries after a redelivery; asking for everything again",
		"topic", pc.topic, "skipped", q.String(), "at", p.String())
	// At once, on the reader goroutine (both only queue frames), so that
	// nothing more of the epoch that skipped is handed out.
	pc.c.acks.flushPart(pc)
	pc.redeliverAll()
}

// redeliverAll asks for every unacknowledged message again, in order
// (Exclusive and Failover, where one message cannot be sent again alone
// without breaking the order). As the Java client does, it raises the
// consumer epoch so that what the broker sent before is dropped here, and
// drops what waits in the queue.
func (pc *partConsumer) redeliverAll() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	s := pc.sess
	if s == nil {
		return
	}
	e := pc.epoch.Add(1)
	pc.drop.Store(pc.seq.Load() + 1)
	s.conn.Send(pulsarwire.Wrap(&pb.CommandRedeliverUnacknowledgedMessages{
		ConsumerId: proto.Uint64(pc.id), ConsumerEpoch: proto.Uint64(e),
	}))
}
