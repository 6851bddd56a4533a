package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// collector gathers asynchronous receipts.
type collector struct {
	mu   sync.Mutex
	ids  map[int]pulsarwire.MessageID
	errs map[int]error
	done chan struct{}
	want int
}

func newCollector(want int) *collector {
	return &collector{ids: map[int]pulsarwire.MessageID{}, errs: map[int]error{}, done: make(chan struct{}), want: want}
}

func (c *collector) cb(i int) func(pulsarwire.MessageID, error) {
	return func(id pulsarwire.MessageID, err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, dup := c.ids[i]; dup {
			panic(fmt.Sprintf("message %d completed twice", i))
		}
		if _, dup := c.errs[i]; dup {
			panic(fmt.Sprintf("message %d completed twice", i))
		}
		if err != nil {
			c.errs[i] = err
		} else {
			c.ids[i] = id
		}
		if len(c.ids)+len(c.errs) == c.want {
			close(c.done)
		}
	}
}

func (c *collector) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("%d receipts and %d errors of %d after %s", len(c.ids), len(c.errs), c.want, d)
	}
}

func TestPublishedMessagesArriveWithTheirFieldsAndIDsInOrder(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)

	first, err := c.Publish(ctx, topic, Message{
		Payload:     []byte("first"),
		Key:         "k-0",
		OrderingKey: "ok-0",
		Properties:  map[string]string{"a": "1", "b": "2"},
		EventTime:   time.UnixMilli(1700000000123),
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	col := newCollector(n)
	for i := 0; i < n; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "m-%d", i), Key: fmt.Sprint("k-", i%7)}, col.cb(i))
	}
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatalf("errors: %v", col.errs)
	}
	prev := first
	for i := 0; i < n; i++ {
		id := col.ids[i]
		if id.Compare(prev) <= 0 {
			t.Fatalf("receipt %d is %s, not after %s", i, id, prev)
		}
		if id.Partition != -1 {
			t.Fatalf("partition %d for a topic that is not partitioned", id.Partition)
		}
		prev = id
	}

	rc := subscribeRaw(t, c, topic)
	got := rc.wait(n+1, 30*time.Second)
	g := got[0]
	if g.Payload != "first" || g.Key != "k-0" || g.OrderingKey != "ok-0" || g.EventTime != 1700000000123 ||
		g.Properties["a"] != "1" || g.Properties["b"] != "2" || len(g.Properties) != 2 || g.ID != first {
		t.Fatalf("first message arrived as %+v (published as %s)", g, first)
	}
	seen := map[uint64]bool{}
	for i, m := range got[1:] {
		if m.Payload != fmt.Sprint("m-", i) || m.Key != fmt.Sprint("k-", i%7) {
			t.Fatalf("message %d arrived as %+v", i, m)
		}
		if m.ID != col.ids[i] {
			t.Fatalf("message %d: receipt said %s, consumer sees %s", i, col.ids[i], m.ID)
		}
		if seen[m.SequenceID] {
			t.Fatalf("sequence id %d twice", m.SequenceID)
		}
		seen[m.SequenceID] = true
	}
}

func TestOneProducerPerTopicSharedByEveryPublisher(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)

	var wg sync.WaitGroup
	producers := make([]*Producer, 8)
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Producer(ctx, topic)
			if err != nil {
				t.Error(err)
				return
			}
			producers[i] = p
			for j := 0; j < 50; j++ {
				if _, err := p.Send(ctx, Message{Payload: []byte("x")}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range producers {
		if p != producers[0] {
			t.Fatal("publishers got different producers for one topic")
		}
	}
	short := strings.TrimPrefix(topic, "persistent://public/default/")
	if p, _ := c.Producer(ctx, short); p != producers[0] {
		t.Fatal("the short name of the topic got another producer")
	}
	if len(producers[0].partList()) != 1 || producers[0].Partitions() != 0 {
		t.Fatalf("%d partition producers for a plain topic", len(producers[0].partList()))
	}
}

func TestPartitionedTopicRoutesKeysLikeJavaAndRoundRobinsTheRest(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	topic := brokertest.TopicName(t)
	const parts = 5
	tg.CreatePartitioned(t, topic, parts)
	ctx := brokertest.Context(t, time.Minute)

	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if p.Partitions() != parts {
		t.Fatalf("%d partitions, want %d", p.Partitions(), parts)
	}
	keys := []string{"alpha", "beta", "gamma", "delta", "order-17", "ключ", "😀", "a-very-long-key-whose-hash-has-the-sign-bit-set"}
	for _, k := range keys {
		for i := 0; i < 3; i++ {
			id, err := c.Publish(ctx, topic, Message{Payload: []byte(k), Key: k})
			if err != nil {
				t.Fatal(err)
			}
			if want := KeyPartition(k, parts); int(id.Partition) != want {
				t.Fatalf("key %q went to partition %d, Java's router says %d", k, id.Partition, want)
			}
		}
	}
	// Without a key: every partition gets some (round robin moves on
	// after each batch's worth or MaxDelay).
	used := map[int32]int{}
	for i := 0; i < 40; i++ {
		id, err := c.Publish(ctx, topic, Message{Payload: []byte("no key")})
		if err != nil {
			t.Fatal(err)
		}
		used[id.Partition]++
	}
	if len(used) != parts {
		t.Fatalf("messages without a key went to partitions %v only", used)
	}
	// The consumer of each partition sees its keys.
	for i := 0; i < parts; i++ {
		part, _ := pulsarwire.ParseTopic(topic)
		rc := subscribeRaw(t, c, part.Partition(i).String())
		want := used[int32(i)]
		for _, k := range keys {
			if KeyPartition(k, parts) == i {
				want += 3
			}
		}
		for _, m := range rc.wait(want, 30*time.Second) {
			if m.Key != "" && KeyPartition(m.Key, parts) != i {
				t.Fatalf("key %q on partition %d", m.Key, i)
			}
		}
	}
}

// publishToAnOpenBatch publishes 10 messages with a batching delay of an
// hour, so that they wait in an open batch, and returns the client, the
// receipts' collector and the test's context.
func publishToAnOpenBatch(t *testing.T) (*Client, *collector, context.Context) {
	t.Helper()
	c := newClient(t, newTarget(t), Options{Producer: ProducerOptions{Batching: BatchingOptions{MaxDelay: time.Hour}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	const n = 10
	col := newCollector(n)
	for i := 0; i < n; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: []byte("x")}, col.cb(i))
	}
	return c, col, ctx
}

func TestFlushWaitsForEveryReceipt(t *testing.T) {
	// A long MaxDelay: only Flush sends the batch.
	c, col, ctx := publishToAnOpenBatch(t)
	select {
	case <-col.done:
		t.Fatal("receipts before the batch was due")
	case <-time.After(50 * time.Millisecond):
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-col.done:
	default:
		t.Fatal("Flush returned before every receipt")
	}
}

// SendOpenBatches sends a batch that would otherwise wait out MaxDelay,
// and returns without waiting for its receipts.
func TestSendOpenBatchesSendsWithoutWaiting(t *testing.T) {
	c, col, ctx := publishToAnOpenBatch(t)
	c.SendOpenBatches()
	select {
	case <-col.done:
	case <-ctx.Done():
		t.Fatal("no receipts after SendOpenBatches: the batch still waits for MaxDelay")
	}
}

func TestEveryCodecIsReadBack(t *testing.T) {
	tg := newTarget(t)
	for _, ct := range []Compression{LZ4, ZLIB, ZSTD, Snappy} {
		t.Run(ct.String(), func(t *testing.T) {
			c := newClient(t, tg, Options{Producer: ProducerOptions{Compression: ct}})
			topic := brokertest.TopicName(t)
			ctx := brokertest.Context(t, time.Minute)
			const n = 300
			col := newCollector(n)
			for i := 0; i < n; i++ {
				c.PublishAsync(ctx, topic, Message{Payload: []byte(strings.Repeat(fmt.Sprint(i), 50))}, col.cb(i))
			}
			col.wait(t, 30*time.Second)
			if len(col.errs) > 0 {
				t.Fatal(col.errs)
			}
			rc := subscribeRaw(t, c, topic)
			for i, m := range rc.wait(n, 30*time.Second) {
				if m.Payload != strings.Repeat(fmt.Sprint(i), 50) {
					t.Fatalf("message %d: %q", i, m.Payload)
				}
			}
		})
	}
}

func TestBatchingDisabledSendsOneEntryPerMessage(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{Producer: ProducerOptions{Batching: BatchingOptions{Disabled: true}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	const n = 20
	col := newCollector(n)
	for i := 0; i < n; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: fmt.Appendf(nil, "%d", i), Key: "k", Properties: map[string]string{"i": fmt.Sprint(i)}}, col.cb(i))
	}
	col.wait(t, 30*time.Second)
	entries := map[[2]uint64]bool{}
	for i := 0; i < n; i++ {
		id := col.ids[i]
		if id.BatchIndex != -1 {
			t.Fatalf("receipt %s has a batch index", id)
		}
		entries[[2]uint64{id.Ledger, id.Entry}] = true
	}
	if len(entries) != n {
		t.Fatalf("%d messages in %d entries", n, len(entries))
	}
	rc := subscribeRaw(t, c, topic)
	for i, m := range rc.wait(n, 30*time.Second) {
		if m.Payload != fmt.Sprint(i) || m.Key != "k" || m.Properties["i"] != fmt.Sprint(i) {
			t.Fatalf("message %d arrived as %+v", i, m)
		}
	}
}

func TestTooLargeMessageIsRefusedWithoutHarm(t *testing.T) {
	for _, byKey := range []bool{false, true} {
		t.Run(map[bool]string{false: "one batch", true: "a batch per key"}[byKey], func(t *testing.T) {
			tg := newTarget(t)
			c := newClient(t, tg, Options{Producer: ProducerOptions{Batching: BatchingOptions{ByKey: byKey}}})
			topic := brokertest.TopicName(t)
			ctx := brokertest.Context(t, time.Minute)
			if _, err := c.Publish(ctx, topic, Message{Payload: make([]byte, 6<<20), Key: "a"}); !errors.Is(err, ErrMessageTooLarge) {
				t.Fatalf("6 MiB message: %v, want ErrMessageTooLarge", err)
			}
			if _, err := c.Publish(ctx, topic, Message{Payload: []byte("small"), Key: "a"}); err != nil {
				t.Fatalf("the next message: %v", err)
			}
			// A message of nearly the limit goes through alone.
			if _, err := c.Publish(ctx, topic, Message{Payload: make([]byte, 4<<20), Key: "b"}); err != nil {
				t.Fatalf("4 MiB message: %v", err)
			}
		})
	}
}

// A message too large for the broker is refused the same way while the
// producer is being re-created on a new connection, which learns the
// broker's limit anew (under -race: the refusal reads that limit under
// the producer's lock).
func TestTooLargeMessageIsRefusedWhileReconnecting(t *testing.T) {
	for _, byKey := range []bool{false, true} {
		t.Run(map[bool]string{false: "one batch", true: "a batch per key"}[byKey], func(t *testing.T) {
			tg := newTarget(t)
			px := newProxies(t)
			c := newClient(t, tg, Options{Dial: px.Dial, OperationRetries: OperationRetries{Delay: 20 * time.Millisecond},
				Producer: ProducerOptions{Batching: BatchingOptions{ByKey: byKey}}})
			topic := brokertest.TopicName(t)
			ctx := brokertest.Context(t, time.Minute)
			p, err := c.Producer(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			big := Message{Payload: make([]byte, 6<<20), Key: "a"}
			stop := make(chan struct{})
			refused := make(chan error, 1)
			go func() {
				for {
					select {
					case <-stop:
						refused <- nil
						return
					default:
					}
					if _, err := p.Send(ctx, big); !errors.Is(err, ErrMessageTooLarge) {
						refused <- fmt.Errorf("6 MiB message: %v, want ErrMessageTooLarge", err)
						return
					}
				}
			}()
			for i := 0; i < 3; i++ {
				px.Cut()
				if _, err := p.Send(ctx, Message{Payload: []byte("small"), Key: "a"}); err != nil {
					t.Fatalf("after cut %d: %v", i, err)
				}
			}
			close(stop)
			if err := <-refused; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPublishingBlocksAtThePendingLimitAndNeverDrops(t *testing.T) {
	tg := newTarget(t)
	px := newProxies(t)
	const limit = 10
	c := newClient(t, tg, Options{
		Dial:     px.Dial,
		Producer: ProducerOptions{MaxPendingMessages: limit, Batching: BatchingOptions{MaxMessages: 3}},
	})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	px.Freeze() // the broker's receipts stop coming
	col := newCollector(limit + 1)
	for i := 0; i < limit; i++ {
		p.SendAsync(ctx, Message{Payload: []byte("x")}, col.cb(i))
	}
	// The next one blocks until its context ends, and fails with it.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = p.Send(short, Message{Payload: []byte("x")})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("publishing past the limit: %v after %s, want to block until the deadline", err, time.Since(start))
	}
	// Blocked, then let through once receipts come back.
	unblocked := make(chan struct{})
	go func() {
		defer close(unblocked)
		p.SendAsync(ctx, Message{Payload: []byte("x")}, col.cb(limit))
	}()
	brokertest.Eventually(t, 5*time.Second, "a publisher waiting for room", func() bool { return p.pending.blocked() == 1 })
	px.Thaw()
	<-unblocked
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatalf("errors: %v", col.errs)
	}
}

func TestMemoryLimitBlocksAcrossProducers(t *testing.T) {
	tg := newTarget(t)
	px := newProxies(t)
	c := newClient(t, tg, Options{Dial: px.Dial, MemoryLimit: 1000})
	ctx := brokertest.Context(t, time.Minute)
	a, b := brokertest.TopicName(t), brokertest.TopicName(t)
	for _, topic := range []string{a, b} {
		if _, err := c.Producer(ctx, topic); err != nil {
			t.Fatal(err)
		}
	}
	px.Freeze()
	col := newCollector(3)
	c.PublishAsync(ctx, a, Message{Payload: make([]byte, 600)}, col.cb(0))
	c.PublishAsync(ctx, b, Message{Payload: make([]byte, 400)}, col.cb(1))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Publish(short, b, Message{Payload: make([]byte, 1)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the memory limit: %v, want to block until the deadline", err)
	}
	go c.PublishAsync(ctx, a, Message{Payload: make([]byte, 10)}, col.cb(2))
	brokertest.Eventually(t, 5*time.Second, "a publisher waiting for memory", func() bool { return c.own().memory.blocked() == 1 })
	px.Thaw()
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatalf("errors: %v", col.errs)
	}
}

func TestDeadConnectionIsDetectedAndReplaced(t *testing.T) {
	tg := newTarget(t)
	px := newProxies(t)
	c := newClient(t, tg, Options{Dial: px.Dial, KeepAliveInterval: 100 * time.Millisecond, OperationRetries: OperationRetries{Delay: 50 * time.Millisecond}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	if _, err := c.Publish(ctx, topic, Message{Payload: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	accepts := 0
	px.each(func(p *tcpProxy) { accepts += p.Accepts() })
	px.Freeze()
	col := newCollector(1)
	c.PublishAsync(ctx, topic, Message{Payload: []byte("during")}, col.cb(0))
	// Nothing comes back: keep-alive declares the connection dead within
	// two intervals and the producer dials again (the proxy accepts, bytes
	// still stand still); once thawed, the producer is re-created and
	// resends.
	brokertest.Eventually(t, 5*time.Second, "a new connection after the old one went silent", func() bool {
		now := 0
		px.each(func(p *tcpProxy) { now += p.Accepts() })
		return now > accepts
	})
	px.Thaw()
	col.wait(t, 10*time.Second)
	if len(col.errs) > 0 {
		t.Fatal(col.errs)
	}
	now := 0
	px.each(func(p *tcpProxy) { now += p.Accepts() })
	if now <= accepts {
		t.Fatalf("no new connection: %d accepted before, %d after", accepts, now)
	}
}

func TestCutConnectionResendsPendingInOrderWithoutLossOrDuplicateSequenceIDs(t *testing.T) {
	for _, byKey := range []bool{false, true} {
		t.Run(map[bool]string{false: "one batch", true: "a batch per key"}[byKey], func(t *testing.T) {
			tg := newTarget(t)
			px := newProxies(t)
			c := newClient(t, tg, Options{Dial: px.Dial, OperationRetries: OperationRetries{Delay: 20 * time.Millisecond},
				Producer: ProducerOptions{Batching: BatchingOptions{MaxMessages: 50, ByKey: byKey}}})
			topic := brokertest.TopicName(t)
			ctx := brokertest.Context(t, time.Minute)
			p, err := c.Producer(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			const n, keys = 20000, 7
			col := newCollector(n)
			for i := 0; i < n; i++ {
				m := Message{Payload: fmt.Appendf(nil, "%d", i)}
				if byKey {
					m.Key = fmt.Sprint("k-", i%keys)
				}
				p.SendAsync(ctx, m, col.cb(i))
				if i%5000 == 2500 {
					px.Cut()
				}
			}
			col.wait(t, 30*time.Second)
			if len(col.errs) > 0 {
				t.Fatalf("%d errors, e.g. %v", len(col.errs), col.errs)
			}
			if byKey {
				checkStreamByKey(t, subscribeRaw(t, c, topic), n, keys)
			} else {
				checkStream(t, subscribeRaw(t, c, topic), n)
			}
		})
	}
}

// checkStream reads a topic published with payloads "0".."n-1" across
// reconnects: every message is there, in order; a message stored twice
// (sent before a cut whose receipt was lost, then resent) has the same
// sequence id both times, and sequence ids never go back otherwise.
func checkStream(t *testing.T, rc *rawConsumer, n int) {
	t.Helper()
	brokertest.Eventually(t, 30*time.Second, fmt.Sprintf("%d messages", n), func() bool {
		msgs := rc.all()
		return len(msgs) > 0 && msgs[len(msgs)-1].Payload == fmt.Sprint(n-1)
	})
	next := 0
	seqOf := map[string]uint64{}
	var lastSeq uint64
	dups := 0
	for i, m := range rc.all() {
		if s, ok := seqOf[m.Payload]; ok {
			if s != m.SequenceID {
				t.Fatalf("message %s stored twice with sequence ids %d and %d", m.Payload, s, m.SequenceID)
			}
			dups++
			continue
		}
		if m.Payload != fmt.Sprint(next) {
			t.Fatalf("position %d: message %s, want %d (lost or out of order)", i, m.Payload, next)
		}
		if next > 0 && m.SequenceID <= lastSeq {
			t.Fatalf("message %s has sequence id %d after %d", m.Payload, m.SequenceID, lastSeq)
		}
		seqOf[m.Payload], lastSeq = m.SequenceID, m.SequenceID
		next++
	}
	if next != n {
		t.Fatalf("%d of %d messages", next, n)
	}
	t.Logf("%d messages in order; %d resent copies (same sequence ids)", n, dups)
}

// With ByKey, an entry holds one key's messages (the ordering key when
// set, else the key; messages with neither together) and carries that
// key; the limits apply to the open batches together; receipts still
// come in order of the entries' first sequence ids, and each key's
// messages complete in the order they were published.
func TestBatchesByKeyHoldOneKeyEachWithinTheProducersLimits(t *testing.T) {
	tg := newTarget(t)
	const maxMessages = 40
	c := newClient(t, tg, Options{Producer: ProducerOptions{Batching: BatchingOptions{
		ByKey: true, MaxMessages: maxMessages, MaxDelay: time.Hour}}})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	// Message i: key "k-<i%5>", and for i%5 == 3 also ordering key
	// "ok-<i%2>"; i%5 == 4 has neither.
	msg := func(i int) Message {
		m := Message{Payload: fmt.Appendf(nil, "%d", i)}
		switch i % 5 {
		case 3:
			m.Key, m.OrderingKey = fmt.Sprint("k-", i%5), fmt.Sprint("ok-", i%2)
		case 4:
		default:
			m.Key = fmt.Sprint("k-", i%5)
		}
		return m
	}
	routing := func(key, orderingKey string) string {
		if orderingKey != "" {
			return "ordering " + orderingKey
		}
		return "key " + key
	}
	const n = 1000 // a multiple of maxMessages: the delay never closes a batch
	col := newCollector(n)
	for i := 0; i < n; i++ {
		p.SendAsync(ctx, msg(i), col.cb(i))
	}
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatalf("errors: %v", col.errs)
	}
	last := map[string]pulsarwire.MessageID{}
	for i := 0; i < n; i++ {
		m, id := msg(i), col.ids[i]
		r := routing(m.Key, m.OrderingKey)
		if prev, ok := last[r]; ok && id.Compare(prev) <= 0 {
			t.Fatalf("message %d (%s) completed as %s, not after %s", i, r, id, prev)
		}
		last[r] = id
	}

	rc := subscribeRaw(t, c, topic)
	got := rc.wait(n, 30*time.Second)
	type entry struct{ ledger, entry uint64 }
	entries := map[entry][]received{}
	var order []entry
	for _, m := range got {
		e := entry{m.ID.Ledger, m.ID.Entry}
		if _, ok := entries[e]; !ok {
			order = append(order, e)
		}
		entries[e] = append(entries[e], m)
	}
	round := 0 // messages in the batches opened since the last flush
	for _, e := range order {
		ms := entries[e]
		r := routing(ms[0].Key, ms[0].OrderingKey)
		for _, m := range ms {
			if routing(m.Key, m.OrderingKey) != r {
				t.Fatalf("entry %v mixes %s and %s", e, r, routing(m.Key, m.OrderingKey))
			}
		}
		if ms[0].EntryKey != ms[0].Key {
			t.Fatalf("entry %v carries key %q, its first message %q", e, ms[0].EntryKey, ms[0].Key)
		}
		round += len(ms)
		if round > maxMessages {
			t.Fatalf("%d messages sent in one flush, more than MaxMessages %d", round, maxMessages)
		}
		if round == maxMessages {
			round = 0
		}
	}
	// 5 keys and 2 ordering keys: 6 routing keys, so 6 entries per
	// flush of 40 messages.
	if want := n / maxMessages * 6; len(order) != want {
		t.Fatalf("%d entries, want %d", len(order), want)
	}
}

// checkStreamByKey is checkStream for a topic published with ByKey:
// payloads "0".."n-1", message i with key "k-<i%keys>". Entries hold one
// key each and go out by their first sequence id, so the order holds per
// key, not across keys; every message is there, a resent copy has the
// same sequence id, and every message is in an entry of its own key.
func checkStreamByKey(t *testing.T, rc *rawConsumer, n, keys int) {
	t.Helper()
	brokertest.Eventually(t, 30*time.Second, fmt.Sprintf("%d messages", n), func() bool {
		got := map[string]bool{}
		for _, m := range rc.all() {
			got[m.Payload] = true
		}
		return len(got) == n
	})
	seqOf := map[string]uint64{}
	next := map[string]int{}
	dups := 0
	for i, m := range rc.all() {
		if s, ok := seqOf[m.Payload]; ok {
			if s != m.SequenceID {
				t.Fatalf("message %s stored twice with sequence ids %d and %d", m.Payload, s, m.SequenceID)
			}
			dups++
			continue
		}
		if m.EntryKey != m.Key {
			t.Fatalf("message %s with key %s is in an entry of key %s", m.Payload, m.Key, m.EntryKey)
		}
		want, ok := next[m.Key]
		if !ok {
			// A key's first message: k-j's is j.
			want, _ = strconv.Atoi(strings.TrimPrefix(m.Key, "k-"))
		}
		if m.Payload != fmt.Sprint(want) || m.Key != fmt.Sprint("k-", want%keys) {
			t.Fatalf("position %d: message %s with key %s, want %d (lost or out of order)", i, m.Payload, m.Key, want)
		}
		if m.SequenceID != uint64(want) {
			t.Fatalf("message %s has sequence id %d", m.Payload, m.SequenceID)
		}
		seqOf[m.Payload] = m.SequenceID
		next[m.Key] = want + keys
	}
	if len(seqOf) != n {
		t.Fatalf("%d of %d messages", len(seqOf), n)
	}
	t.Logf("%d messages in order per key; %d resent copies (same sequence ids)", n, dups)
}

func TestClosedClientFailsPublishingAndStopsEverything(t *testing.T) {
	tg := newTarget(t)
	c, err := New(brokertest.Context(t, 30*time.Second), Options{ServiceURL: tg.URL})
	if err != nil {
		t.Fatal(err)
	}
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	col := newCollector(100)
	for i := 0; i < 100; i++ {
		c.PublishAsync(ctx, topic, Message{Payload: []byte("x")}, col.cb(i))
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	col.wait(t, time.Second) // Close flushed and waited
	if len(col.errs) > 0 {
		t.Fatalf("errors: %v", col.errs)
	}
	if _, err := c.Publish(ctx, topic, Message{Payload: []byte("late")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after Close: %v", err)
	}
	if len(c.conns().BrokerConns()) != 0 {
		t.Fatalf("connections left: %v", c.conns().BrokerConns())
	}
	// goleak in TestMain checks the goroutines.
}

func TestServiceURLHostListSkipsDeadHosts(t *testing.T) {
	tg := newTarget(t)
	dead := deadAddr(t)
	u, err := connpool.ParseServiceURL(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, tg, Options{ServiceURL: "pulsar://" + dead + "," + u.Hosts[0]})
	if _, err := c.Publish(brokertest.Context(t, time.Minute), brokertest.TopicName(t), Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestSmallBatchesAwaitingReceiptsHoldSmallBuffers(t *testing.T) {
	tg := newTarget(t)
	px := newProxies(t)
	c := newClient(t, tg, Options{Dial: px.Dial})
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, brokertest.TopicName(t))
	if err != nil {
		t.Fatal(err)
	}
	px.Freeze()
	col := newCollector(50)
	for i := 0; i < 50; i++ {
		p.SendAsync(ctx, Message{Payload: []byte("tiny")}, col.cb(i))
		p.partList()[0].flushMark() // a batch of one
	}
	pp := p.partList()[0]
	pp.mu.Lock()
	held, n := 0, 0
	for b := range pp.pending.all() {
		held += cap(b.buf)
		n++
	}
	pp.mu.Unlock()
	if n != 50 || held > 50*(16<<10) {
		t.Fatalf("%d pending batches hold %d bytes of buffers", n, held)
	}
	px.Thaw()
	col.wait(t, 30*time.Second)
}

func TestConnCarriesARawProducerBuiltOnItsAPI(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	conn, err := c.conns().Conn(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	const producerID = 1 << 40 // far from the client's own ids
	resp, err := conn.Request(ctx, pulsarwire.Wrap(&pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(producerID)}))
	if err != nil {
		t.Fatal(err)
	}
	name := resp.GetProducerSuccess().GetProducerName()
	err = conn.SendPayload(pulsarwire.Wrap(&pb.CommandSend{ProducerId: proto.Uint64(producerID), SequenceId: proto.Uint64(0)}),
		&pb.MessageMetadata{ProducerName: proto.String(name), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(uint64(time.Now().UnixMilli())),
			PartitionKey: proto.String("raw")}, []byte("sent raw"))
	if err != nil {
		t.Fatal(err)
	}
	m := subscribeRaw(t, c, topic).wait(1, 30*time.Second)[0]
	if m.Payload != "sent raw" || m.Key != "raw" {
		t.Fatalf("got %+v", m)
	}
	if _, err := conn.Request(ctx, pulsarwire.Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(1)})); err == nil {
		t.Fatal("Request accepted a command without a request id")
	}
}

func TestPartitionsAddedLaterGetProducers(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{Producer: ProducerOptions{PartitionRefresh: 20 * time.Millisecond}})
	topic := brokertest.TopicName(t)
	tg.CreatePartitioned(t, topic, 2)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	tg.UpdatePartitions(t, topic, 5)
	brokertest.Eventually(t, 10*time.Second, "5 partitions", func() bool { return p.Partitions() == 5 })
	// Keys now spread over 5: one that maps to a new partition lands there.
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("key-", i); KeyPartition(k, 5) >= 2 {
			key = k
		}
	}
	id, err := c.Publish(ctx, topic, Message{Payload: []byte("x"), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if int(id.Partition) != KeyPartition(key, 5) {
		t.Fatalf("key %q went to partition %d", key, id.Partition)
	}
}

// The largest payload MaxPayload names, max_message_size itself, goes
// batched or not (batched, a message no batch can hold goes alone,
// unbatched, between the batches around it, as the Java client sends it),
// and one byte more is refused with an error stating the limit: what
// Apache Pulsar's brokers take, the frame headers riding in the padding.
func TestLargestMessageThatFitsGoes(t *testing.T) {
	for _, mode := range []string{"unbatched", "batched", "batched by key"} {
		t.Run(mode, func(t *testing.T) {
			batched := mode != "unbatched"
			tg := newTarget(t)
			c := newClient(t, tg, Options{Producer: ProducerOptions{Batching: BatchingOptions{Disabled: !batched, ByKey: mode == "batched by key"}}})
			topic := brokertest.TopicName(t)
			ctx := brokertest.Context(t, time.Minute)
			m := Message{Key: "k", Properties: map[string]string{"a": "1"}}
			most := MaxPayload(pulsarwire.DefaultMaxMessageSize, m)
			if most != pulsarwire.DefaultMaxMessageSize {
				t.Fatalf("MaxPayload %d, want the whole max_message_size", most)
			}
			m.Payload = make([]byte, most+1)
			_, err := c.Publish(ctx, topic, m)
			if !errors.Is(err, ErrMessageTooLarge) || !strings.Contains(err.Error(), fmt.Sprint("max_message_size of ", pulsarwire.DefaultMaxMessageSize)) {
				t.Fatalf("%d bytes: %v, want ErrMessageTooLarge naming the limit", most+1, err)
			}
			// Small, largest, small: in order, the small ones batched.
			p, err := c.Producer(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			results := make(chan error, 3)
			ids := make([]pulsarwire.MessageID, 3)
			for i, n := range []int{10, most, 10} {
				m.Payload = make([]byte, n)
				p.SendAsync(ctx, m, func(id pulsarwire.MessageID, err error) {
					ids[i] = id
					results <- err
				})
			}
			for range 3 {
				if err := <-results; err != nil {
					t.Fatalf("a message of up to %d bytes: %v", most, err)
				}
			}
			if !(ids[0].Entry < ids[1].Entry && ids[1].Entry < ids[2].Entry) || ids[1].BatchIndex != -1 {
				t.Fatalf("ids %v: want three entries in order, the large one unbatched", ids)
			}
			if batched && (ids[0].BatchIndex != 0 || ids[2].BatchIndex != 0) {
				t.Fatalf("ids %v: the small messages were not batched", ids)
			}
		})
	}
}

// A publisher may reuse a payload's array once PublishAsync returns: the
// messages arrive as they were when each was handed over, whether it
// went in a batch or, too large for one, alone.
func TestPublishAsyncPayloadMayBeReusedOnceItReturns(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	const n = 200
	col := newCollector(n)
	var buf []byte
	for i := range n {
		size := 10
		if i%50 == 0 {
			size = 200 << 10 // over a batch's bytes: sent alone
		}
		buf = append(buf[:0], bytes.Repeat([]byte{byte('a' + i%26)}, size)...)
		buf = fmt.Appendf(buf, "-%d", i)
		c.PublishAsync(ctx, topic, Message{Payload: buf}, col.cb(i))
		clear(buf) // written over before the batch goes
	}
	col.wait(t, 30*time.Second)
	if len(col.errs) > 0 {
		t.Fatalf("errors: %v", col.errs)
	}
	got := subscribeRaw(t, c, topic).wait(n, 30*time.Second)
	for i, m := range got {
		size := 10
		if i%50 == 0 {
			size = 200 << 10
		}
		if want := strings.Repeat(string(rune('a'+i%26)), size) + fmt.Sprint("-", i); m.Payload != want {
			t.Fatalf("message %d arrived as %d bytes %.20q…, not as published", i, len(m.Payload), m.Payload)
		}
	}
}
