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
	// In memory, and with the cache bounded to a tenth of the keys (the
	// rest spilled to disk), in turn.
	tenth := int64(n/10) * cachedSize(fmt.Sprintf("key-%08d", 0), value)
	for _, c := range []struct {
		name  string
		cache int64
	}{{"memory", 0}, {"spill", tenth}} {
		b.Run(c.name, func(b *testing.B) {
			for i := range b.N {
				benchRestore(b, ctx, cl, topic, n, c.cache, fmt.Sprintf("bench-%s-%d", c.name, i), log)
			}
		})
	}
}

func benchRestore(b *testing.B, ctx context.Context, cl *pool.Client, topic string, n int, cache int64, sub string, log *slog.Logger) {
	s := newKeyedState(topic, 0, false, cache, b.TempDir(), log)
	defer s.close()
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	t0 := time.Now()
	if err := s.restore(ctx, cl, sub); err != nil {
		b.Fatal(err)
	}
	took := time.Since(t0)
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	if s.Len() != n {
		b.Fatalf("%d keys read back, want %d", s.Len(), n)
	}
	b.ReportMetric(float64(n)/took.Seconds(), "keys/s")
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heapB/key")
	b.ReportMetric(float64(s.vals.used)/(1<<20), "cacheMiB")
	if s.vals.path != "" {
		if fi, err := os.Stat(s.vals.path); err == nil {
			b.ReportMetric(float64(fi.Size())/float64(n), "diskB/key")
		}
	}
	goruntime.KeepAlive(s)
}
