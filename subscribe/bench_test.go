package subscribe_test

import (
	"context"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// BenchmarkReceiveAndAck receives and acknowledges b.N batched messages
// of 100 bytes from a backlog on the embedded broker (in this process:
// the allocations are the broker's too). The comparison with the
// official client is in bench/consumer_test.go.
func BenchmarkReceiveAndAck(b *testing.B) {
	tg := brokertest.Start(b).ServiceURL()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := pool.New(ctx, pool.Options{ServiceURL: tg})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	topic := "persistent://public/default/bench-receive"
	p, err := c.Producer(ctx, topic)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	for i := 0; i < b.N; i++ {
		p.SendAsync(ctx, pool.Message{Payload: payload}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cons, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: "bench", InitialPosition: subscribe.Earliest})
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close(ctx)
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := cons.Ack(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
}
