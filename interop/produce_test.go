package interop

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// Batched and compressed messages come back intact and in order, with
// their keys, properties and event times, for every codec.
func TestProduceCompressedBatches(t *testing.T) {
	codecs := []struct {
		name string
		typ  pulsar.CompressionType
	}{
		{"NONE", pulsar.NoCompression},
		{"LZ4", pulsar.LZ4},
		{"ZLIB", pulsar.ZLib},
		{"ZSTD", pulsar.ZSTD},
		{"SNAPPY", pulsar.SNAPPY},
	}
	for _, codec := range codecs {
		for _, batching := range []bool{true, false} {
			name := codec.name + "/batched"
			if !batching {
				name = codec.name + "/unbatched"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testProduceRoundTrip(t, codec.name, codec.typ, batching)
			})
		}
	}
}

func testProduceRoundTrip(t *testing.T, codecName string, codec pulsar.CompressionType, batching bool) {
	const n = 1000
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{
		Topic:            topic,
		SubscriptionName: "roundtrip",
		Type:             pulsar.Exclusive,
	})
	p := newProducer(t, c, pulsar.ProducerOptions{
		Topic:                   topic,
		CompressionType:         codec,
		DisableBatching:         !batching,
		BatchingMaxMessages:     1000,
		BatchingMaxPublishDelay: 10 * time.Millisecond,
	})
	base := time.Now().Truncate(time.Millisecond).Add(-time.Hour)
	// Bodies repeat themselves so every codec has something to squeeze.
	body := func(i int) []byte {
		b := []byte(fmt.Sprintf("%06d:", i))
		for len(b) < 200+i%300 {
			b = append(b, "streamrun-interop "...)
		}
		return b
	}
	ids := sendAll(ctx, t, p, n, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{
			Payload:    body(i),
			Key:        "key-" + strconv.Itoa(i%17),
			Properties: map[string]string{"seq": strconv.Itoa(i), "codec": codecName},
			EventTime:  base.Add(time.Duration(i) * time.Millisecond),
		}
	})

	batched := 0
	for i, m := range receiveN(ctx, t, cons, n, true) {
		if got, want := string(m.Payload()), string(body(i)); got != want {
			t.Fatalf("message %d: payload %.40q..., want %.40q...", i, got, want)
		}
		if got, want := m.Key(), "key-"+strconv.Itoa(i%17); got != want {
			t.Fatalf("message %d: key %q, want %q", i, got, want)
		}
		if got := m.Properties(); got["seq"] != strconv.Itoa(i) || got["codec"] != codecName || len(got) != 2 {
			t.Fatalf("message %d: properties %v, want seq=%d codec=%s", i, got, i, codecName)
		}
		if got, want := m.EventTime(), base.Add(time.Duration(i)*time.Millisecond); !got.Equal(want) {
			t.Fatalf("message %d: event time %v, want %v", i, got, want)
		}
		if m.PublishTime().IsZero() {
			t.Fatalf("message %d: no publish time", i)
		}
		if m.ID().LedgerID() != ids[i].LedgerID() || m.ID().EntryID() != ids[i].EntryID() || m.ID().BatchIdx() != ids[i].BatchIdx() {
			t.Fatalf("message %d: consumed id %v, send receipt said %v", i, m.ID(), ids[i])
		}
		if m.ID().BatchSize() > 1 {
			batched++
		}
	}
	if batching && batched == 0 {
		t.Fatalf("batching was on but no message came in a batch")
	}
	if !batching && batched != 0 {
		t.Fatalf("batching was off but %d messages came in batches", batched)
	}
}
