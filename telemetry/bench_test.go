package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/otlptest"
	"github.com/streamrun/streamrun/telemetry/scrape"
)

// BenchmarkTelemetry measures what telemetry costs a pipeline: the same
// pipeline (embedded broker, a plugin that echoes each 100-byte message to
// the output topic, batches of 100, one instance) with telemetry off,
// with traces sampled at 0, 0.01 and 1.0 (parentbased_traceidratio,
// exported by OTLP gRPC to a receiver in the test process that counts
// them without decoding and drops them: a collector's work is not the
// pipeline's; the plugin exports its spans too), and with metrics on (a
// meter provider whose /metrics is scraped once a second). Report msg/s
// as a ratio to off's, from interleaved runs, for example
//
//	go test ./telemetry -run '^$' -bench Telemetry -benchtime 200000x -count 5
//
// The input messages carry no trace context: each batch is a root, as
// behind an untraced producer, and carries a context on only when the
// sampler samples it; with STREAMRUN_BENCH_TRACED_INPUT
// set, each carries its own, one in 100 sampled. cpu-µs/msg is the CPU time of
// the test process (broker, clients, host, receiver) and the plugin per
// message: on a shared machine it varies less than msg/s.
func BenchmarkTelemetry(b *testing.B) {
	input := untracedInput
	if os.Getenv(benchTracedInputEnv) != "" {
		input = tracedInput
	}
	for _, mode := range []string{"off", "traces=0", "traces=0.01", "traces=1", "metrics"} {
		b.Run(mode, func(b *testing.B) { benchTelemetry(b, mode, input) })
	}
}

// BenchmarkTelemetryMixedInput is BenchmarkTelemetry's pipeline fed as
// `streamrun run --input` feeds it with the traceidratio sampler at 0.01:
// one message in 100, at random, carries a sampled context of its own
// trace, the others none (an unsampled root carries no context). So
// most batches of 100 mix a sampled message with untraced ones, whose
// outputs must follow their own inputs (a root decision each batch, at
// the sampler's ratio) and not the sampled one: about 0.02 host spans
// per message, not one per output of every such batch.
func BenchmarkTelemetryMixedInput(b *testing.B) {
	for _, mode := range []string{"off", "traces=0", "traces=0.01"} {
		b.Run(mode, func(b *testing.B) { benchTelemetry(b, mode, mixedInput) })
	}
}

// What the benchmark's input messages carry.
const (
	untracedInput = iota // no trace context
	tracedInput          // each its own trace, one in 100 sampled
	mixedInput           // one in 100 a sampled trace, the rest nothing
)

func benchTelemetry(b *testing.B, mode string, input int) {
	ctx := testContext(b)
	c := cluster(b)
	run := strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	in, out := "persistent://public/default/tbench-in-"+run, "persistent://public/default/tbench-out-"+run
	h := selfHandler(out)
	h.Config["plain"] = true
	h.BatchSize = 100
	opts := streamrun.Options{Logger: testLogger(b, slog.LevelError)}
	rcv, flush, stop := benchTelemetryMode(ctx, b, mode, &opts)
	defer stop()
	pub, sub := client(b, c), client(b, c)
	cons, err := subscribe.New(ctx, sub, subscribe.Options{Topics: []string{out}, Subscription: "bench", ReceiverQueue: 5000})
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close(context.Background())
	if _, err := pub.Producer(ctx, in); err != nil {
		b.Fatal(err)
	}
	host := runHost(b, c, opts, pipelines.Pipeline{
		Name:    "bench",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "bench"},
		Handler: h,
		Outputs: []string{out},
	})
	waitReady(b, ctx, host)

	// A closed loop: window messages in the system at most.
	n, window := b.N, 2000
	tokens := make(chan struct{}, window)
	done := receiveOutputs(ctx, b, cons, n, tokens)
	pids := pluginPids(host)
	cpu0, self0 := brokertest.CPUTime(pids...), brokertest.CPUTime()
	payload := make([]byte, 100)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			b.Fatal("timed out")
		}
		pub.PublishAsync(ctx, in, benchInput(i, payload, input, rng), func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				b.Errorf("publish: %v", err)
			}
		})
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatal("timed out waiting for the outputs")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu, self := brokertest.CPUTime(pids...)-cpu0, brokertest.CPUTime()-self0
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(n), "cpu-µs/msg")
	b.ReportMetric(float64(cpu-self)/float64(time.Microsecond)/float64(n), "plugin-cpu-µs/msg")
	b.ReportMetric(0, "ns/op")
	if rcv != nil {
		// The host's spans; the plugin's go when it is closed.
		flush()
		b.ReportMetric(float64(rcv.Count())/float64(n), "host-spans/msg")
	}
}

// benchTelemetryMode sets up mode's telemetry in opts: a tracer provider
// exporting to a discarding receiver (rcv; flush exports what is
// pending), a scraped meter provider, or nothing (the plugin exports no
// traces either). stop undoes it.
func benchTelemetryMode(ctx context.Context, b *testing.B, mode string, opts *streamrun.Options) (rcv *otlptest.Receiver, flush, stop func()) {
	flush, stop = func() {}, func() {}
	switch mode {
	case "traces=0", "traces=0.01", "traces=1":
		rcv = otlptest.StartDiscarding(b, telemetry.ProtocolGRPC)
		cfg := telemetry.Config{Endpoint: rcv.URL, Sampler: "parentbased_traceidratio", SamplerArg: mode[len("traces="):]}
		tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{})
		if err != nil {
			b.Fatal(err)
		}
		opts.TracerProvider, opts.PluginEnv = tp, cfg.Environ()
		flush = func() { _ = tp.ForceFlush(ctx) }
		stop = func() { tp.Shutdown(context.Background()) }
	case "metrics":
		stop = benchMetrics(ctx, b, opts)
	default:
		opts.PluginEnv = []string{"OTEL_TRACES_EXPORTER=none"}
	}
	return rcv, flush, stop
}

// benchMetrics gives opts a meter provider whose /metrics a goroutine
// scrapes once a second; the function it returns stops the scraper and
// the server, and shuts the provider down.
func benchMetrics(ctx context.Context, b *testing.B, opts *streamrun.Options) (stop func()) {
	mp, handler, err := scrape.NewMeterProvider(nil)
	if err != nil {
		b.Fatal(err)
	}
	opts.MeterProvider = mp
	srv, err := scrape.Listen(scrape.Options{Addr: ":0", Metrics: handler})
	if err != nil {
		mp.Shutdown(context.Background())
		b.Fatal(err)
	}
	stopScraper := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopScraper:
				return
			case <-t.C:
				if _, err := scrapeMetrics(ctx, "http://"+srv.Addr()); err != nil {
					b.Errorf("scrape: %v", err)
				}
			}
		}
	}()
	return func() {
		close(stopScraper)
		<-scraped
		srv.Close(context.Background())
		mp.Shutdown(context.Background())
	}
}

// receiveOutputs receives and acknowledges n outputs on a goroutine,
// taking a token back for each; the channel closes when all came (or
// receiving failed).
func receiveOutputs(ctx context.Context, b *testing.B, cons *subscribe.Consumer, n int, tokens <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]*subscribe.Message, 1000)
		for got := 0; got < n; {
			k, err := cons.ReceiveBatch(ctx, buf)
			if err != nil {
				b.Errorf("receive outputs: %v", err)
				return
			}
			for _, m := range buf[:k] {
				cons.Ack(ctx, m)
				<-tokens
			}
			got += k
		}
	}()
	return done
}

// pluginPids are the pids of the host's plugin processes.
func pluginPids(host *streamrun.Host) []int {
	var pids []int
	for _, ph := range host.Health() {
		for _, ih := range ph.Instances {
			pids = append(pids, ih.Pid)
		}
	}
	return pids
}

// benchInput is input message i: payload, and a trace context as input
// says.
func benchInput(i int, payload []byte, input int, rng *rand.Rand) pool.Message {
	m := pool.Message{Payload: payload}
	// Sampled upstream one in 100, at random: a batch's first message,
	// whose context the batch continues, is sampled one time in 100 too
	// (i%100 would line up with the batches).
	sampled := rng.IntN(100) == 0
	switch {
	case input == tracedInput:
		// Each message its own trace.
		flags := "00"
		if sampled {
			flags = "01"
		}
		m.Properties = map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-%s", i+1, i+1, flags)}
	case input == mixedInput && sampled:
		m.Properties = map[string]string{"traceparent": fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)}
	}
	return m
}

// benchTracedInputEnv, when set, gives each input message a trace
// context of its own, one in 100 sampled, as an instrumented producer
// sampling at 0.01 would write it. (Off, the host carries each input's
// context on to its outputs as it is.)
const benchTracedInputEnv = "STREAMRUN_BENCH_TRACED_INPUT"
