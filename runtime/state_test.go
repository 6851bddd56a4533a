package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// These run against either broker: the embedded one, or Apache Pulsar
// when STREAMRUN_PULSAR_URL is set (brokertest.Target).

// countingPipeline is a pipeline counting the messages of each key of
// in in its keyed state, through the test handler as a plugin.
func countingPipeline(t *testing.T, in, out string, cfg testConfig) pipelines.Pipeline {
	return countingPipelineOf(t, in, out, cfg, self)
}

// countingPipelineOf is countingPipeline with the handler handler makes.
func countingPipelineOf(t *testing.T, in, out string, cfg testConfig, handler func(testConfig) pipelines.Handler) pipelines.Pipeline {
	if cfg.MarkerDir == "" {
		cfg.MarkerDir = t.TempDir()
	}
	return counting(in, out, cfg, handler)
}

// counting is countingPipelineOf's pipeline, for a child host too.
func counting(in, out string, cfg testConfig, handler func(testConfig) pipelines.Handler) pipelines.Pipeline {
	cfg.Output, cfg.Count = out, true
	h := handler(cfg)
	h.BatchSize, h.Instances = 20, 2
	return pipelines.Pipeline{
		Name:        "counts",
		Source:      pipelines.Source{Topics: []string{in}, Subscription: "counts", Type: pipelines.Exclusive, InitialPosition: pipelines.Earliest},
		Handler:     h,
		ErrorPolicy: pipelines.ErrorPolicy{Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}},
		// A changelog of the test's own: the default is named after the
		// subscription, which the tests share.
		State: pipelines.State{Enabled: true, Changelog: in + "-state"},
	}
}

// changelogCounts reads the changelog of p from its start, as a new
// subscription, and returns each key's last count once n keys have a
// count that reaches want(key).
func changelogCounts(t *testing.T, cl *pool.Client, p pipelines.Pipeline, keys int, want func(key string) int) map[string]int {
	t.Helper()
	ctx := testContext(t)
	cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{p.ChangelogTopic()},
		Subscription: "check-" + strconv.FormatInt(time.Now().UnixNano(), 36), InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	got := map[string]int{}
	done := func() bool {
		if len(got) < keys {
			return false
		}
		for k, n := range got {
			if n < want(k) {
				return false
			}
		}
		return true
	}
	for !done() {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("reading the changelog: %v (so far %v)", err, got)
		}
		_ = cons.Ack(ctx, m)
		if m.Key == "" {
			continue // a restore's fence
		}
		n, err := strconv.Atoi(string(m.Payload))
		if err != nil {
			t.Fatalf("changelog value %q of key %q: %v", m.Payload, m.Key, err)
		}
		got[m.Key] = n
	}
	return got
}

// A count per key kept in keyed state comes out exact through handler
// crashes (a panic on every 7th message, once each), and through
// messages retried after their change (the change is discarded, and so
// are the changes of the messages of its key after it in the batch):
// every key's final count, in the changelog and in the last output, is
// the number of its messages.
func TestKeyedStateCountsExactlyThroughCrashesAndRetries(t *testing.T) {
	testCountsThroughCrashesAndRetries(t, self)
}

// The same with the Python SDK's handler, whose interpreter dies (as a Go
// handler's panic) on every 7th message, once each.
func TestPythonKeyedStateCountsExactlyThroughCrashesAndRetries(t *testing.T) {
	pythonSDK(t)
	testCountsThroughCrashesAndRetries(t, func(cfg testConfig) pipelines.Handler { return pythonHandler(t, cfg) })
}

func testCountsThroughCrashesAndRetries(t *testing.T, handler func(testConfig) pipelines.Handler) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, cl, out)

	const n, keys = 300, 6
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	publish(t, cl, in, n, func(i int) string {
		if i%11 == 5 {
			return fmt.Sprintf("undo:%d", i)
		}
		return fmt.Sprintf("m-%d", i)
	}, key)
	p := countingPipelineOf(t, in, out, testConfig{PanicEvery: 7}, handler)
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)

	want := func(string) int { return n / keys }
	got := changelogCounts(t, cl, p, keys, want)
	for k, c := range got {
		if c != want(k) {
			t.Errorf("key %s: count %d in the changelog, want %d", k, c, want(k))
		}
	}
	// Each count was output once its message was acknowledged: the
	// highest of every key is its number of messages.
	waitFor(t, "outputs", func() bool { return outs.len() >= n })
	last := map[string]int{}
	for _, pl := range outs.payloads() {
		k, v, _ := strings.Cut(pl, "=")
		c, _ := strconv.Atoi(v)
		last[k] = max(last[k], c)
	}
	for i := range keys {
		if k := key(i); last[k] != want(k) {
			t.Errorf("key %s: highest count output %d, want %d", k, last[k], want(k))
		}
	}
	if s := r.stats("counts"); s.Restarts == 0 || s.Retried == 0 {
		t.Errorf("the handler crashed %d times and retried %d messages; the test wants both", s.Restarts, s.Retried)
	}
}

// A host that stops and a new one that starts on the same pipeline go
// on from the counts the first left: the new one reads them back from
// the changelog.
func TestKeyedStateIsReadBackAtStart(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	const n, keys = 100, 5
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	p := countingPipeline(t, in, out, testConfig{})

	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, key)
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)
	changelogCounts(t, cl, p, keys, func(string) int { return n / keys })
	waitFor(t, "every input acknowledged", func() bool { return r.stats("counts").Acked >= n })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", n+i) }, key)
	runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)
	got := changelogCounts(t, cl, p, keys, func(string) int { return 2 * n / keys })
	for k, c := range got {
		if c != 2*n/keys {
			t.Errorf("key %s: count %d, want %d", k, c, 2*n/keys)
		}
	}
}

// stateHost is a child host (roleEnv "statehost") running the counting
// pipeline of STREAMRUN_TEST_IN, _OUT and _MARKERS at STREAMRUN_TEST_URL
// until it is killed. It prints "running" once its pipeline runs.
func stateHost() {
	ctx := context.Background()
	h, err := streamrun.New(ctx, streamrun.Options{
		Pool:   pool.Options{ServiceURL: os.Getenv("STREAMRUN_TEST_URL")},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	p := counting(os.Getenv("STREAMRUN_TEST_IN"), os.Getenv("STREAMRUN_TEST_OUT"),
		testConfig{MarkerDir: os.Getenv("STREAMRUN_TEST_MARKERS"), BatchDelay: 20 * time.Millisecond}, self)
	if os.Getenv("STREAMRUN_TEST_EXACTLY") != "" {
		p = exactlyOnce(p)
	}
	go func() {
		err := h.Run(ctx, p)
		fmt.Println("error: Run returned:", err)
		os.Exit(1)
	}()
	for {
		if hs := h.Health(); len(hs) == 1 && hs[0].State == streamrun.StateHealthy {
			fmt.Println("running")
			select {}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A host killed with SIGKILL mid-stream, while a second host waits on
// the Exclusive subscription: the second takes over, reads the state
// back from the changelog and finishes. No acknowledged change is lost:
// every key's final count is at least its number of messages. At least
// once: a change written to the changelog whose message the killed host
// had not acknowledged yet (or whose acknowledgement it had not sent)
// counts twice, so a count may be over by that many.
func TestKeyedStateSurvivesAKilledHostAndFailsOverToTheNext(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	const n, keys = 3000, 6
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, key)
	markers := t.TempDir()
	p := counting(in, out, testConfig{MarkerDir: markers}, self)

	cmd := startChildHost(t, "statehost", "first host", "STREAMRUN_TEST_URL="+peer.URL,
		"STREAMRUN_TEST_IN="+in, "STREAMRUN_TEST_OUT="+out, "STREAMRUN_TEST_MARKERS="+markers)
	// Some way in, the second host starts and waits for the subscription.
	changelogCounts(t, cl, p, keys, func(string) int { return n / keys / 4 })
	ctx := testContext(t)
	second, err := streamrun.New(ctx, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Logger: testLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- second.Run(rctx, p) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the second host: %v", err)
		}
	}()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	got := changelogCounts(t, cl, p, keys, func(string) int { return n / keys })
	over := 0
	for k, c := range got {
		if c < n/keys {
			t.Errorf("key %s: count %d, want at least %d", k, c, n/keys)
		}
		over += c - n/keys
	}
	// What the killed host held, and the acknowledgements it had not sent
	// yet (grouped: up to 1000, or 100 ms).
	if most := p.WithDefaults().Handler.MaxInFlight + subscribe.DefaultAckGroupSize; over > most {
		t.Errorf("counts over by %d in all, more than the %d messages the killed host could hold or have acknowledged unsent", over, most)
	}
	var took int64
	for _, st := range second.Stats() {
		took += st.Acked
	}
	if took == 0 {
		t.Error("the second host acknowledged nothing: the first finished before it was killed")
	}
	t.Logf("the second host acknowledged %d messages; counts over by %d in all (changes of messages the killed host had not acknowledged)", took, over)
}

// BenchmarkKeyedStateCounter is a per-key counter over 10 000 keys, on
// an Exclusive subscription with the handler in a plugin process: with
// keyed state (each message reads its key's count, adds one and writes
// it, the changelog written before the ack) and, as the baseline, the
// same pipeline echoing each message without state. b.N messages of 100
// bytes are published first; msg/s is b.N over the time from the host's
// start to the last acknowledgement. The broker is an embedded one in the
// test process, or Apache Pulsar with STREAMRUN_PULSAR_URL; the
// exactly_once pair (guarantee exactly_once, default commit interval)
// runs on an embedded broker with transactions on.
//
//	go test ./runtime -run '^$' -bench KeyedStateCounter -benchtime 200000x
func BenchmarkKeyedStateCounter(b *testing.B) {
	for _, c := range []struct {
		state     bool
		guarantee pipelines.Guarantee
	}{{false, ""}, {true, ""}, {false, pipelines.ExactlyOnce}, {true, pipelines.ExactlyOnce}} {
		state := c.state
		name := fmt.Sprintf("state=%v", state)
		if c.guarantee != "" {
			name += "/" + string(c.guarantee)
		}
		b.Run(name, func(b *testing.B) {
			url := brokertest.TargetB(b)
			if c.guarantee == pipelines.ExactlyOnce {
				if testing.Short() {
					b.Skip("exactly_once left out with -short")
				}
				if os.Getenv("STREAMRUN_PULSAR_URL") != "" {
					b.Skip("exactly_once against the embedded broker only here")
				}
				url = cluster(b, func(o *broker.Options) { o.Transactions = true }).ServiceURL()
			}
			run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
			in, out := "persistent://public/default/bench-count-in-"+run, "persistent://public/default/bench-count-out-"+run
			pub := clientURL(b, url)
			ctx := testContext(b)
			publishCounterInput(ctx, b, pub, in, b.N)
			cfg := testConfig{Output: out, Count: state, MarkerDir: b.TempDir()}
			h := self(cfg)
			h.BatchSize = 100
			p := pipelines.Pipeline{
				Name:    "bench",
				Source:  pipelines.Source{Topics: []string{in}, Subscription: "bench", Type: pipelines.Exclusive, InitialPosition: pipelines.Earliest},
				Handler: h,
				Outputs: []string{out},
			}
			if state {
				p.State = pipelines.State{Enabled: true, Changelog: in + "-state"}
			}
			if c.guarantee == pipelines.ExactlyOnce {
				p.Guarantee = c.guarantee // default commit interval (100ms) and timeout
			}
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			r := runHost(b, nil, streamrun.Options{Logger: testLogger(b, slog.LevelError), Pool: pool.Options{ServiceURL: url}}, p)
			brokertest.Eventually(b, 10*time.Minute, "every message acknowledged", func() bool { return r.stats("bench").Acked >= int64(b.N) })
			elapsed, cpu := time.Since(start), processCPU()-cpu0
			plug := childrenCPU()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "host-ns/msg")
			b.ReportMetric(float64(plug.Nanoseconds())/float64(b.N), "plugin-ns/msg")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPU is the CPU time (user and system) this process has used so
// far: the host and the embedded broker in a benchmark.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// childrenCPU is the CPU time (user and system) used so far by this
// process's live children (the plugin processes), from /proc, in clock
// ticks of 10 ms.
func childrenCPU() time.Duration {
	self := strconv.Itoa(os.Getpid())
	dirs, _ := os.ReadDir("/proc")
	var d time.Duration
	for _, e := range dirs {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// ppid, utime and stime are fields 4, 14 and 15 of stat.
		if len(f) < 13 || f[1] != self {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		d += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return d
}

// publishCounterInput publishes the keyed-state counter benchmarks'
// input: n messages of 100 B over 10 000 keys, every receipt waited for.
func publishCounterInput(ctx context.Context, b *testing.B, pub *pool.Client, topic string, n int) {
	b.Helper()
	payload := []byte(strings.Repeat("x", 100))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		pub.PublishAsync(ctx, topic, pool.Message{Key: fmt.Sprintf("key-%05d", i%10_000), Payload: payload},
			func(_ pulsarwire.MessageID, err error) {
				if err != nil {
					b.Errorf("publish: %v", err)
				}
				wg.Done()
			})
	}
	wg.Wait()
}
