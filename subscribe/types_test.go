package subscribe_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// A second consumer of an Exclusive subscription is told the consumer is
// busy, keeps trying, and starts when the first one leaves; it then gets
// what the first left unacknowledged, in order.
func TestSecondExclusiveConsumerWaitsThenStarts(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	rec := &testkit.Records{}
	// Not batched: a batch is acknowledged on the broker only whole.
	c := tg.newClient(t, clientConfig{rec: rec, retryDelay: 100 * time.Millisecond, noBatching: true})
	topic := brokertest.TopicName(t)
	opts := subscribe.Options{Topics: []string{topic}, Subscription: "excl", Type: subscribe.Exclusive}
	first := newConsumer(ctx, t, c, opts)

	type result struct {
		c   *subscribe.Consumer
		err error
	}
	started := make(chan result, 1)
	go func() {
		second, err := subscribe.New(ctx, c, opts)
		started <- result{second, err}
	}()
	brokertest.Eventually(t, testTimeout, "the second consumer to be refused as busy, three times", func() bool {
		return rec.Count("retrying", "ConsumerBusy") >= 3
	})
	select {
	case r := <-started:
		t.Fatalf("the second consumer started while the first was connected (err %v)", r.err)
	default:
	}

	publish(ctx, t, c, topic, 0, 10, nil)
	checkSequence(t, receiveN(ctx, t, first, 4, true), 0)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var second *subscribe.Consumer
	select {
	case r := <-started:
		if r.err != nil {
			t.Fatalf("the second consumer failed: %v", r.err)
		}
		second = r.c
		t.Cleanup(func() { second.Close(context.Background()) })
	case <-ctx.Done():
		t.Fatal("the second consumer did not start after the first left")
	}
	checkSequence(t, receiveN(ctx, t, second, 6, true), 4)
}

// With a retry limit, a second Exclusive consumer gives up with the
// Subscribe error, which wraps the broker's ConsumerBusy.
func TestSecondExclusiveConsumerWithRetryLimitFails(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	opts := subscribe.Options{Topics: []string{topic}, Subscription: "excl", Type: subscribe.Exclusive}
	newConsumer(ctx, t, c, opts)

	opts.Retries = pool.OperationRetries{Attempts: 3, Delay: 50 * time.Millisecond}
	second, err := subscribe.New(ctx, c, opts)
	if err == nil {
		second.Close(ctx)
		t.Fatal("a second Exclusive consumer subscribed")
	}
	var se *subscribe.SubscribeError
	if !errors.As(err, &se) || se.Subscription != "excl" || se.Topic != topic {
		t.Fatalf("error %v (%T) is not the Subscribe error for excl on %s", err, err, topic)
	}
	if !errors.Is(err, pulsarwire.ErrConsumerBusy) || !errors.Is(err, pool.ErrRetriesExhausted) {
		t.Fatalf("error %v does not wrap ConsumerBusy after exhausted retries", err)
	}
	var re *pool.RetryError
	if !errors.As(err, &re) || re.Attempts != 3 {
		t.Fatalf("error %v: want 3 attempts", err)
	}
}

// Failover: one consumer is active and gets every message in order; the
// other stands by and takes over, where the first stopped, when it
// closes. The broker tells both which they are. (Which one is active is
// the broker's choice: on a non-partitioned topic Apache Pulsar hashes
// the topic's name onto a ring of the consumers' names.)
func TestFailoverHandsOverOnClose(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	var mu sync.Mutex
	active := map[string]bool{}
	opts := func(name string) subscribe.Options {
		return subscribe.Options{
			Topics: []string{topic}, Subscription: "fo", Type: subscribe.Failover, Name: name,
			OnActiveChange: func(_ string, a bool) {
				mu.Lock()
				active[name] = a
				mu.Unlock()
			},
		}
	}
	cons := map[string]*subscribe.Consumer{"a": newConsumer(ctx, t, c, opts("a")), "b": newConsumer(ctx, t, c, opts("b"))}
	var first, second string
	brokertest.Eventually(t, testTimeout, "one consumer active, the other standing by", func() bool {
		mu.Lock()
		defer mu.Unlock()
		a, aok := active["a"]
		b, bok := active["b"]
		if !aok || !bok || a == b {
			return false
		}
		first, second = "a", "b"
		if b {
			first, second = "b", "a"
		}
		return true
	})

	publish(ctx, t, c, topic, 0, 10, nil)
	checkSequence(t, receiveN(ctx, t, cons[first], 5, true), 0)
	if err := cons[first].Close(ctx); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, testTimeout, second+" active", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return active[second]
	})
	// Apache Pulsar 4.0.8 now and then (about 1 run in 40, more under
	// load) leaves the new active consumer without the five messages: its
	// internal stats then show the cursor at message 5 with a read
	// waiting for a new entry (waitingReadOp) though 5-9 are there, and
	// the consumer with its 1000 permits. A new entry wakes that read, and
	// 5-9 come, in order. So on Apache Pulsar a message 10 is published
	// when nothing came in 5 s (subscribe/BROKER_GAPS.md).
	var got []*subscribe.Message
	if tg.pulsar() {
		wctx, stop := context.WithTimeout(ctx, 5*time.Second)
		m, err := cons[second].Receive(wctx)
		stop()
		if err != nil {
			t.Logf("Apache Pulsar: nothing for %s in 5 s (%v); publishing message 10. Cursor: %s", second, err,
				tg.AdminDo(t, "GET", brokertest.AdminPath(topic)+"/internalStats", ""))
			publish(ctx, t, c, topic, 10, 1, nil)
		} else {
			if err := cons[second].Ack(ctx, m); err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
	}
	got = append(got, receiveN(ctx, t, cons[second], 5-len(got), true)...)
	checkSequence(t, got, 5)
}

// KeyShared: each key goes to one consumer only, and in the order it
// was published.
//
// Apache Pulsar 4.0's Key_Shared dispatcher may send an entry a second
// time with no fault and no request (an entry read again from its replay
// queue; CI saw one in about a hundred runs). Delivery is at least once,
// so on Apache Pulsar a second copy of a message already received (same
// message ID) is logged and not counted; order is checked over first
// deliveries. The embedded broker sends nothing twice without cause, so
// there a copy fails the test.
func TestKeySharedKeepsEachKeyOnOneConsumerInOrder(t *testing.T) {
	const total, keys = 2000, 40
	tg := newTarget(t)
	ctx := testContext(t)
	// Not batched: a batch mixing keys goes whole to one consumer.
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	opts := func(name string) subscribe.Options {
		return subscribe.Options{Topics: []string{topic}, Subscription: "ks", Type: subscribe.KeyShared, Name: name, ReceiverQueue: 50}
	}
	consumers := []*subscribe.Consumer{newConsumer(ctx, t, c, opts("k1")), newConsumer(ctx, t, c, opts("k2")), newConsumer(ctx, t, c, opts("k3"))}
	publish(ctx, t, c, topic, 0, total, func(i int, m *pool.Message) { m.Key = fmt.Sprint("key-", i%keys) })

	var (
		mu      sync.Mutex
		owner   = map[string]int{}
		last    = map[string]int{}
		seen    = map[pulsarwire.MessageID]bool{}
		copies  int
		counts  = make([]int, len(consumers))
		got     atomic.Int64
		failure error
	)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for ci, cons := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := cons.Receive(rctx)
				if err != nil {
					return
				}
				i, _ := strconv.Atoi(strings.TrimPrefix(string(m.Payload), "message-"))
				mu.Lock()
				if seen[m.ID] {
					copies++
					if !tg.pulsar() && failure == nil {
						failure = fmt.Errorf("key %s: message %d (%v) delivered twice", m.Key, i, m.ID)
					}
					mu.Unlock()
					cons.Ack(rctx, m)
					continue
				}
				seen[m.ID] = true
				if o, ok := owner[m.Key]; ok && o != ci && failure == nil {
					failure = fmt.Errorf("key %s went to consumers %d and %d", m.Key, o, ci)
				}
				if l, ok := last[m.Key]; ok && i <= l && failure == nil {
					failure = fmt.Errorf("key %s: message %d after %d", m.Key, i, l)
				}
				owner[m.Key], last[m.Key] = ci, i
				counts[ci]++
				mu.Unlock()
				cons.Ack(rctx, m)
				if got.Add(1) == total {
					cancel()
				}
			}
		}()
	}
	<-rctx.Done()
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("received %d of %d", got.Load(), total)
	}
	if failure != nil {
		t.Fatal(failure)
	}
	if copies > 0 {
		t.Logf("Apache Pulsar sent %d message(s) a second time; not counted", copies)
	}
	for i, n := range counts {
		if n == 0 {
			t.Errorf("consumer %d got no key (counts %v)", i, counts)
		}
	}
}

// Cumulative acknowledgement is refused on Shared and KeyShared, with a
// clear error; on Exclusive it acknowledges everything up to the message.
func TestCumulativeAck(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	for _, typ := range []subscribe.Type{subscribe.Shared, subscribe.KeyShared} {
		topic := brokertest.TopicName(t)
		cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "cum", Type: typ})
		publish(ctx, t, c, topic, 0, 1, nil)
		m := receiveN(ctx, t, cons, 1, false)[0]
		if err := cons.AckCumulative(ctx, m); !errors.Is(err, subscribe.ErrCumulativeAckNotAllowed) {
			t.Fatalf("%s: AckCumulative = %v, want ErrCumulativeAckNotAllowed", typ, err)
		}
	}

	topic := brokertest.TopicName(t)
	opts := subscribe.Options{Topics: []string{topic}, Subscription: "cum", Type: subscribe.Exclusive}
	cons := newConsumer(ctx, t, c, opts)
	unbatched := tg.newClient(t, clientConfig{noBatching: true})
	publish(ctx, t, unbatched, topic, 0, 25, nil)
	msgs := receiveN(ctx, t, cons, 25, false)
	if err := cons.AckCumulative(ctx, msgs[19]); err != nil {
		t.Fatal(err)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cons = newConsumer(ctx, t, c, opts)
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 20)
}

// A subscription is a cursor the broker keeps: what is published while
// no consumer is connected waits for the next one, and another
// subscription of the same topic gets everything on its own.
func TestDurableSubscriptionKeepsWhatWasPublishedMeanwhile(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	opts := subscribe.Options{Topics: []string{topic}, Subscription: "durable"}
	other := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "other"})
	first := newConsumer(ctx, t, c, opts)
	publish(ctx, t, c, topic, 0, 5, nil)
	checkSequence(t, receiveN(ctx, t, first, 5, true), 0)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	publish(ctx, t, c, topic, 5, 5, nil)
	again := newConsumer(ctx, t, c, opts)
	checkSequence(t, receiveN(ctx, t, again, 5, true), 5)
	checkSequence(t, receiveN(ctx, t, other, 10, true), 0)
}

// A new subscription starts at the newest message unless told otherwise.
func TestNewSubscriptionStartsAtLatest(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	publish(ctx, t, c, topic, 0, 5, nil)
	latest := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "latest"})
	earliest := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "earliest", InitialPosition: subscribe.Earliest})
	publish(ctx, t, c, topic, 5, 5, nil)
	checkSequence(t, receiveN(ctx, t, latest, 5, true), 5)
	checkSequence(t, receiveN(ctx, t, earliest, 10, true), 0)
}
