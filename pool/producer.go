package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Message is one message to publish.
type Message struct {
	Payload []byte
	// Key is the partition key: it picks the partition of a partitioned
	// topic (KeyPartition) and, without an OrderingKey, the consumer of a
	// KeyShared subscription. "" = none.
	Key string
	// OrderingKey, when set, picks the consumer of a KeyShared
	// subscription instead of Key. "" = none.
	OrderingKey string
	// Properties travel with the message. The map is read during the
	// call only.
	Properties map[string]string
	// EventTime is the time the message is about, in milliseconds on the
	// wire. Zero = none.
	EventTime time.Time
	// Txn is the transaction the message is published in: consumers get
	// it once the transaction commits, never if it aborts. Nil = none.
	Txn *Transaction
}

// Producer publishes to one topic: a partitioned topic's partitions each
// get a producer of their own on their owner's connection. It is shared
// by every publisher of the Client and safe for concurrent use; the
// Client closes it.
//
// A Producer that failed for good (OperationRetries ran out while
// reconnecting, the topic was terminated) fails every send with that
// error; (*Client).Producer and Publish then open a new one, except
// after ProducerFenced (see AccessMode).
type Producer struct {
	c       *state
	topic   string
	opts    *ProducerOptions
	parts   atomic.Pointer[[]*partProducer] // grows when partitions are added
	pending *limiter                        // messages published, not yet acknowledged
	rr      roundRobin

	failOnce sync.Once
}

// Err is the error the producer failed with for good, nil while it
// works (a fenced producer keeps failing: AccessMode).
func (p *Producer) Err() error {
	for _, pp := range p.partList() {
		pp.mu.Lock()
		err := pp.err
		pp.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// partList is the producers of the partitions (one for a plain topic).
func (p *Producer) partList() []*partProducer { return *p.parts.Load() }

// Topic is the topic's full name.
func (p *Producer) Topic() string { return p.topic }

// Partitions is the number of partitions, 0 for a topic that is not
// partitioned.
func (p *Producer) Partitions() int {
	parts := p.partList()
	if len(parts) == 1 && parts[0].partition < 0 {
		return 0
	}
	return len(parts)
}

type producerSlot struct {
	ready chan struct{}
	p     *Producer
	err   error
}

// Producer returns the producer of topic, opening it the first time:
// the partition count is asked for (PARTITIONED_METADATA), then each
// partition (or the topic) is looked up and its producer created on its
// owner's connection, under OperationRetries. Every caller shares it.
func (c *Client) Producer(ctx context.Context, topic string) (*Producer, error) {
	return c.own().producer(ctx, topic)
}

func (c *state) producer(ctx context.Context, topic string) (*Producer, error) {
	if v, ok := c.byName.Load(topic); ok {
		return v.(*Producer), nil
	}
	if c.closing.Load() {
		return nil, ErrClosed
	}
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	name := t.String()
	for {
		c.mu.Lock()
		if c.pool.Context().Err() != nil {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		s := c.producers[name]
		if s == nil {
			s = &producerSlot{ready: make(chan struct{})}
			c.producers[name] = s
			c.mu.Unlock()
			return c.fillSlot(ctx, topic, name, s, &c.opts.Producer)
		}
		c.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("open producer for %s: %w", name, ctx.Err())
		}
		if s.err == nil {
			c.byName.Store(topic, s.p)
			return s.p, nil
		}
		if !errors.Is(s.err, context.Canceled) && !errors.Is(s.err, context.DeadlineExceeded) {
			return nil, s.err
		}
		// The caller that opened it gave up; try on our own context.
	}
}

// OpenProducer opens topic's producer afresh with access mode mode, in
// place of the one the client had: that one is closed first (its
// messages still pending fail with ErrClosed; Flush before to avoid it).
// Publish and PublishAsync to topic then use the new one. Opening it with
// AccessExclusiveWithFencing is how a process that has just become the
// topic's only writer (it gained an Exclusive subscription, say) fences
// the one that wrote before it; see AccessMode. If the new producer later
// fails for good other than fenced, Publish opens a new one with
// ProducerOptions.AccessMode.
func (c *Client) OpenProducer(ctx context.Context, topic string, mode AccessMode) (*Producer, error) {
	if err := mode.check(); err != nil {
		return nil, fmt.Errorf("open producer for %s: %w", topic, err)
	}
	return c.own().openProducer(ctx, topic, mode)
}

func (c *state) openProducer(ctx context.Context, topic string, mode AccessMode) (*Producer, error) {
	if c.closing.Load() {
		return nil, ErrClosed
	}
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return nil, err
	}
	name := t.String()
	opts := c.opts.Producer
	opts.AccessMode = mode
	for {
		c.mu.Lock()
		if c.pool.Context().Err() != nil {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		old := c.producers[name]
		if old != nil {
			select {
			case <-old.ready:
			default:
				// Being opened by another caller: wait for it, then
				// replace it.
				c.mu.Unlock()
				select {
				case <-old.ready:
				case <-ctx.Done():
					return nil, fmt.Errorf("open producer for %s: %w", name, ctx.Err())
				}
				continue
			}
		}
		s := &producerSlot{ready: make(chan struct{})}
		c.producers[name] = s
		c.mu.Unlock()
		if old != nil && old.p != nil {
			c.forget(old.p)
			old.p.closeOnBroker(ctx)
			old.p.shutdown(ErrClosed)
		}
		return c.fillSlot(ctx, topic, name, s, &opts)
	}
}

// fillSlot opens the producer of slot s, registered under name with c.mu
// released, and tells whoever waits on the slot how that went.
func (c *state) fillSlot(ctx context.Context, topic, name string, s *producerSlot, opts *ProducerOptions) (*Producer, error) {
	p, err := c.newProducer(ctx, name, opts)
	c.mu.Lock()
	s.p, s.err = p, err
	if err != nil {
		delete(c.producers, name)
	}
	close(s.ready)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if c.closing.Load() {
		// Close did not see it; close it here.
		p.closeOnBroker(ctx)
		p.shutdown(ErrClosed)
		return nil, ErrClosed
	}
	c.byName.Store(topic, p)
	return p, nil
}

func (c *state) newProducer(ctx context.Context, name string, opts *ProducerOptions) (*Producer, error) {
	var n int
	err := c.retry(ctx, "partitioned metadata of "+name, func(ctx context.Context) error {
		var err error
		n, err = c.pool.PartitionedTopicMetadata(ctx, name)
		return err
	})
	if err != nil {
		return nil, err
	}
	p := &Producer{
		c:       c,
		topic:   name,
		opts:    opts,
		pending: newLimiter(int64(opts.MaxPendingMessages)),
		rr:      roundRobin{opts: &opts.Batching},
	}
	var parts []*partProducer
	if n == 0 {
		parts = []*partProducer{newPartProducer(p, name, -1)}
	} else {
		parts = p.newParts(0, n)
	}
	p.parts.Store(&parts)
	if err := p.connectParts(ctx, parts); err != nil {
		p.closeOnBroker(ctx)
		p.shutdown(err)
		return nil, err
	}
	if n > 0 && opts.PartitionRefresh > 0 {
		c.watchPartitions()
	}
	return p, nil
}

func (p *Producer) newParts(from, to int) []*partProducer {
	t, _ := pulsarwire.ParseTopic(p.topic)
	var parts []*partProducer
	for i := from; i < to; i++ {
		parts = append(parts, newPartProducer(p, t.Partition(i).String(), int32(i)))
	}
	return parts
}

// connectParts creates the producers of parts on their brokers, all at
// once, each under OperationRetries.
func (p *Producer) connectParts(ctx context.Context, parts []*partProducer) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, pp := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.c.retry(ctx, "create producer for "+pp.topic, pp.connect)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// watchPartitions starts, once, the client's goroutine that looks for
// partitions added to the topics of partitioned producers.
func (c *state) watchPartitions() {
	c.watchOnce.Do(func() {
		c.pool.Spawn(func() {
			t := time.NewTicker(c.opts.Producer.PartitionRefresh)
			defer t.Stop()
			for {
				select {
				case <-t.C:
				case <-c.pool.Done():
					return
				}
				for _, p := range c.allProducers() {
					if p.Partitions() > 0 {
						p.grow(c.pool.Context())
					}
				}
			}
		})
	})
}

// grow adds producers for partitions added to the topic since it was
// last looked at. Keys then map to partitions by the new count, as in
// Apache Pulsar's clients.
func (p *Producer) grow(ctx context.Context) {
	mctx, cancel := context.WithTimeout(ctx, p.c.opts.OperationRetries.Timeout)
	n, err := p.c.pool.PartitionedTopicMetadata(mctx, p.topic)
	cancel()
	old := p.partList()
	if err != nil || n <= len(old) {
		return
	}
	added := p.newParts(len(old), n)
	if err := p.connectParts(ctx, added); err != nil {
		for _, pp := range added {
			pp.closeOnBroker(ctx)
			pp.shutdown(err)
		}
		return
	}
	parts := append(append([]*partProducer(nil), old...), added...)
	p.parts.Store(&parts)
	p.c.log.Info("partitions added", "topic", p.topic, "partitions", n)
	if p.c.pool.Context().Err() != nil {
		// Close may have shut the old list down without these.
		for _, pp := range added {
			pp.shutdown(ErrClosed)
		}
	}
}

func (c *state) allProducers() []*Producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Producer
	for _, s := range c.producers {
		select {
		case <-s.ready:
			if s.p != nil {
				out = append(out, s.p)
			}
		default:
		}
	}
	return out
}

// dropProducer forgets a producer that failed for good.
func (c *state) dropProducer(p *Producer) {
	c.mu.Lock()
	if s := c.producers[p.topic]; s != nil && s.p == p {
		delete(c.producers, p.topic)
	}
	c.mu.Unlock()
	c.forget(p)
}

// forget takes p out of the topics as callers spelled them.
func (c *state) forget(p *Producer) {
	c.byName.Range(func(k, v any) bool {
		if v == p {
			c.byName.CompareAndDelete(k, v)
		}
		return true
	})
}

// Publish publishes m to topic and waits for the broker's receipt. The
// topic's producer is opened on first use (see Producer). It blocks while
// the pending limits are reached (ProducerOptions.MaxPendingMessages,
// Options.MemoryLimit) and returns ctx's error if ctx ends first; a
// message already handed over when ctx ends may still be published.
func (c *Client) Publish(ctx context.Context, topic string, m Message) (pulsarwire.MessageID, error) {
	p, err := c.own().producer(ctx, topic)
	if err != nil {
		return pulsarwire.MessageID{}, err
	}
	return p.Send(ctx, m)
}

// PublishAsync publishes m to topic and calls done with the receipt or
// the error, exactly once. It returns once m is in a batch, its payload
// copied there (the caller may reuse m.Payload's array): it blocks
// while the producer is opened and while the pending limits are reached
// (then ctx's end fails m). done runs on a connection's goroutine: it
// must be quick and must not publish synchronously. done may be nil.
func (c *Client) PublishAsync(ctx context.Context, topic string, m Message, done func(pulsarwire.MessageID, error)) {
	p, err := c.own().producer(ctx, topic)
	if err != nil {
		if done != nil {
			done(pulsarwire.MessageID{}, err)
		}
		return
	}
	p.SendAsync(ctx, m, done)
}

// Flush sends every batch of every producer now and waits, while ctx
// allows, until the broker acknowledged all messages published before the
// call (or they failed).
func (c *Client) Flush(ctx context.Context) error {
	_, err := flushAll(ctx, c.own().allProducers())
	return err
}

// SendOpenBatches sends the open batches of every producer now, without
// waiting for their receipts. A publisher that will add nothing more
// until some of its messages are acknowledged (it holds no more credits)
// calls it: waiting out Batching.MaxDelay would only stall it.
func (c *Client) SendOpenBatches() {
	for _, p := range c.own().allProducers() {
		for _, pp := range p.partList() {
			pp.mu.Lock()
			pp.flushLocked()
			pp.mu.Unlock()
		}
	}
}

// flushAll closes the open batches of every partition of ps, then waits
// for them all: one round trip, not one per producer. It returns the
// first producer still waiting when ctx ended, with Flush's error.
func flushAll(ctx context.Context, ps []*Producer) (*Producer, error) {
	marks := make([][]<-chan struct{}, len(ps))
	for i, p := range ps {
		marks[i] = p.flushMarks()
	}
	for i, p := range ps {
		if err := p.waitFlushed(ctx, marks[i]); err != nil {
			return p, err
		}
	}
	return nil, nil
}

// completer is told a message's fate: its receipt or its error.
type completer interface {
	complete(pulsarwire.MessageID, error)
}

type callbackFunc func(pulsarwire.MessageID, error)

func (f callbackFunc) complete(id pulsarwire.MessageID, err error) { f(id, err) }

type noCallback struct{}

func (noCallback) complete(pulsarwire.MessageID, error) {}

type result struct {
	id  pulsarwire.MessageID
	err error
}

// waiter carries one receipt to a synchronous Send; pooled.
type waiter struct{ ch chan result }

func (w *waiter) complete(id pulsarwire.MessageID, err error) { w.ch <- result{id, err} }

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan result, 1)} }}

// Send publishes m and waits for its receipt; see (*Client).Publish.
func (p *Producer) Send(ctx context.Context, m Message) (pulsarwire.MessageID, error) {
	w := waiters.Get().(*waiter)
	p.send(ctx, &m, w)
	select {
	case r := <-w.ch:
		waiters.Put(w)
		return r.id, r.err
	case <-ctx.Done():
		// w may still be completed later: it is not reused.
		return pulsarwire.MessageID{}, fmt.Errorf("publish to %s: %w", p.topic, ctx.Err())
	}
}

// SendAsync publishes m and calls done once with its receipt or error;
// see (*Client).PublishAsync.
func (p *Producer) SendAsync(ctx context.Context, m Message, done func(pulsarwire.MessageID, error)) {
	if done == nil {
		p.send(ctx, &m, noCallback{})
		return
	}
	p.send(ctx, &m, callbackFunc(done))
}

func (p *Producer) send(ctx context.Context, m *Message, done completer) {
	if p.c.closing.Load() {
		done.complete(pulsarwire.MessageID{}, fmt.Errorf("publish to %s: %w", p.topic, ErrClosed))
		return
	}
	parts := p.partList()
	pp := parts[0]
	if n := len(parts); n > 1 {
		switch {
		case m.Key != "":
			pp = parts[KeyPartition(m.Key, n)]
		case m.OrderingKey != "":
			pp = parts[KeyPartition(m.OrderingKey, n)]
		default:
			pp = parts[p.rr.next(len(m.Payload), n)]
		}
	}
	var tx *txn.Txn
	if m.Txn != nil {
		var err error
		if tx, done, err = p.joinTxn(m.Txn, pp, done); err != nil {
			done.complete(pulsarwire.MessageID{}, fmt.Errorf("publish to %s: %w", p.topic, err))
			return
		}
	}
	size := int64(len(m.Payload))
	if err := p.pending.acquire(ctx, 1); err != nil {
		done.complete(pulsarwire.MessageID{}, fmt.Errorf("publish to %s: waiting for room among pending messages: %w", p.topic, err))
		return
	}
	if err := p.c.memory.acquire(ctx, size); err != nil {
		p.pending.release(1)
		done.complete(pulsarwire.MessageID{}, fmt.Errorf("publish to %s: waiting for memory: %w", p.topic, err))
		return
	}
	pp.add(m, size, tx, done)
}

// joinTxn makes a message's send an operation of its transaction: pp's
// topic is registered with the transaction's coordinator the first time
// (and pp flushes when the transaction commits), and the send is counted
// until done hears its fate, which the returned completer passes on. The
// registration runs in the background: pp holds the entries of the
// transaction (and those after them) until it is done, and writes them
// then (sendLocked, releaseHeld).
func (p *Producer) joinTxn(t *Transaction, pp *partProducer, done completer) (*txn.Txn, completer, error) {
	tx := (*txn.Txn)(t)
	if pp.txnJoined.Load() != tx {
		r, first, err := tx.Join(pp.topic)
		if err != nil {
			return nil, done, err
		}
		if first {
			if err := tx.AddHooks(txn.Hooks{Flush: pp.flushTxn}); err != nil {
				return nil, done, err
			}
		}
		if ready, _ := r.Ready(); !ready {
			r.OnDone(func(error) { pp.releaseHeld() })
		}
		pp.txnJoined.Store(tx)
	}
	if err := tx.Start(); err != nil {
		return nil, done, err
	}
	return tx, &txnDone{done: done, tx: tx}, nil
}

// txnDone tells a message's transaction how its send ended, then the
// message's own completer.
type txnDone struct {
	done completer
	tx   *txn.Txn
}

func (d *txnDone) complete(id pulsarwire.MessageID, err error) {
	d.tx.Done(err)
	d.done.complete(id, err)
}

// Flush sends the open batches now and waits, while ctx allows, until
// every message published before the call was acknowledged (or failed).
func (p *Producer) Flush(ctx context.Context) error {
	return p.waitFlushed(ctx, p.flushMarks())
}

// flushMarks closes the open batch of every partition and returns
// channels closed once what each had pending is done.
func (p *Producer) flushMarks() []<-chan struct{} {
	parts := p.partList()
	marks := make([]<-chan struct{}, 0, len(parts))
	for _, pp := range parts {
		marks = append(marks, pp.flushMark())
	}
	return marks
}

func (p *Producer) waitFlushed(ctx context.Context, marks []<-chan struct{}) error {
	for _, ch := range marks {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush %s: %w", p.topic, ctx.Err())
		}
	}
	return nil
}

func (p *Producer) closeOnBroker(ctx context.Context) {
	closeOnBroker(ctx, []*Producer{p})
}

// closeOnBroker sends CLOSE_PRODUCER for every partition of ps at once
// and waits, while ctx allows, for the answers.
func closeOnBroker(ctx context.Context, ps []*Producer) {
	var wg sync.WaitGroup
	for _, p := range ps {
		for _, pp := range p.partList() {
			wg.Go(func() { pp.closeOnBroker(ctx) })
		}
	}
	wg.Wait()
}

func (p *Producer) shutdown(err error) {
	for _, pp := range p.partList() {
		pp.shutdown(err)
	}
}

// fail ends a producer that cannot go on: every pending and later message
// fails with err, and the client forgets it.
func (p *Producer) fail(err error) {
	p.failOnce.Do(func() {
		p.c.log.Warn("producer failed", "topic", p.topic, "err", err)
		if !errors.Is(err, pulsarwire.ErrProducerFenced) {
			// A fenced one stays: publishing goes on failing until its
			// owner opens it again (AccessMode).
			p.c.dropProducer(p)
		}
		for _, pp := range p.partList() {
			pp.setFailed(err)
		}
		// Closing on the broker waits for answers: not on a reader
		// goroutine, which may be the caller.
		if !p.c.pool.Spawn(func() {
			p.closeOnBroker(p.c.pool.Context())
			p.shutdown(err)
		}) {
			p.shutdown(err)
		}
	})
}
