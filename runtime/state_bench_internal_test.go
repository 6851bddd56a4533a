package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// BenchmarkKeyedStateRestore reads back a changelog of STREAMRUN_BENCH_KEYS
// keys (default 100 000; docs/pipelines.md quotes 1 000 000), one change
// each with a 100-byte value, published in batches, from the embedded
// broker (or Apache Pulsar with STREAMRUN_PULSAR_URL): what a host does at
// start. It reports keys read a second and the host's heap a key.
func BenchmarkKeyedStateRestore(b *testing.B) {
	n := 100_000
	if s := os.Getenv("STREAMRUN_BENCH_KEYS"); s != "" {
		fmt.Sscan(s, &n)
	}
	url := brokertest.TargetB(b)
	ctx := context.Background()
	cl, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close(ctx)
	topic := fmt.Sprintf("persistent://public/default/bench-restore-%d", time.Now().UnixNano())
	value := make([]byte, 100)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		cl.PublishAsync(ctx, topic, pool.Message{Key: fmt.Sprintf("key-%08d", i), Payload: value}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.ResetTimer()
	for i := range b.N {
		s := newKeyedState(topic, 0, false, log)
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		t0 := time.Now()
		if err := s.restore(ctx, cl, fmt.Sprintf("bench-%d", i)); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		if s.Len() != n {
			b.Fatalf("%d keys read back, want %d", s.Len(), n)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "keys/s")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heapB/key")
		goruntime.KeepAlive(s)
	}
}
