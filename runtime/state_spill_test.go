package runtime_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A counting pipeline whose state cache holds about 1 key in 20 of its
// keys keeps every count right, the rest of the values spilled to a file
// in the host's state directory, at least once and exactly once, on both
// brokers; a host started after it reads the counts back from the
// changelog and counts on; each host's spill file is gone once it stops.
func TestKeyedStateSpillsPastItsCacheBound(t *testing.T) {
	type run struct{ name, url string }
	var runs []run
	runs = append(runs, run{"at_least_once", ""})
	for _, target := range txnTargets {
		runs = append(runs, run{"exactly_once/" + target, target})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			var url string
			if r.url == "" {
				url = brokertest.Target(t).URL
			} else {
				url = txnURL(t, r.url)
			}
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, url)
			const keys, rounds = 2000, 2
			key := func(i int) string { return fmt.Sprintf("key-%04d", i%keys) }
			payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
			p := countingPipeline(t, in, out, testConfig{})
			p.Handler.BatchSize = 100
			// About 100 keys' worth (a key and its count, and the host's
			// bookkeeping of each).
			p.State.CacheBytes = 100 * 180
			if r.url != "" {
				p = exactlyOnce(p)
			}
			dir := t.TempDir()
			opts := streamrun.Options{Pool: pool.Options{ServiceURL: url}, StateDir: dir, Logger: eoLogger(t)}
			spills := func() []string {
				names, err := filepath.Glob(filepath.Join(dir, "*.spill"))
				if err != nil {
					t.Fatal(err)
				}
				return names
			}

			for h := range 2 {
				publish(t, cl, in, keys*rounds, func(i int) string { return payload(h*keys*rounds + i) }, key)
				host := runHost(t, nil, opts, p)
				want := (h + 1) * rounds
				got := changelogCounts(t, cl, p, keys, func(string) int { return want })
				for k, c := range got {
					if c != want {
						t.Errorf("host %d: key %s: count %d, want %d", h+1, k, c, want)
					}
				}
				if len(spills()) != 1 {
					t.Errorf("host %d: spill files %v in the state directory, want one: the cache of %d bytes holds about 100 of %d keys",
						h+1, spills(), p.State.CacheBytes, keys)
				}
				waitFor(t, "every input acknowledged", func() bool { return host.stats("counts").Acked >= int64(keys*rounds) })
				if err := host.stop(); err != nil {
					t.Fatal(err)
				}
				if f := spills(); len(f) != 0 {
					t.Errorf("host %d: spill files %v left once the host stopped", h+1, f)
				}
			}
		})
	}
}

// BenchmarkKeyedStateCounterSpill is BenchmarkKeyedStateCounter's
// counter (10 000 keys, batches of 100, at least once, the handler in a
// plugin process) with every value in memory (the default cache of 512
// MiB) and with a cache of about 1 000 keys' worth, the rest of the
// values spilled to disk, in turn in one run.
//
//	go test ./runtime -run '^$' -bench KeyedStateCounterSpill -benchtime 200000x -count 3
func BenchmarkKeyedStateCounterSpill(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"memory", 0}, {"spill", 1000 * 180}} {
		b.Run("cache="+c.name, func(b *testing.B) {
			url := brokertest.TargetB(b)
			run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
			in, out := "persistent://public/default/bench-spill-in-"+run, "persistent://public/default/bench-spill-out-"+run
			pub := clientURL(b, url)
			ctx := testContext(b)
			publishCounterInput(ctx, b, pub, in, b.N)
			h := self(testConfig{Output: out, Count: true, MarkerDir: b.TempDir()})
			h.BatchSize = 100
			p := pipelines.Pipeline{
				Name:    "bench",
				Source:  pipelines.Source{Topics: []string{in}, Subscription: "bench", Type: pipelines.Exclusive, InitialPosition: pipelines.Earliest},
				Handler: h,
				Outputs: []string{out},
				State:   pipelines.State{Enabled: true, Changelog: in + "-state", CacheBytes: c.cache},
			}
			b.ResetTimer()
			start := time.Now()
			r := runHost(b, nil, streamrun.Options{Logger: testLogger(b, slog.LevelError), Pool: pool.Options{ServiceURL: url}, StateDir: b.TempDir()}, p)
			brokertest.Eventually(b, 10*time.Minute, "every message acknowledged", func() bool { return r.stats("bench").Acked >= int64(b.N) })
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
