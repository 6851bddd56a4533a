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

// BenchmarkKeyedStateHeap sets STREAMRUN_BENCH_KEYS keys (default
// 1 000 000; 12-byte keys, 100-byte values) into keyed state directly, no
// broker, and reports the heap they take: with every value in memory,
// and with the cache bounded to 100 000 keys' worth (the rest spilled).
// "index" is, for comparison, the heap of the index alone that a spill
// store of our own (an append-only file, each key's offset in a map)
// would keep in memory for every key.
//
//	STREAMRUN_BENCH_KEYS=10000000 go test ./runtime -run '^$' -bench KeyedStateHeap -benchtime 1x
func BenchmarkKeyedStateHeap(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("STREAMRUN_BENCH_KEYS"); s != "" {
		fmt.Sscan(s, &n)
	}
	value := make([]byte, 100)
	key := func(i int) string { return fmt.Sprintf("key-%08d", i) }
	for _, c := range []struct {
		name  string
		cache int64
	}{{"memory", 0}, {"spill", 100_000 * cachedSize(key(0), value)}, {"index", -1}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				var before, after goruntime.MemStats
				goruntime.GC()
				goruntime.ReadMemStats(&before)
				t0 := time.Now()
				var keep any
				var used int64
				if c.cache < 0 {
					idx := map[string]int64{}
					for i := range n {
						idx[key(i)] = int64(i) * 120
					}
					keep = idx
				} else {
					s := newKeyedState("t", 0, false, c.cache, b.TempDir(), slog.New(slog.DiscardHandler))
					defer s.close()
					now := time.Now()
					s.mu.Lock()
					for i := range n {
						s.set(key(i), value, false, now)
					}
					s.unlock()
					used = s.vals.used
					keep = s
				}
				took := time.Since(t0)
				goruntime.GC()
				goruntime.ReadMemStats(&after)
				heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
				b.ReportMetric(heap/float64(n), "heapB/key")
				b.ReportMetric(heap/(1<<20), "heapMiB")
				b.ReportMetric(float64(used)/(1<<20), "cacheMiB")
				b.ReportMetric(float64(n)/took.Seconds(), "keys/s")
				goruntime.KeepAlive(keep)
			}
		})
	}
}
