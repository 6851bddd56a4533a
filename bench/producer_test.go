package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// The same settings for both clients: batches of up to 1000 messages,
// 128 KiB or 10 ms; 10 000 messages pending at most; no compression.
const (
	batchMessages = 1000
	batchBytes    = 128 << 10
	batchDelay    = 10 * time.Millisecond
	maxPending    = 10000
)

func TestMain(m *testing.M) {
	if os.Getenv("STREAMRUN_BENCH_CHILD") == "broker" {
		os.Exit(brokerChild())
	}
	code := m.Run()
	stopTarget()
	os.Exit(code)
}

// noAdmin leaves the benchmarks' broker without an admin API.
func noAdmin(o *broker.Options) { o.HTTP = "-" }

// brokerChild runs the embedded broker in this process for a parent
// benchmark (so the parent's allocation counts are the client's alone):
// it prints the service URL and runs until stdin closes.
func brokerChild() int {
	c, err := brokertest.StartMain(context.Background(), os.Stderr, slog.LevelWarn, noAdmin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(c.ServiceURL())
	signal.Ignore(syscall.SIGINT)
	io.Copy(io.Discard, os.Stdin)
	c.Close()
	return 0
}

var (
	targetOnce sync.Once
	targetURL  string
	targetKind string
	stopTarget = func() {}
)

// serviceURL is the broker both clients use, started once per run:
// STREAMRUN_BENCH_URL or STREAMRUN_PULSAR_URL when set; otherwise the
// embedded broker, in this process (default) or, with
// STREAMRUN_BENCH_BROKER=subprocess, in a child process.
func serviceURL(tb testing.TB) string {
	targetOnce.Do(func() {
		for _, env := range []string{"STREAMRUN_BENCH_URL", "STREAMRUN_PULSAR_URL"} {
			if u := os.Getenv(env); u != "" {
				targetURL, targetKind = u, "external broker at "+u
				return
			}
		}
		if os.Getenv("STREAMRUN_BENCH_BROKER") == "subprocess" {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STREAMRUN_BENCH_CHILD=broker")
			cmd.Stderr = os.Stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				tb.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				tb.Fatalf("broker child: %v", err)
			}
			targetURL, targetKind = strings.TrimSpace(line), "embedded broker in a child process"
			stopTarget = func() { stdin.Close(); cmd.Wait() }
			return
		}
		c, err := brokertest.StartMain(context.Background(), os.Stderr, slog.LevelWarn, noAdmin)
		if err != nil {
			tb.Fatal(err)
		}
		targetURL, targetKind = c.ServiceURL(), "embedded broker in this process"
		stopTarget = func() { c.Close() }
	})
	if targetURL == "" {
		tb.Fatal("no broker")
	}
	return targetURL
}

var topicSeq atomic.Int64

func freshTopic(client string, size int) string {
	return fmt.Sprintf("persistent://public/default/bench-%s-%d-%d-%d", client, size, time.Now().UnixNano(), topicSeq.Add(1))
}

// result is one run: n messages published asynchronously as fast as the
// pending limit lets, each receipt's latency, and the process's
// allocations meanwhile.
type result struct {
	client  string
	size    int
	n       int
	elapsed time.Duration
	mallocs uint64
	bytes   uint64
	lat     []time.Duration // sorted
}

func (r result) rate() float64         { return float64(r.n) / r.elapsed.Seconds() }
func (r result) allocsPerMsg() float64 { return float64(r.mallocs) / float64(r.n) }
func (r result) bytesPerMsg() float64  { return float64(r.bytes) / float64(r.n) }
func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))]
}

// sender is a client under test: it opens a producer, then sends
// messages asynchronously, calling done for each receipt in order.
type sender interface {
	open(ctx context.Context, url, topic string) error
	send(ctx context.Context, payload []byte)
	flush(ctx context.Context) error
	close(ctx context.Context)
}

// measure sends n messages of size bytes through s and times them.
func measure(ctx context.Context, tb testing.TB, name string, s sender, size, n int, setDone func(func(error))) result {
	url := serviceURL(tb)
	if err := s.open(ctx, url, freshTopic(name, size)); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	defer s.close(ctx)
	payload := letters(size)

	// Warm up: a round of messages, flushed.
	setDone(func(err error) {
		if err != nil {
			panic(err)
		}
	})
	for i := 0; i < 2*batchMessages; i++ {
		s.send(ctx, payload)
	}
	if err := s.flush(ctx); err != nil {
		tb.Fatalf("%s: flush: %v", name, err)
	}

	base := time.Now()
	sent := make([]int64, n)
	lat := make([]time.Duration, n)
	var done atomic.Int64
	finished := make(chan struct{})
	var failed atomic.Pointer[error]
	setDone(func(err error) {
		i := done.Add(1) - 1
		lat[i] = time.Duration(int64(time.Since(base)) - sent[i])
		if err != nil {
			e := err // only a failure takes an allocation
			failed.CompareAndSwap(nil, &e)
		}
		if i == int64(n)-1 {
			close(finished)
		}
	})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := 0; i < n; i++ {
		sent[i] = int64(time.Since(base))
		s.send(ctx, payload)
	}
	select {
	case <-finished:
	case <-ctx.Done():
		tb.Fatalf("%s: %d of %d receipts: %v", name, done.Load(), n, ctx.Err())
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if p := failed.Load(); p != nil {
		tb.Fatalf("%s: %v", name, *p)
	}
	slices.Sort(lat)
	return result{client: name, size: size, n: n, elapsed: elapsed,
		mallocs: after.Mallocs - before.Mallocs, bytes: after.TotalAlloc - before.TotalAlloc, lat: lat}
}

// streamrun's pool.

type streamrunSender struct {
	c    *pool.Client
	p    *pool.Producer
	done func(error)
	cb   func(pulsarwire.MessageID, error)
}

func (s *streamrunSender) open(ctx context.Context, url, topic string) error {
	c, err := pool.New(ctx, pool.Options{
		ServiceURL: url,
		Producer: pool.ProducerOptions{
			MaxPendingMessages: maxPending,
			Batching:           pool.BatchingOptions{MaxMessages: batchMessages, MaxBytes: batchBytes, MaxDelay: batchDelay},
		},
	})
	if err != nil {
		return err
	}
	s.c = c
	s.p, err = c.Producer(ctx, topic)
	s.cb = func(_ pulsarwire.MessageID, err error) { s.done(err) }
	return err
}

func (s *streamrunSender) send(ctx context.Context, payload []byte) {
	s.p.SendAsync(ctx, pool.Message{Payload: payload}, s.cb)
}
func (s *streamrunSender) flush(ctx context.Context) error { return s.p.Flush(ctx) }
func (s *streamrunSender) close(ctx context.Context)       { s.c.Close(ctx) }

// The official Go client.

type officialSender struct {
	c    pulsar.Client
	p    pulsar.Producer
	done func(error)
	cb   func(pulsar.MessageID, *pulsar.ProducerMessage, error)
}

func (s *officialSender) open(ctx context.Context, url, topic string) error {
	c, err := officialClient(url)
	if err != nil {
		return err
	}
	s.c = c
	s.p, err = c.CreateProducer(pulsar.ProducerOptions{
		Topic:                   topic,
		MaxPendingMessages:      maxPending,
		BatchingMaxMessages:     batchMessages,
		BatchingMaxSize:         batchBytes,
		BatchingMaxPublishDelay: batchDelay,
	})
	s.cb = func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { s.done(err) }
	return err
}

func (s *officialSender) send(ctx context.Context, payload []byte) {
	s.p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, s.cb)
}
func (s *officialSender) flush(ctx context.Context) error { return s.p.FlushWithCtx(ctx) }
func (s *officialSender) close(context.Context) {
	s.p.Close()
	s.c.Close()
}

func newSender(name string) (sender, func(func(error))) {
	switch name {
	case "streamrun":
		s := &streamrunSender{}
		return s, func(f func(error)) { s.done = f }
	case "official":
		s := &officialSender{}
		return s, func(f func(error)) { s.done = f }
	}
	panic(name)
}

var sizes = []struct {
	name string
	n    int
}{{"100B", 100}, {"1KiB", 1024}}

// BenchmarkProducer publishes b.N messages per client and size: msg/s,
// allocations (of the whole process: with the in-process broker, its
// share too; use STREAMRUN_BENCH_BROKER=subprocess for the client's
// alone) and receipt latency percentiles.
func BenchmarkProducer(b *testing.B) {
	for _, sz := range sizes {
		for _, client := range []string{"streamrun", "official"} {
			b.Run(client+"/"+sz.name, func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				s, setDone := newSender(client)
				b.ReportAllocs()
				b.SetBytes(int64(sz.n))
				b.ResetTimer()
				r := measure(ctx, b, client, s, sz.n, max(b.N, 1), setDone)
				b.StopTimer()
				b.ReportMetric(r.rate(), "msg/s")
				b.ReportMetric(float64(r.pct(0.5).Microseconds()), "p50-µs")
				b.ReportMetric(float64(r.pct(0.99).Microseconds()), "p99-µs")
			})
		}
	}
}

// TestCompareWithOfficialClient runs both clients on the same broker, in
// turns, and prints msg/s, allocations per message and p50/p99 receipt
// latency with the ratios streamrun/official. It runs only when
// STREAMRUN_BENCH=1; STREAMRUN_BENCH_MESSAGES sets the messages per run
// (default 300000), STREAMRUN_BENCH_ROUNDS the runs per client (default
// 5; the run of median rate is reported, with its other figures).
func TestCompareWithOfficialClient(t *testing.T) {
	if os.Getenv("STREAMRUN_BENCH") != "1" {
		t.Skip("set STREAMRUN_BENCH=1 to compare with the official client")
	}
	n := envInt("STREAMRUN_BENCH_MESSAGES", 300000)
	rounds := envInt("STREAMRUN_BENCH_ROUNDS", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	serviceURL(t)
	var out strings.Builder
	fmt.Fprintf(&out, "producer throughput, %d messages per run, median of %d runs, %s (GOMAXPROCS=%d)\n", n, rounds, targetKind, runtime.GOMAXPROCS(0))
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "size\tclient\tmsg/s\tallocs/msg\tB/msg\tp50\tp99\t")
	for _, sz := range sizes {
		runs := map[string][]result{}
		for round := 0; round < rounds; round++ {
			for _, client := range []string{"official", "streamrun"} {
				s, setDone := newSender(client)
				runs[client] = append(runs[client], measure(ctx, t, client, s, sz.n, n, setDone))
			}
		}
		// The median run by rate, with its figures.
		best := map[string]result{}
		for client, rs := range runs {
			slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.rate(), b.rate()) })
			best[client] = rs[len(rs)/2]
		}
		for _, client := range []string{"streamrun", "official"} {
			r := best[client]
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.2f\t%.0f\t%s\t%s\t\n", sz.name, client, r.rate(), r.allocsPerMsg(), r.bytesPerMsg(),
				r.pct(0.5).Round(time.Microsecond), r.pct(0.99).Round(time.Microsecond))
		}
		s, o := best["streamrun"], best["official"]
		fmt.Fprintf(w, "%s\tratio\t%.2fx\t%.2fx\t%.2fx\t%.2fx\t%.2fx\t\n", sz.name, s.rate()/o.rate(),
			s.allocsPerMsg()/o.allocsPerMsg(), s.bytesPerMsg()/o.bytesPerMsg(),
			float64(s.pct(0.5))/float64(o.pct(0.5)), float64(s.pct(0.99))/float64(o.pct(0.99)))
	}
	w.Flush()
	fmt.Fprint(&out, "ratio = streamrun / official: above 1 is better for msg/s, below 1 for allocations and latency\n")
	t.Log("\n" + out.String())
	fmt.Print(out.String())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
