package subscribe_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	"github.com/streamrun/streamrun/subscribe"
)

// Batched messages arrive one by one, in order, with their key,
// properties and times, whatever the producer compressed them with.
func TestBatchesSplitIntoMessages(t *testing.T) {
	for _, ct := range []pb.CompressionType{pb.CompressionType_NONE, pb.CompressionType_LZ4, pb.CompressionType_ZLIB, pb.CompressionType_ZSTD, pb.CompressionType_SNAPPY} {
		t.Run(ct.String(), func(t *testing.T) {
			tg := newTarget(t)
			ctx := testContext(t)
			c := tg.newClient(t, clientConfig{})
			topic := topicName(t)
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
	topic := topicName(t)
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
