package pool

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
)

// BenchmarkSendAsync publishes b.N messages of 100 bytes asynchronously
// with the default settings and waits for every receipt. Allocations
// include the embedded broker's (it runs in the test process); see
// bench/ for the comparison with the official client.
func BenchmarkSendAsync(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(map[int]string{100: "100B", 1024: "1KiB"}[size], func(b *testing.B) {
			tg := brokertest.TargetB(b)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c, err := New(ctx, Options{ServiceURL: tg})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			p, err := c.Producer(ctx, fmt.Sprintf("persistent://public/default/bench-%d-%d", size, time.Now().UnixNano()))
			if err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, size)
			var done atomic.Int64
			finished := make(chan struct{})
			n := int64(b.N)
			cb := func(_ pulsarwire.MessageID, err error) {
				if err != nil {
					b.Error(err)
				}
				if done.Add(1) == n {
					close(finished)
				}
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.SendAsync(ctx, Message{Payload: payload}, cb)
			}
			<-finished
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkSendAsyncByKey is BenchmarkSendAsync's 100-byte run with
// BatchingOptions.ByKey, over 50 interleaved keys: a batch per key.
func BenchmarkSendAsyncByKey(b *testing.B) {
	tg := brokertest.TargetB(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := New(ctx, Options{ServiceURL: tg, Producer: ProducerOptions{Batching: BatchingOptions{ByKey: true}}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := c.Producer(ctx, fmt.Sprintf("persistent://public/default/bench-bykey-%d", time.Now().UnixNano()))
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 100)
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	n := int64(b.N)
	cb := func(_ pulsarwire.MessageID, err error) {
		if err != nil {
			b.Error(err)
		}
		if done.Add(1) == n {
			close(finished)
		}
	}
	b.SetBytes(100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.SendAsync(ctx, Message{Payload: payload, Key: keys[i%len(keys)]}, cb)
	}
	<-finished
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}
