package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// BenchmarkPipeline measures a whole pipeline: consume -> identity
// handler (each message echoed to the output topic, nothing allocated by
// the handler itself) -> produce -> ack,
// with the handler in a plugin process or in the host (the baseline),
// for batches of 1, 100 and 1000 messages of 100 bytes, with one
// instance of the handler (STREAMRUN_BENCH_INSTANCES=n for n) and the
// default batches in flight on the Shared subscription
// (STREAMRUN_BENCH_BATCHES_IN_FLIGHT=n for n). The broker is an embedded
// one in the test process, or the one at STREAMRUN_PULSAR_URL (Apache
// Pulsar, say).
//
// The load is a closed loop: a producer keeps a window of messages in
// the system (published, not yet read back from the output), enough to
// saturate the pipeline on the embedded broker (2000 messages, 8000 at
// batch 1000; STREAMRUN_BENCH_WINDOW=n for n, with
// STREAMRUN_BENCH_MAX_IN_FLIGHT for the host's share). msg/s is b.N over
// the time from the first publish to the last output; p50-ms and p99-ms
// are the end-to-end latencies, from the publish call to the output's
// arrival at a consumer, which at saturation include the wait in the
// window (about window / throughput). STREAMRUN_BENCH_RATE=r makes it an
// open loop at r messages a second instead, for latencies below
// saturation. cpu-µs/msg is the CPU time of the whole test process
// (broker when embedded, clients, host) and of the plugin processes, per
// message. Run it with a fixed count, for example
//
//	go test ./runtime -run '^$' -bench Pipeline -benchtime 1000000x
//
// Broker, producer, host, plugin and output consumer share the machine.
func BenchmarkPipeline(b *testing.B) {
	// Batch size outermost: the two paths at one size run one right after
	// the other, so that their ratio spans seconds, not the whole run
	// (a shared machine's speed drifts from minute to minute).
	for _, batch := range []int{1, 100, 1000} {
		for _, mode := range []string{"plugin", "local"} {
			name := fmt.Sprintf("handler=%s/batch=%d", mode, batch)
			if benchInstances > 1 {
				name += fmt.Sprintf("/instances=%d", benchInstances)
			}
			if benchBatchesInFlight > 0 {
				name += fmt.Sprintf("/batches_in_flight=%d", benchBatchesInFlight)
			}
			b.Run(name, func(b *testing.B) {
				benchPipeline(b, mode, batch)
			})
		}
	}
}

func benchPipeline(b *testing.B, mode string, batchSize int) {
	url := brokertest.PulsarURL() // Apache Pulsar, say, when set
	if url == "" {
		url = cluster(b).ServiceURL()
	}
	// Topic names of an everyday length: each message carries its topic
	// to the plugin, and each output its own back. Fresh ones each run:
	// Apache Pulsar keeps the last run's.
	run := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	in, out := "persistent://public/default/bench-in-"+run, "persistent://public/default/bench-out-"+run
	pub, sub := clientURL(b, url), clientURL(b, url)
	ctx := testContext(b)

	h := self(testConfig{Output: out})
	if mode == "python" {
		h = pythonHandler(b, testConfig{Output: out})
	}
	h.BatchSize = batchSize
	h.Instances = benchInstances
	h.MaxBatchesInFlight = benchBatchesInFlight
	h.MaxInFlight = benchMaxInFlight
	opts := streamrun.Options{Logger: testLogger(b, slog.LevelError), Pool: pool.Options{ServiceURL: url}}
	if mode == "local" {
		opts.LocalHandlers = map[string]func() plugin.Handler{"bench": func() plugin.Handler { return plugin.Configure(newTestHandler) }}
	}
	cons, err := subscribe.New(ctx, sub, subscribe.Options{Topics: []string{out}, Subscription: "bench", ReceiverQueue: 5000})
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close(context.Background())
	if _, err := pub.Producer(ctx, in); err != nil {
		b.Fatal(err)
	}
	r := runHost(b, nil, opts, pipelines.Pipeline{
		Name:    "bench",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "bench"},
		Handler: h,
		Outputs: []string{out},
	})

	n := b.N
	window := max(2*pipelines.DefaultMinInFlight, 8*batchSize)
	if benchWindow > 0 {
		window = benchWindow
	}
	tokens := make(chan struct{}, window)
	base := time.Now()
	lat := make([]time.Duration, 0, n)
	var received atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]*subscribe.Message, 1000)
		for len(lat) < n {
			k, err := cons.ReceiveBatch(ctx, buf)
			if err != nil {
				b.Errorf("receive outputs: %v", err)
				return
			}
			now := time.Since(base)
			for _, m := range buf[:k] {
				lat = append(lat, now-time.Duration(binary.BigEndian.Uint64(m.Payload)))
				cons.Ack(ctx, m)
				select {
				case <-tokens:
				default:
				}
			}
			received.Add(int64(k))
		}
	}()

	var pids []int
	for _, ih := range r.health("bench").Instances {
		if ih.Pid != 0 {
			pids = append(pids, ih.Pid)
		}
	}
	cpu0 := brokertest.CPUTime(pids...)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		if benchRate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / benchRate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			b.Fatalf("timed out after %d messages", received.Load())
		}
		p := make([]byte, 100)
		binary.BigEndian.PutUint64(p, uint64(time.Since(base)))
		pub.PublishAsync(ctx, in, pool.Message{Payload: p}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				b.Errorf("publish: %v", err)
			}
		})
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatalf("timed out: %d of %d outputs", received.Load(), n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := brokertest.CPUTime(pids...) - cpu0

	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(int(float64(len(lat))*p), len(lat)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(n), "cpu-µs/msg")
	b.ReportMetric(0, "ns/op")
}

// benchRateEnv, when set, makes BenchmarkPipeline's load an open loop
// at that many messages a second (below what the pipeline can take, the
// latencies are the pipeline's own, without queueing).
const benchRateEnv = "STREAMRUN_BENCH_RATE"

var benchRate, _ = strconv.ParseFloat(os.Getenv(benchRateEnv), 64)

// benchWindowEnv sets BenchmarkPipeline's closed-loop window (default
// 2000 messages, 8 batches when more); benchMaxInFlightEnv sets the
// handler's MaxInFlight (default: the default). A broker with a long
// round trip (Apache Pulsar) needs both larger to be saturated.
const (
	benchWindowEnv      = "STREAMRUN_BENCH_WINDOW"
	benchMaxInFlightEnv = "STREAMRUN_BENCH_MAX_IN_FLIGHT"
)

var (
	benchWindow, _      = strconv.Atoi(os.Getenv(benchWindowEnv))
	benchMaxInFlight, _ = strconv.Atoi(os.Getenv(benchMaxInFlightEnv))
)

// benchInstancesEnv sets the instances of BenchmarkPipeline's handler
// (default 1).
const benchInstancesEnv = "STREAMRUN_BENCH_INSTANCES"

var benchInstances = func() int {
	n, _ := strconv.Atoi(os.Getenv(benchInstancesEnv))
	return max(n, 1)
}()

// benchBatchesInFlightEnv sets Handler.MaxBatchesInFlight of
// BenchmarkPipeline's handler (default: the default, on Shared 8 for the
// plugin and 2 in-process).
const benchBatchesInFlightEnv = "STREAMRUN_BENCH_BATCHES_IN_FLIGHT"

var benchBatchesInFlight, _ = strconv.Atoi(os.Getenv(benchBatchesInFlightEnv))
