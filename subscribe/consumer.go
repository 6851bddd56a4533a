package subscribe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Consumer receives the messages of one subscription on one or more
// topics (or partitions), read as one stream. Its methods are safe for
// concurrent use.
type Consumer struct {
	client  *pool.Client
	conns   *connpool.Pool // client's connections: a *pool.Client is one
	opts    Options
	log     *slog.Logger
	pattern *regexp.Regexp
	ns      string // the pattern's namespace
	mode    pool.TopicMode

	// flowThreshold: taking this many messages of a part grants them
	// back (half the receiver queue). creditChunk: Receive counts taken
	// messages in chunks of this size.
	flowThreshold int64
	creditChunk   int64

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	q       queue
	r       recvState
	acks    acker
	txnAcks txnAcks
	nacks   nacker
	dlq     *deadLetters

	// resubscribed counts the subscriptions made again after one was
	// lost (Resubscribed).
	resubscribed atomic.Uint64

	mu     sync.Mutex
	parts  map[string]*partConsumer // by topic or partition name
	closed bool
}

// recvState is the entry Receive is handing out, split into messages.
type recvState struct {
	mu     sync.Mutex
	codecs pulsarwire.Codecs
	msgs   []Message
	next   int
	pc     *partConsumer
	gen    uint64
	seq    uint64
	credit int64 // messages taken and not yet counted with pc.consume
}

// New subscribes to the topics of opts and returns the Consumer once it
// is subscribed to every one of them (or its pattern's), the
// subscription's cursor moved to opts.Rewind if set, and the permits
// granted. Subscribing runs under opts.Retries: by default, a broker that
// answers "not now" (ConsumerBusy for a second Exclusive consumer,
// ServiceNotReady, ...) is asked again every 5 s, while ctx allows. When
// subscribing fails the error is a *SubscribeError.
func New(ctx context.Context, client *pool.Client, opts Options) (*Consumer, error) {
	if client == nil {
		return nil, errors.New("subscribe: no client")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults(client)
	c := &Consumer{
		client:        client,
		conns:         (*connpool.Pool)(client),
		opts:          opts,
		log:           opts.Logger.With("subscription", opts.Subscription),
		flowThreshold: int64(max(opts.ReceiverQueue/2, 1)),
		parts:         map[string]*partConsumer{},
	}
	c.creditChunk = max(c.flowThreshold/8, 1)
	if opts.Pattern != "" {
		var err error
		if c.pattern, c.ns, c.mode, err = compilePattern(opts.Pattern); err != nil {
			return nil, err
		}
	}
	c.q.init()
	c.acks.c = c
	c.txnAcks.c = c
	c.acks.cum = map[*partConsumer]entryPos{}
	c.nacks.kick = make(chan struct{}, 1)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if opts.DeadLetter != nil {
		c.dlq = &deadLetters{c: c, policy: *opts.DeadLetter, kick: make(chan struct{}, 1)}
	}

	specs, err := c.resolve(ctx, true)
	if err != nil {
		c.cancel()
		return nil, err
	}
	refresh := c.pattern != nil // topics are listed again every PatternRefresh
	for _, s := range specs {
		c.parts[s.name] = newPart(c, s, opts.InitialPosition)
		refresh = refresh || s.partition >= 0
	}
	if err := c.subscribeAll(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Retries.Timeout)
		c.Close(cctx)
		cancel()
		return nil, err
	}
	c.spawn(c.housekeeper)
	if refresh {
		c.spawn(c.refreshLoop)
	}
	if c.dlq != nil {
		c.spawn(c.dlq.run)
	}
	c.spawn(func() {
		select {
		case <-c.conns.Done():
			// Its connections are gone for good: stop every goroutine;
			// Close still tidies up.
			c.fail(fmt.Errorf("%w: the client closed", ErrClosed))
			c.cancel()
		case <-c.ctx.Done():
		}
	})
	return c, nil
}

// subscribeAll subscribes every part, a few at a time, each under the
// retries; the first failure stops the rest.
func (c *Consumer) subscribeAll(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for _, pc := range c.partList() {
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // stopped by a failure, or by the caller (below)
			}
			err := c.client.RetryWith(gctx, c.opts.Retries, "subscribe "+c.opts.Subscription+" to "+pc.topic,
				func(ctx context.Context) error { return pc.connect(ctx, c.rewindFor(pc)) })
			if err != nil {
				return &SubscribeError{Topic: pc.topic, Subscription: c.opts.Subscription, Err: err}
			}
			return nil
		})
	}
	err := g.Wait()
	if err == nil && ctx.Err() != nil {
		err = &SubscribeError{Topic: c.describeTopics(), Subscription: c.opts.Subscription, Err: ctx.Err()}
	}
	return err
}

func (c *Consumer) describeTopics() string {
	if c.opts.Pattern != "" {
		return c.opts.Pattern
	}
	if len(c.opts.Topics) == 1 {
		return c.opts.Topics[0]
	}
	return fmt.Sprint(c.opts.Topics)
}

// rewindFor is where part pc's cursor goes at start.
func (c *Consumer) rewindFor(pc *partConsumer) Position {
	p := c.opts.Rewind
	if id, ok := p.MessageID(); ok && pc.partition >= 0 && id.Partition != pc.partition {
		return Position{} // the id names another partition
	}
	return p
}

// spawn runs f in a goroutine that Close waits for; false once closing.
func (c *Consumer) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

func (c *Consumer) partList() []*partConsumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*partConsumer, 0, len(c.parts))
	for _, pc := range c.parts {
		out = append(out, pc)
	}
	return out
}

// Resubscribed counts the times the consumer subscribed a topic or
// partition again by itself, after its connection was lost, the broker
// closed its consumer (a topic unloaded) or a seek: a count that moved
// means that, meanwhile, another consumer may have held an Exclusive
// subscription and acknowledged messages. It moves before the new
// subscription's first message can be received, so a caller that reads
// it after receiving a message of that subscription sees it moved.
func (c *Consumer) Resubscribed() uint64 { return c.resubscribed.Load() }

// Topics lists the topics and partitions consumed now, by full name, in
// no particular order.
func (c *Consumer) Topics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.parts))
	for name := range c.parts {
		out = append(out, name)
	}
	return out
}

// Subscription is the subscription's name.
func (c *Consumer) Subscription() string { return c.opts.Subscription }

// Name is the consumer's name, as the broker knows it.
func (c *Consumer) Name() string { return c.opts.Name }

// fail makes Receive return err once the queue is empty.
func (c *Consumer) fail(err error) {
	if c.ctx.Err() == nil && !errors.Is(err, ErrClosed) {
		c.log.Error("consumer failed", "err", err)
	}
	c.q.fail(err)
}

// Receive returns the next message, waiting for one while ctx allows.
// After Close, or once the consumer failed for good (a topic it could not
// subscribe to again within its retries), it returns the error.
func (c *Consumer) Receive(ctx context.Context) (*Message, error) {
	for {
		c.r.mu.Lock()
		m, err := c.nextLocked()
		c.r.mu.Unlock()
		if m != nil || err != nil {
			return m, err
		}
		if err := c.q.wait(ctx); err != nil {
			return nil, err
		}
	}
}

// ReceiveBatch fills dst with the messages available now, waiting while
// ctx allows for the first one, and returns how many it stored (at least
// one unless it fails).
func (c *Consumer) ReceiveBatch(ctx context.Context, dst []*Message) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	for {
		c.r.mu.Lock()
		n := 0
		var err error
		for n < len(dst) {
			var m *Message
			if m, err = c.nextLocked(); m == nil {
				break
			}
			dst[n] = m
			n++
		}
		c.r.mu.Unlock()
		if n > 0 {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		if err := c.q.wait(ctx); err != nil {
			return 0, err
		}
	}
}

// nextLocked hands out the next message, splitting the next queued entry
// when the current one is done; nil when the queue is empty. c.r.mu held.
func (c *Consumer) nextLocked() (*Message, error) {
	r := &c.r
	for {
		for r.next < len(r.msgs) {
			if !r.pc.current(r.gen) {
				// Its session is gone (a reconnect, a seek): the broker
				// sends the rest again to the new one.
				r.msgs, r.next, r.credit = nil, 0, 0
				break
			}
			m := &r.msgs[r.next]
			r.next++
			r.credit++
			last := r.next == len(r.msgs)
			if last || r.credit >= c.creditChunk {
				c.settleLocked()
			}
			if last {
				r.msgs, r.next = nil, 0
			}
			if r.seq < r.pc.drop.Load() {
				// Dropped after it was queued (a redelivery of everything,
				// or the broker made another consumer active).
				continue
			}
			return m, nil
		}
		e, ok, err := c.q.pop()
		if !ok {
			return nil, err
		}
		c.loadLocked(&e)
	}
}

// settleLocked counts the messages taken from the current entry (none
// when its session is gone: the new one starts with a full queue).
func (c *Consumer) settleLocked() {
	r := &c.r
	r.pc.consume(r.gen, r.credit)
	r.credit = 0
}

// loadLocked splits entry e into c.r, or drops it.
func (c *Consumer) loadLocked(e *entry) {
	r := &c.r
	pc, s := e.s.pc, e.s
	if !pc.current(s.gen) {
		return // from a session that is gone: it comes again on the new one
	}
	n := int64(max(e.md.GetNumMessagesInBatch(), 1))
	if e.seq < pc.drop.Load() || e.cmd.ConsumerEpoch != nil && e.cmd.GetConsumerEpoch() < pc.epoch.Load() {
		pc.consume(s.gen, n)
		return
	}
	if e.md.MarkerType != nil {
		// A broker-internal marker (replication, transactions).
		c.acks.add(pc, entryPos{e.cmd.GetMessageId().GetLedgerId(), e.cmd.GetMessageId().GetEntryId()}, int32(n))
		pc.consume(s.gen, n)
		return
	}
	p, err := c.split(e, &r.codecs)
	if err != nil {
		c.unreadable(e, err, n)
		return
	}
	if p.skipped > 0 {
		pc.consume(s.gen, p.skipped)
	}
	r.msgs, r.next, r.pc, r.gen, r.seq, r.credit = p.msgs, 0, pc, s.gen, e.seq, 0
}

// unreadable drops an entry that cannot be split into messages and
// acknowledges it with the reason, as Apache Pulsar's clients do.
func (c *Consumer) unreadable(e *entry, err error, n int64) {
	why := pb.CommandAck_BatchDeSerializeError
	if e.md.GetCompression() != pb.CompressionType_NONE {
		why = pb.CommandAck_DecompressionError
	}
	c.log.Error("dropping an entry that cannot be read", "topic", e.s.pc.topic, "err", err)
	e.s.discard(e.cmd.GetMessageId(), why, n)
}

// Ack acknowledges m. Acknowledgements are grouped (Options.AckGroupTime,
// AckGroupSize) and sent later, so Ack does not wait unless AckGroupTime
// is negative: then it sends at once and waits, while ctx allows, for
// the broker's answer. A message of a batch is acknowledged on the broker
// once every message of its batch is.
func (c *Consumer) Ack(ctx context.Context, m *Message) error {
	return c.ack(ctx, m, c.opts.AckGroupTime < 0)
}

func (c *Consumer) check(m *Message) error {
	if m == nil || m.pc == nil || m.pc.c != c {
		return ErrForeignMessage
	}
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

func (c *Consumer) ack(ctx context.Context, m *Message, wait bool) error {
	if err := c.check(m); err != nil {
		return err
	}
	pc := m.pc
	if b := m.acks; b != nil {
		if b.txn.Load() != nil {
			return fmt.Errorf("ack %s: %w", m.ID, ErrBatchAcrossTransactions)
		}
		b.plain.Store(true)
		if !b.mark(m.ID.BatchIndex) {
			return nil // acknowledged before
		}
		if b.left.Add(-1) > 0 {
			if b.partial.CompareAndSwap(false, true) {
				pc.partial.add(b)
			}
			return nil
		}
		if b.partial.Load() {
			pc.partial.remove(b)
		}
	}
	pos := entryPos{m.ID.Ledger, m.ID.Entry}
	if wait {
		return c.acks.sendNow(ctx, pc, pb.CommandAck_Individual, pos)
	}
	n := int32(1)
	if m.acks != nil {
		n = m.acks.n
	}
	c.acks.add(pc, pos, n)
	return nil
}

// AckCumulative acknowledges m and every message before it on its topic
// (or partition). Only Exclusive and Failover subscriptions allow it;
// on Shared and KeyShared it returns ErrCumulativeAckNotAllowed. It is
// grouped like Ack.
func (c *Consumer) AckCumulative(ctx context.Context, m *Message) error {
	if !c.opts.Type.SingleActive() {
		return fmt.Errorf("%w (subscription %s is %s)", ErrCumulativeAckNotAllowed, c.opts.Subscription, c.opts.Type.Name())
	}
	if err := c.check(m); err != nil {
		return err
	}
	pc := m.pc
	pos := entryPos{m.ID.Ledger, m.ID.Entry}
	if b := m.acks; b != nil {
		for i := int32(0); i <= m.ID.BatchIndex; i++ {
			if b.mark(i) {
				b.left.Add(-1)
			}
		}
		if b.left.Load() > 0 {
			// The rest of its batch is not acknowledged: everything before
			// the batch is.
			if b.partial.CompareAndSwap(false, true) {
				pc.partial.add(b)
			}
			if pos.entry == 0 {
				return nil
			}
			pos.entry--
		} else if b.partial.Load() {
			pc.partial.remove(b)
		}
	}
	pc.partial.trimThrough(pos)
	if c.opts.AckGroupTime < 0 {
		return c.acks.sendNow(ctx, pc, pb.CommandAck_Cumulative, pos)
	}
	c.acks.cumulative(pc, pos)
	return nil
}

// Nack says m could not be processed: after Options.NackDelay the broker
// is asked to deliver it again (Shared, KeyShared: that message's entry,
// its redelivery count raised; Exclusive, Failover: every unacknowledged
// message of its topic, in order, as the Java client does).
func (c *Consumer) Nack(m *Message) error { return c.NackAfter(m, c.opts.NackDelay) }

// NackAfter is Nack with a delay of its own instead of NackDelay (a
// retry backoff, say). A delay of 0 or less asks at once.
func (c *Consumer) NackAfter(m *Message, delay time.Duration) error {
	if err := c.check(m); err != nil {
		return err
	}
	if b := m.acks; b != nil && b.acked(m.ID.BatchIndex) {
		return nil
	}
	c.nacks.add(m.pc, entryPos{m.ID.Ledger, m.ID.Entry}, max(delay, 0))
	return nil
}

// Seek moves the subscription's cursor to p on every topic consumed (a
// message id: on its topic only, see ErrSeekNotSupported), drops what was
// received and not yet handed out, and subscribes again from there. The
// broker disconnects every consumer of the subscription (its other
// consumers subscribe again too). Acknowledgements still grouped are
// sent first.
func (c *Consumer) Seek(ctx context.Context, p Position) error {
	if p.IsZero() {
		return errors.New("subscribe: seek to the zero Position")
	}
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	parts := c.partList()
	if id, ok := p.MessageID(); ok && len(parts) > 1 {
		var only []*partConsumer
		base := ""
		for _, pc := range parts {
			if base == "" {
				base = pc.base
			}
			if pc.base != base {
				return ErrSeekNotSupported
			}
			if pc.partition == id.Partition {
				only = append(only, pc)
			}
		}
		if len(only) != 1 {
			return ErrSeekNotSupported
		}
		parts = only
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, pc := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.acks.flushPart(pc)
			pc.partial.clear()
			errs[i] = c.client.RetryWith(ctx, c.opts.Retries, "seek "+pc.topic, func(ctx context.Context) error {
				return pc.seek(ctx, p)
			})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Unsubscribe deletes the subscription on every topic (its cursor and
// backlog are gone), then closes the consumer. The broker refuses it
// while other consumers are connected to the subscription.
func (c *Consumer) Unsubscribe(ctx context.Context) error {
	c.acks.flush()
	var errs []error
	for _, pc := range c.partList() {
		s := pc.session()
		if s == nil {
			errs = append(errs, fmt.Errorf("unsubscribe %s: not connected: %w", pc.topic, pulsarwire.ErrConnectionClosed))
			continue
		}
		_, err := s.conn.Request(ctx, pulsarwire.Wrap(&pb.CommandUnsubscribe{ConsumerId: proto.Uint64(pc.id)}))
		if err != nil {
			errs = append(errs, fmt.Errorf("unsubscribe %s from %s: %w", c.opts.Subscription, pc.topic, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.Close(ctx)
}

// Close sends the acknowledgements still grouped, closes the consumer on
// the broker (waiting for its answers while ctx allows), and stops every
// goroutine of the consumer. Receive then returns ErrClosed. Messages
// received and not acknowledged are delivered again, to this
// subscription's next consumer.
func (c *Consumer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closed = true
	parts := make([]*partConsumer, 0, len(c.parts))
	for _, pc := range c.parts {
		parts = append(parts, pc)
	}
	c.mu.Unlock()
	c.acks.flush()
	var wg sync.WaitGroup
	for _, pc := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc.close(ctx)
		}()
	}
	wg.Wait()
	c.cancel()
	c.q.fail(ErrClosed)
	c.wg.Wait()
	c.q.clear()
	c.r.mu.Lock()
	c.r.msgs = nil
	c.r.codecs.Close()
	c.r.mu.Unlock()
	return ctx.Err()
}

// removePart stops consuming a part whose topic is gone.
func (c *Consumer) removePart(pc *partConsumer) {
	c.mu.Lock()
	if c.parts[pc.topic] == pc {
		delete(c.parts, pc.topic)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.Retries.Timeout)
	defer cancel()
	pc.close(ctx)
}

// LastMessageID asks the broker for the id of the last message its
// consumers can be given on the consumer's one topic (GET_LAST_MESSAGE_ID):
// nothing past an open transaction's first message on Apache Pulsar and
// the embedded broker alike, the compacted view's last message for a
// ReadCompacted consumer once nothing follows it. ok is false when there
// is none. A consumer of several topics or partitions gets an error.
func (c *Consumer) LastMessageID(ctx context.Context) (id pulsarwire.MessageID, ok bool, err error) {
	parts := c.partList()
	if len(parts) != 1 {
		return id, false, fmt.Errorf("subscribe: last message id of %d topics or partitions: ask one consumer per topic", len(parts))
	}
	r, err := c.lastMessageID(ctx, parts[0])
	if err != nil {
		return id, false, err
	}
	last := r.GetLastMessageId()
	// -1 (as unsigned) in the ledger or the entry: no message.
	ok = last.GetLedgerId() != ^uint64(0) && last.GetEntryId() != ^uint64(0)
	return pulsarwire.MessageIDFromProto(last), ok, nil
}

// MarkDeleted asks the broker for the subscription's mark-delete
// position on topic, one of the consumer's topics or partitions: every
// message at or before it is acknowledged, for good (an acknowledgement
// in a transaction once that commits). It is an entry: its entry may be
// -1 (as unsigned), before the ledger's first. ok is false when the
// broker told none.
func (c *Consumer) MarkDeleted(ctx context.Context, topic string) (id pulsarwire.MessageID, ok bool, err error) {
	c.mu.Lock()
	pc := c.parts[topic]
	c.mu.Unlock()
	if pc == nil {
		return id, false, fmt.Errorf("subscribe: mark-delete position of %s: not a topic or partition of the consumer", topic)
	}
	r, err := c.lastMessageID(ctx, pc)
	if err != nil {
		return id, false, err
	}
	md := r.GetConsumerMarkDeletePosition()
	if md == nil || md.GetLedgerId() == ^uint64(0) {
		return id, false, nil
	}
	return pulsarwire.MessageIDFromProto(md), true, nil
}

// lastMessageID sends GET_LAST_MESSAGE_ID for pc's consumer.
func (c *Consumer) lastMessageID(ctx context.Context, pc *partConsumer) (*pb.CommandGetLastMessageIdResponse, error) {
	var r *pb.CommandGetLastMessageIdResponse
	err := c.client.RetryWith(ctx, c.opts.Retries, "last message id of "+pc.topic, func(ctx context.Context) error {
		s := pc.session()
		if s == nil {
			return fmt.Errorf("last message id of %s: not connected: %w", pc.topic, pulsarwire.ErrConnectionClosed)
		}
		resp, err := s.conn.Request(ctx, pulsarwire.Wrap(&pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(pc.id)}))
		if err != nil {
			return fmt.Errorf("last message id of %s: %w", pc.topic, err)
		}
		r = resp.GetGetLastMessageIdResponse()
		if r == nil || r.GetLastMessageId() == nil {
			return fmt.Errorf("last message id of %s: broker answered %s: %w", pc.topic, resp.GetType(), pulsarwire.ErrCorrupt)
		}
		return nil
	})
	return r, err
}

// Disconnected says whether some topic or partition of the consumer has
// no session now: its connection was lost, or the broker closed its
// consumer, and it is subscribing again. On an Exclusive or Failover
// subscription another consumer may be active meanwhile.
func (c *Consumer) Disconnected() bool {
	for _, pc := range c.partList() {
		if pc.session() == nil {
			return true
		}
	}
	return false
}
