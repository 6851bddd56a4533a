package subscribe_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// Batched messages arrive one by one, in order, with their key,
// properties and times, whatever the producer compressed them with.
func TestBatchesSplitIntoMessages(t *testing.T) {
	for _, ct := range []pool.Compression{pool.NoCompression, pool.LZ4, pool.ZLIB, pool.ZSTD, pool.Snappy} {
		t.Run(ct.String(), func(t *testing.T) {
			tg := newTarget(t)
			ctx := testContext(t)
			c := tg.newClient(t, clientConfig{})
			topic := brokertest.TopicName(t)
			cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "split"})
			pc := tg.newClient(t, clientConfig{opts: func(o *pool.Options) { o.Producer.Compression = ct }})
			event := time.UnixMilli(1700000000123)
			publish(ctx, t, pc, topic, 0, 300, func(i int, m *pool.Message) {
				m.Key = fmt.Sprint("k", i%7)
				m.Properties = map[string]string{"i": fmt.Sprint(i)}
				m.EventTime = event
			})
			msgs := receiveN(ctx, t, cons, 300, true)
			checkSequence(t, msgs, 0)
			batched := false
			for i, m := range msgs {
				if m.Key != fmt.Sprint("k", i%7) || m.Properties["i"] != fmt.Sprint(i) || !m.EventTime.Equal(event) {
					t.Fatalf("message %d: key %q properties %v event time %v", i, m.Key, m.Properties, m.EventTime)
				}
				if m.Topic != topic || m.ID.Partition != -1 || m.PublishTime.IsZero() {
					t.Fatalf("message %d: topic %q id %s publish time %v", i, m.Topic, m.ID, m.PublishTime)
				}
				batched = batched || m.ID.BatchIndex > 0
			}
			if !batched {
				t.Fatalf("no message came in a batch: ids %s .. %s", msgs[0].ID, msgs[len(msgs)-1].ID)
			}
		})
	}
}

// A consumer whose client closes stops: Receive returns ErrClosed, and
// its goroutines end even before its own Close (goleak checks the rest).
func TestClientCloseStopsTheConsumer(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Receive(ctx); !errors.Is(err, subscribe.ErrClosed) {
		t.Fatalf("Receive after the client closed: %v, want ErrClosed", err)
	}
	cons.Close(ctx)
}

// AckGroupSize counts messages, not batch entries: acknowledging a
// thousand batched messages sends them at once, without waiting for
// AckGroupTime. Counted in entries, a consumer of large batches held
// back up to 1000 entries of acknowledgements, reached the broker's
// limit of unacknowledged messages (50,000 a consumer) and stalled until
// the group time ran out.
func TestAckGroupSizeCountsMessages(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "group",
		AckGroupTime: time.Hour, AckGroupSize: 1000})
	publish(ctx, t, tg.newClient(t, clientConfig{}), topic, 0, 3000, nil)
	msgs := receiveN(ctx, t, cons, 3000, false)
	entries := map[[2]uint64]bool{}
	for _, m := range msgs {
		entries[[2]uint64{m.ID.Ledger, m.ID.Entry}] = true
	}
	if len(entries) > 20 {
		t.Fatalf("3000 messages came in %d entries; the test needs large batches", len(entries))
	}
	if b := tg.backlog(t, topic, "group"); b != int64(len(entries)) {
		t.Fatalf("backlog %d before any ack, want %d entries", b, len(entries))
	}
	// Whole entries, in order, until at least 1000 messages are acked:
	// it stops only where an entry starts, however the producer's
	// batching delay cut the entries. Counted in messages, the add of
	// the last entry reaches the group size and sends them all; counted
	// in entries (at most 20 here) nothing goes before AckGroupTime.
	acked, done := 0, map[[2]uint64]bool{}
	var prev [2]uint64
	for _, m := range msgs {
		e := [2]uint64{m.ID.Ledger, m.ID.Entry}
		if acked >= 1000 && e != prev {
			break
		}
		prev = e
		if err := cons.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
		acked++
		if m.ID.BatchIndex == m.ID.BatchSize-1 || m.ID.BatchSize == 0 {
			done[e] = true
		}
	}
	want := int64(len(entries) - len(done))
	deadline := time.Now().Add(10 * time.Second)
	for {
		b := tg.backlog(t, topic, "group")
		if b == want {
			t.Logf("%d messages in %d entries acked: backlog %d of %d entries", acked, len(done), b, len(entries))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d of %d entries after acking %d messages in %d whole entries, want %d: the acknowledgements wait for AckGroupTime",
				b, len(entries), acked, len(done), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
