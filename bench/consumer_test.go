package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
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

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// The consumers (package subscribe) against the official client:
//
//	STREAMRUN_BENCH=1 STREAMRUN_BENCH_BROKER=subprocess go test -run 'CompareConsumer|PatternRefresh' -v
//	STREAMRUN_BENCH=1 STREAMRUN_PULSAR_URL=pulsar://127.0.0.1:6650 go test -run 'CompareConsumer|PatternRefresh' -v
//	go test -run '^$' -bench Consumer -benchtime 500000x
//
// The consumer comparison: a backlog of batched messages is published
// first (by streamrun's producer, the same way for both clients), then
// each client subscribes at the earliest message with a receiver queue of
// receiverQueue and receives and acknowledges every message, one by one.

const receiverQueue = 1000

// backlog publishes n messages of size bytes to a fresh topic and
// returns its name.
func backlog(ctx context.Context, tb testing.TB, client string, size, n int) string {
	topic := freshTopic("consume-"+client, size)
	publishBacklog(ctx, tb, pool.Options{ServiceURL: serviceURL(tb)}, topic, size, n)
	return topic
}

// publishBacklog publishes n messages of size bytes to topic through a
// client of opts of its own, and fails tb unless every one is stored.
func publishBacklog(ctx context.Context, tb testing.TB, opts pool.Options, topic string, size, n int) {
	c, err := pool.New(ctx, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	payload := letters(size)
	var failed atomic.Pointer[error]
	for i := 0; i < n; i++ {
		p.SendAsync(ctx, pool.Message{Payload: payload}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	if e := failed.Load(); e != nil {
		tb.Fatal(*e)
	}
}

// receiver is a consumer under test.
type receiver interface {
	open(ctx context.Context, url, topic string) error
	// next receives one message and acknowledges it; it returns the
	// payload's length.
	next(ctx context.Context) (int, error)
	close(ctx context.Context)
}

type consumeResult struct {
	client   string
	size     int
	n        int
	elapsed  time.Duration
	mallocs  uint64
	bytes    uint64
	peakHeap uint64 // peak of live heap objects while consuming, above the start
	rss      uint64 // VmRSS at the end, bytes
}

func (r consumeResult) rate() float64         { return float64(r.n) / r.elapsed.Seconds() }
func (r consumeResult) allocsPerMsg() float64 { return float64(r.mallocs) / float64(r.n) }
func (r consumeResult) bytesPerMsg() float64  { return float64(r.bytes) / float64(r.n) }

// heapObjects is the live-and-unswept heap, read without stopping the world.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// vmRSS is the process's resident set, from /proc/self/status (0 where
// there is none).
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// measureConsume receives n messages of topic through r.
func measureConsume(ctx context.Context, tb testing.TB, name string, r receiver, topic string, size, n int) consumeResult {
	runtime.GC()
	base := heapObjects()
	if err := r.open(ctx, serviceURL(tb), topic); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	defer r.close(ctx)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapObjects(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for i := 0; i < n; i++ {
		got, err := r.next(ctx)
		if err != nil {
			tb.Fatalf("%s: message %d of %d: %v", name, i, n, err)
		}
		if got != size {
			tb.Fatalf("%s: message %d of %d bytes, want %d", name, i, got, size)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	close(stop)
	wg.Wait()
	res := consumeResult{client: name, size: size, n: n, elapsed: elapsed,
		mallocs: after.Mallocs - before.Mallocs, bytes: after.TotalAlloc - before.TotalAlloc, rss: vmRSS()}
	if p := peak.Load(); p > base {
		res.peakHeap = p - base
	}
	return res
}

// streamrun's subscribe.

type streamrunReceiver struct {
	c    *pool.Client
	cons *subscribe.Consumer
}

func (r *streamrunReceiver) open(ctx context.Context, url, topic string) error {
	c, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		return err
	}
	r.c = c
	r.cons, err = subscribe.New(ctx, c, subscribe.Options{
		Topics: []string{topic}, Subscription: "bench", Type: subscribe.Shared,
		InitialPosition: subscribe.Earliest, ReceiverQueue: receiverQueue,
	})
	return err
}

func (r *streamrunReceiver) next(ctx context.Context) (int, error) {
	m, err := r.cons.Receive(ctx)
	if err != nil {
		return 0, err
	}
	return len(m.Payload), r.cons.Ack(ctx, m)
}

func (r *streamrunReceiver) close(ctx context.Context) {
	if r.cons != nil {
		r.cons.Close(ctx)
	}
	if r.c != nil {
		r.c.Close(ctx)
	}
}

// The official Go client.

type officialReceiver struct {
	c    pulsar.Client
	cons pulsar.Consumer
}

func (r *officialReceiver) open(_ context.Context, url, topic string) error {
	c, err := officialClient(url)
	if err != nil {
		return err
	}
	r.c = c
	r.cons, err = c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: "bench", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize:           receiverQueue,
	})
	return err
}

func (r *officialReceiver) next(ctx context.Context) (int, error) {
	m, err := r.cons.Receive(ctx)
	if err != nil {
		return 0, err
	}
	return len(m.Payload()), r.cons.Ack(m)
}

func (r *officialReceiver) close(context.Context) {
	if r.cons != nil {
		r.cons.Close()
	}
	if r.c != nil {
		r.c.Close()
	}
}

func newReceiver(name string) receiver {
	switch name {
	case "streamrun":
		return &streamrunReceiver{}
	case "official":
		return &officialReceiver{}
	}
	panic(name)
}

// BenchmarkConsumer receives and acknowledges b.N messages of a backlog
// per client and size (allocations: of the whole process, the broker's
// too unless STREAMRUN_BENCH_BROKER=subprocess).
func BenchmarkConsumer(b *testing.B) {
	for _, sz := range sizes {
		for _, client := range []string{"streamrun", "official"} {
			b.Run(client+"/"+sz.name, func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				n := max(b.N, 1)
				topic := backlog(ctx, b, client, sz.n, n)
				b.ReportAllocs()
				b.SetBytes(int64(sz.n))
				b.ResetTimer()
				r := measureConsume(ctx, b, client, newReceiver(client), topic, sz.n, n)
				b.StopTimer()
				b.ReportMetric(r.rate(), "msg/s")
				b.ReportMetric(float64(r.peakHeap)/(1<<20), "peak-heap-MiB")
			})
		}
	}
}

// TestCompareConsumerWithOfficialClient runs both consumers on the same
// broker, in turns, each on a backlog of its own published the same way,
// and prints msg/s, allocations per message and memory with the ratios
// streamrun/official. Only with STREAMRUN_BENCH=1;
// STREAMRUN_BENCH_MESSAGES sets the messages per run (default 500000),
// STREAMRUN_BENCH_ROUNDS the runs per client (default 5; the median run
// by rate is reported, with its other figures).
func TestCompareConsumerWithOfficialClient(t *testing.T) {
	if os.Getenv("STREAMRUN_BENCH") != "1" {
		t.Skip("set STREAMRUN_BENCH=1 to compare with the official client")
	}
	n := envInt("STREAMRUN_BENCH_MESSAGES", 500000)
	rounds := envInt("STREAMRUN_BENCH_ROUNDS", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	serviceURL(t)
	var out strings.Builder
	fmt.Fprintf(&out, "consumer throughput (receive + ack each), receiver queue %d, %d batched messages per run, median of %d runs, %s (GOMAXPROCS=%d)\n",
		receiverQueue, n, rounds, targetKind, runtime.GOMAXPROCS(0))
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "size\tclient\tmsg/s\tallocs/msg\tB/msg\tpeak heap MiB\tVmRSS MiB\t")
	for _, sz := range sizes {
		runs := map[string][]consumeResult{}
		for round := 0; round < rounds; round++ {
			for _, client := range []string{"official", "streamrun"} {
				topic := backlog(ctx, t, client, sz.n, n)
				runs[client] = append(runs[client], measureConsume(ctx, t, client, newReceiver(client), topic, sz.n, n))
			}
		}
		best := map[string]consumeResult{}
		for client, rs := range runs {
			slices.SortFunc(rs, func(a, b consumeResult) int { return cmp.Compare(a.rate(), b.rate()) })
			best[client] = rs[len(rs)/2]
		}
		for _, client := range []string{"streamrun", "official"} {
			r := best[client]
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.3f\t%.0f\t%.1f\t%.0f\t\n", sz.name, client, r.rate(), r.allocsPerMsg(), r.bytesPerMsg(),
				float64(r.peakHeap)/(1<<20), float64(r.rss)/(1<<20))
		}
		s, o := best["streamrun"], best["official"]
		fmt.Fprintf(w, "%s\tratio\t%.2fx\t%.3fx\t%.2fx\t%.2fx\t\t\n", sz.name, s.rate()/o.rate(),
			s.allocsPerMsg()/o.allocsPerMsg(), s.bytesPerMsg()/o.bytesPerMsg(), float64(s.peakHeap)/float64(o.peakHeap))
	}
	w.Flush()
	fmt.Fprint(&out, "ratio = streamrun / official: above 1 is better for msg/s, below 1 for allocations and memory\n"+
		"VmRSS is the whole process at the end of the run (it only grows; runs alternate official, streamrun)\n")
	t.Log("\n" + out.String())
	fmt.Print(out.String())
}

// TestPatternRefreshOverManyTopics subscribes a pattern to
// STREAMRUN_BENCH_TOPICS topics (default 1000) and measures one refresh
// (GET_TOPICS_OF_NAMESPACE, matching, comparing with the topics consumed)
// when nothing changed and when one topic joined: wall and CPU time
// (getrusage of the process: the broker's too unless it runs apart) and
// allocations. Only with STREAMRUN_BENCH=1.
func TestPatternRefreshOverManyTopics(t *testing.T) {
	if os.Getenv("STREAMRUN_BENCH") != "1" {
		t.Skip("set STREAMRUN_BENCH=1 to measure pattern refreshes")
	}
	n := envInt("STREAMRUN_BENCH_TOPICS", 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	url := serviceURL(t)
	// The topics are made by a client of their own, closed before the
	// consumer's memory is measured.
	maker, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("persistent://public/default/refresh-%d", time.Now().UnixNano())
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := maker.Publish(ctx, fmt.Sprintf("%s-%04d", prefix, i), pool.Message{Payload: []byte("x")}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := maker.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	runtime.GC()
	runtime.GC()
	heap0 := heapObjects()
	subStart := time.Now()
	cons, err := subscribe.New(ctx, c, subscribe.Options{
		Pattern: prefix + "-.*", Subscription: "refresh", PatternRefresh: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	subTook := time.Since(subStart)
	if got := len(cons.Topics()); got != n {
		t.Fatalf("consuming %d topics, want %d", got, n)
	}
	runtime.GC()
	runtime.GC()
	heap1 := heapObjects()

	type cost struct {
		wall, cpu      time.Duration
		mallocs, bytes uint64
	}
	refresh := func() cost {
		var ru0, ru1 syscall.Rusage
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		if err := cons.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		wall := time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		runtime.ReadMemStats(&m1)
		cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
		return cost{wall, cpu, m1.Mallocs - m0.Mallocs, m1.TotalAlloc - m0.TotalAlloc}
	}
	var steady []cost
	for i := 0; i < 9; i++ {
		steady = append(steady, refresh())
	}
	slices.SortFunc(steady, func(a, b cost) int { return cmp.Compare(a.wall, b.wall) })
	med := steady[len(steady)/2]

	if _, err := c.Publish(ctx, prefix+"-joined", pool.Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	joined := refresh()
	if got := len(cons.Topics()); got != n+1 {
		t.Fatalf("consuming %d topics after the refresh, want %d", got, n+1)
	}

	// The official client's pattern consumer over the same topics, for its
	// memory (its refresh cannot be run on demand).
	runtime.GC()
	runtime.GC()
	oheap0 := heapObjects()
	oc, err := officialClient(url)
	if err != nil {
		t.Fatal(err)
	}
	ostart := time.Now()
	ocons, err := oc.Subscribe(pulsar.ConsumerOptions{
		TopicsPattern: prefix + "-.*", SubscriptionName: "refresh-official", AutoDiscoveryPeriod: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	otook := time.Since(ostart)
	runtime.GC()
	runtime.GC()
	oheap1 := heapObjects()
	ocons.Close()
	oc.Close()

	var out strings.Builder
	fmt.Fprintf(&out, "pattern subscription over %d topics, %s (GOMAXPROCS=%d)\n", n, targetKind, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&out, "  subscribing to all: %v; consumer state: %.1f MiB of heap (%.1f KiB per topic)\n",
		subTook.Round(time.Millisecond), float64(heap1-min(heap0, heap1))/(1<<20), float64(heap1-min(heap0, heap1))/1024/float64(n))
	fmt.Fprintf(&out, "  official client, same pattern: subscribing %v; consumer state %.1f MiB of heap (%.1f KiB per topic)\n",
		otook.Round(time.Millisecond), float64(oheap1-min(oheap0, oheap1))/(1<<20), float64(oheap1-min(oheap0, oheap1))/1024/float64(n+1))
	fmt.Fprintf(&out, "  one refresh, nothing changed (median of 9): wall %v, CPU %v, %d allocations, %.1f KiB allocated\n",
		med.wall.Round(time.Microsecond), med.cpu.Round(time.Microsecond), med.mallocs, float64(med.bytes)/1024)
	fmt.Fprintf(&out, "  one refresh, one topic joined (its subscribe runs in the background): wall %v, CPU %v, %d allocations, %.1f KiB allocated\n",
		joined.wall.Round(time.Microsecond), joined.cpu.Round(time.Microsecond), joined.mallocs, float64(joined.bytes)/1024)
	t.Log("\n" + out.String())
	fmt.Print(out.String())
}
