package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/benchrun"
	"github.com/streamrun/streamrun/pulsarwire"
)

func TestBenchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "give a subcommand"},
		{[]string{"frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"produce", "--size", "-1"}, "--size must not be negative"},
		{[]string{"produce", "--rate", "-5"}, "--rate must not be negative"},
		{[]string{"produce", "--count", "10", "--duration", "1s"}, "--count and --duration exclude each other"},
		{[]string{"produce", "--partitions", "10001"}, "--partitions must be from 1 to 10000"},
		{[]string{"produce", "--keys", "-2"}, "--keys must not be negative"},
		{[]string{"produce", "--batch-max-messages", "-1"}, "--batch-max-messages must not be negative"},
		{[]string{"produce", "--batch-max-delay", "-1s"}, "--batch-max-delay must not be negative"},
		{[]string{"produce", "--output", "xml"}, `--output "xml": want text or json`},
		{[]string{"produce", "--memory", "--sync"}, "--memory and --sync exclude each other"},
		{[]string{"produce", "--url", "pulsar://127.0.0.1:1", "--memory"}, "--memory and --sync are for the embedded broker"},
		{[]string{"produce", "--url", "http://127.0.0.1:8080"}, "--url"},
		{[]string{"produce", "--topic", "a/b/c/d/e"}, "--topic"},
		{[]string{"produce", "--subscription-type", "shared"}, "unknown flag: --subscription-type"},
		{[]string{"produce", "extra"}, "unexpected arguments: extra"},
		{[]string{"consume", "--subscription-type", "round_robin"}, "--subscription-type"},
		{[]string{"consume", "--subscription-type", "key_shared"}, "needs --keys"},
		{[]string{"consume", "--position", "middle"}, `--position "middle"`},
		{[]string{"consume", "--produce=false"}, "--produce false needs --count or --duration"},
		{[]string{"consume", "--receiver-queue", "-1"}, "--receiver-queue must not be negative"},
		{[]string{"consume", "--topics", "-1"}, "--topics must not be negative"},
		{[]string{"consume", "--pattern"}, "--pattern needs --topics 2 or more"},
		{[]string{"produce", "--pattern"}, "unknown flag: --pattern"},
		{[]string{"pipeline", "--pipelines", "-1"}, "--pipelines must not be negative"},
		{[]string{"pipeline", "--in-process", "--package", "./x"}, "exclude each other"},
		{[]string{"pipeline", "--batch-size", "0"}, "--batch-size must be at least 1"},
		{[]string{"pipeline", "--instances", "0"}, "--instances must be at least 1"},
		{[]string{"pipeline", "--plugin", "/no/such/plugin"}, "--plugin"},
		{[]string{"pipeline", "--in-process", "--produce=false"}, "unknown flag: --produce"},
		{[]string{"pipeline", "--config", `{"output": "{output}"}`}, "--config is for a handler of your own"},
		{[]string{"pipeline", "--package", "./x", "--config", `["a"]`}, "--config: want a JSON object"},
		{[]string{"pipeline", "--package", "./x", "--config", "@/no/such/config.json"}, "--config: open /no/such/config.json"},
		{[]string{"pipeline", "--state", "--keys", "0"}, "--state needs --keys 1 or more"},
		{[]string{"pipeline", "--state", "--subscription-type", "failover"}, "--state needs --subscription-type exclusive"},
		{[]string{"pipeline", "--state", "--steps"}, "--plugin, --package and --steps exclude it"},
		{[]string{"pipeline", "--state", "--package", "./x"}, "--plugin, --package and --steps exclude it"},
		{[]string{"pipeline", "--state", "--rounds", "0"}, "--rounds must be at least 1, got 0"},
		{[]string{"pipeline", "--rounds", "2"}, "--rounds is for --state"},
		{[]string{"consume", "--state"}, "unknown flag: --state"},
		{[]string{"produce", "-s", "100"}, "unknown shorthand flag: 's'"},
	} {
		code, _, errs := runArgs(append([]string{"bench"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "streamrun bench") {
			t.Errorf("bench %v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, out, _ := runArgs("bench", "--help"); code != 0 || !strings.Contains(out, "pipeline") {
		t.Errorf("bench --help: %d %q", code, out)
	}
	if code, out, _ := runArgs("bench", "consume", "--help"); code != 0 || !strings.Contains(out, "--subscription-type") {
		t.Errorf("bench consume --help: %d %q", code, out)
	}
}

// benchJSONFields are the fields --output json promises
// (docs/benchmarks/bench-command.md), at the top and in conditions.
var (
	benchJSONFields = []string{
		"schema", "command", "messages", "bytes", "sent", "failed", "elapsed_seconds", "msg_per_sec",
		"mib_per_sec", "steady_msg_per_sec", "first_message_at", "last_message_at", "latency_from", "latency_ms", "cpu_seconds", "cpu_us_per_message", "max_rss_bytes",
		"handler_rss_bytes", "handler_cpu_seconds", "setup_seconds", "conditions",
	}
	benchCompareFields    = []string{"schema", "command", "compare", "rounds", "msg_per_sec_ratio", "cpu_per_message_ratio"}
	benchRoundFields      = []string{"stateful_first", "stateless", "stateful", "msg_per_sec_ratio", "cpu_per_message_ratio"}
	benchSpreadFields     = []string{"median", "min", "max"}
	benchLatencyFields    = []string{"count", "p50", "p99", "p99_9", "max", "mean"}
	benchConditionsFields = []string{
		"url", "broker", "broker_version", "broker_durability", "topic", "topics", "pattern", "partitions", "message_size", "keys",
		"rate", "count", "duration_seconds", "batching", "max_pending", "gomaxprocs", "num_cpu", "go_version", "os", "arch",
		"streamrun_version", "load_average_start", "load_average_end", "started_at",
	}
	benchBatchingFields = []string{"enabled", "max_messages", "max_bytes", "max_delay_ms"}
)

// runBenchJSON runs `streamrun bench ARGS --output json --progress 0`
// and returns its result, having checked that every promised field is
// there and the exit status is 0.
func runBenchJSON(t *testing.T, args ...string) benchrun.Result {
	t.Helper()
	args = append([]string{"bench"}, append(args, "--output", "json", "--progress", "0")...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("%v: exit %d\nstderr: %s\nstdout: %s", args, code, errb.String(), out.String())
	}
	return decodeBenchJSON(t, out.Bytes())
}

// decodeBenchJSON checks b holds every field of benchJSONFields and
// decodes it.
func decodeBenchJSON(t *testing.T, b []byte) benchrun.Result {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, b)
	}
	hasAll(t, "", raw, benchJSONFields)
	lat, _ := raw["latency_ms"].(map[string]any)
	hasAll(t, "latency_ms.", lat, benchLatencyFields)
	cond, _ := raw["conditions"].(map[string]any)
	hasAll(t, "conditions.", cond, benchConditionsFields)
	batching, _ := cond["batching"].(map[string]any)
	hasAll(t, "conditions.batching.", batching, benchBatchingFields)
	var r benchrun.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Schema != benchrun.SchemaVersion {
		t.Errorf("schema %q, want %q", r.Schema, benchrun.SchemaVersion)
	}
	return r
}

func hasAll(t *testing.T, prefix string, m map[string]any, fields []string) {
	t.Helper()
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			t.Errorf("JSON lacks %s%s", prefix, f)
		}
	}
}

// checkBenchCounts checks what every run must show: n messages asked,
// sent and measured, none failed, a latency per message, and the
// conditions as asked.
func checkBenchCounts(t *testing.T, r benchrun.Result, command string, n int64, size, partitions, keys int) {
	t.Helper()
	if r.Command != command {
		t.Errorf("command %q, want %q", r.Command, command)
	}
	if r.Messages != n || r.Sent != n || r.Failed != 0 {
		t.Errorf("messages %d, sent %d, failed %d; want %d, %d, 0", r.Messages, r.Sent, r.Failed, n, n)
	}
	if r.Bytes != n*int64(size) {
		t.Errorf("bytes %d, want %d", r.Bytes, n*int64(size))
	}
	if r.Latency.Count != n {
		t.Errorf("latency samples %d, want %d", r.Latency.Count, n)
	}
	if !(r.Latency.P50 <= r.Latency.P99 && r.Latency.P99 <= r.Latency.P999 && r.Latency.P999 <= r.Latency.Max) {
		t.Errorf("percentiles out of order: %+v", r.Latency)
	}
	if r.FirstMessageAt.IsZero() || r.LastMessageAt.Before(r.FirstMessageAt) || r.LastMessageAt.Before(r.Conditions.StartedAt) {
		t.Errorf("first message at %v, last at %v, run started at %v", r.FirstMessageAt, r.LastMessageAt, r.Conditions.StartedAt)
	}
	if r.SteadyMsgPerSec < 0 || r.SteadyMsgPerSec > 0 && r.Messages < 2 {
		t.Errorf("steady rate %v of %d messages", r.SteadyMsgPerSec, r.Messages)
	}
	c := r.Conditions
	if c.MessageSize != size || c.Partitions != partitions || c.Keys != keys || c.Count != n {
		t.Errorf("conditions size %d partitions %d keys %d count %d; want %d %d %d %d", c.MessageSize, c.Partitions, c.Keys, c.Count, size, partitions, keys, n)
	}
	if c.GOMAXPROCS < 1 || c.NumCPU < 1 || c.URL == "" || c.Topic == "" || c.BrokerVersion == "" {
		t.Errorf("conditions incomplete: %+v", c)
	}
	if _, err := os.Stat("/proc/loadavg"); err == nil && (len(c.LoadAverageStart) != 3 || len(c.LoadAverageEnd) != 3) {
		t.Errorf("load averages %v %v, want 3 each", c.LoadAverageStart, c.LoadAverageEnd)
	}
}

func TestBenchProduceEmbedded(t *testing.T) {
	r := runBenchJSON(t, "produce", "--count", "3000", "--size", "100", "--partitions", "3", "--keys", "7",
		"--batch-max-messages", "50", "--batch-max-bytes", "65536", "--batch-max-delay", "5ms", "--memory")
	checkBenchCounts(t, r, "produce", 3000, 100, 3, 7)
	c := r.Conditions
	if c.Broker != "embedded" || c.BrokerDurability != "memory" || r.LatencyFrom != benchrun.LatencyFromSend {
		t.Errorf("broker %q durability %q latency from %q", c.Broker, c.BrokerDurability, r.LatencyFrom)
	}
	if want := (benchrun.Batching{Enabled: true, MaxMessages: 50, MaxBytes: 65536, MaxDelayMs: 5}); c.Batching != want {
		t.Errorf("batching %+v, want %+v", c.Batching, want)
	}
}

func TestBenchConsumeEmbedded(t *testing.T) {
	r := runBenchJSON(t, "consume", "--count", "2000", "--size", "64", "--keys", "4",
		"--subscription-type", "key_shared", "--no-batching")
	checkBenchCounts(t, r, "consume", 2000, 64, 1, 4)
	c := r.Conditions
	if c.SubscriptionType != "KeyShared" || c.Batching.Enabled || c.BrokerDurability != "write" {
		t.Errorf("subscription type %q, batching %+v, durability %q", c.SubscriptionType, c.Batching, c.BrokerDurability)
	}
	if r.LatencyFrom != benchrun.LatencyFromPayload {
		t.Errorf("latency from %q, want %q", r.LatencyFrom, benchrun.LatencyFromPayload)
	}
	// Payloads too short for the timestamp: publish_time instead.
	r = runBenchJSON(t, "consume", "--count", "500", "--size", "8", "--memory")
	checkBenchCounts(t, r, "consume", 500, 8, 1, 0)
	if r.LatencyFrom != benchrun.LatencyFromPublishTime {
		t.Errorf("latency from %q, want %q", r.LatencyFrom, benchrun.LatencyFromPublishTime)
	}
}

// TestBenchManyTopics spreads the messages over topics, received by
// their names and by a pattern.
func TestBenchManyTopics(t *testing.T) {
	r := runBenchJSON(t, "produce", "--count", "900", "--size", "50", "--topics", "30", "--memory")
	checkBenchCounts(t, r, "produce", 900, 50, 1, 0)
	if r.Conditions.Topics != 30 || r.Conditions.Pattern {
		t.Errorf("topics %d pattern %v, want 30 false", r.Conditions.Topics, r.Conditions.Pattern)
	}
	r = runBenchJSON(t, "consume", "--count", "1000", "--size", "50", "--topics", "40", "--pattern", "--memory")
	checkBenchCounts(t, r, "consume", 1000, 50, 1, 0)
	if r.Conditions.Topics != 40 || !r.Conditions.Pattern {
		t.Errorf("topics %d pattern %v, want 40 true", r.Conditions.Topics, r.Conditions.Pattern)
	}
}

func TestBenchPipelineInProcess(t *testing.T) {
	r := runBenchJSON(t, "pipeline", "--in-process", "--count", "2000", "--size", "100", "--partitions", "2",
		"--batch-size", "50", "--instances", "2", "--memory")
	checkBenchCounts(t, r, "pipeline", 2000, 100, 2, 0)
	h := r.Conditions.Handler
	if h == nil || h.Kind != "in-process" || h.BatchSize != 50 || h.Instances != 2 {
		t.Errorf("handler %+v", h)
	}
	if r.Conditions.OutputTopic != r.Conditions.Topic+"-out" {
		t.Errorf("output topic %q for topic %q", r.Conditions.OutputTopic, r.Conditions.Topic)
	}
	if r.HandlerRSSBytes != 0 {
		t.Errorf("handler processes' RSS %d in process", r.HandlerRSSBytes)
	}
	r = runBenchJSON(t, "pipeline", "--in-process", "--count", "1500", "--size", "100", "--pipelines", "3", "--memory")
	checkBenchCounts(t, r, "pipeline", 1500, 100, 1, 0)
	if r.Conditions.Pipelines != 3 || r.Conditions.Topics != 3 {
		t.Errorf("pipelines %d topics %d, want 3 and 3", r.Conditions.Pipelines, r.Conditions.Topics)
	}
}

// TestBenchPipelinePlugins runs the pipeline through plugin processes:
// an example handler built from its package, and streamrun's own
// identity handler (`streamrun bench handler`, the default), which needs
// the streamrun binary.
func TestBenchPipelinePlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds handlers: not in -short")
	}
	r := runBenchJSON(t, "pipeline", "--package", "../../examples/plugins/uppercase", "--count", "1000", "--size", "100", "--memory")
	checkBenchCounts(t, r, "pipeline", 1000, 100, 1, 0)
	if h := r.Conditions.Handler; h == nil || h.Kind != "plugin" || !strings.HasSuffix(h.Package, "examples/plugins/uppercase") {
		t.Errorf("handler %+v", h)
	}
	// The uppercase handler leaves the digits of the timestamp alone.
	if r.LatencyFrom != benchrun.LatencyFromPayload {
		t.Errorf("latency from %q, want %q", r.LatencyFrom, benchrun.LatencyFromPayload)
	}

	bin := buildStreamrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "bench", "pipeline", "--count", "1000", "--size", "100", "--memory", "--output", "json", "--progress", "0").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("streamrun bench pipeline: %v\n%s", err, stderr)
	}
	r = decodeBenchJSON(t, out)
	checkBenchCounts(t, r, "pipeline", 1000, 100, 1, 0)
	if h := r.Conditions.Handler; h == nil || h.Kind != "plugin" || h.Plugin != bin {
		t.Errorf("handler %+v, want the plugin %s", h, bin)
	}
	if r.HandlerRSSBytes <= 0 {
		t.Errorf("handler processes' RSS %d, want their sum", r.HandlerRSSBytes)
	}
}

// TestBenchApachePulsar runs each subcommand for two seconds against
// Apache Pulsar (STREAMRUN_PULSAR_URL and STREAMRUN_PULSAR_HTTP): every
// message published arrives, and the JSON has every field.
func TestBenchApachePulsar(t *testing.T) {
	url, admin := apachePulsar(t)
	common := []string{"--url", url, "--admin-url", admin, "--duration", "2s", "--rate", "5000", "--size", "100"}
	for _, args := range [][]string{
		{"produce", "--partitions", "2", "--keys", "5"},
		{"consume", "--subscription-type", "failover"},
		{"pipeline", "--in-process"},
		{"pipeline", "--package", "../../examples/plugins/uppercase"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			r := runBenchJSON(t, append(args, common...)...)
			if r.Sent == 0 || r.Messages != r.Sent || r.Failed != 0 || r.Latency.Count != r.Messages {
				t.Errorf("sent %d, measured %d, failed %d, latencies %d: want all sent measured", r.Sent, r.Messages, r.Failed, r.Latency.Count)
			}
			c := r.Conditions
			if c.Broker != "external" || c.URL != url || c.DurationSeconds != 2 || c.Rate != 5000 {
				t.Errorf("conditions %+v", c)
			}
			if !slices.Contains([]string{"produce", "consume", "pipeline"}, r.Command) || r.Command != args[0] {
				t.Errorf("command %q, want %q", r.Command, args[0])
			}
			if strings.Contains(c.BrokerVersion, "streamrun") {
				t.Errorf("broker version %q: not Apache Pulsar", c.BrokerVersion)
			}
		})
	}
}

// TestBenchInterrupted: an interrupt ends the run with exit status 1,
// saying so, and the result of the part that ran is still printed.
func TestBenchInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb brokertest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"bench", "produce", "--duration", "10m", "--size", "100", "--memory", "--output", "json", "--progress", "10ms"}, &out, &errb)
	}()
	// Interrupt once publishing is measured: the first progress line.
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(errb.String(), "msg/s") {
		select {
		case code := <-done:
			t.Fatalf("a 10 minute run ended by itself: exit %d, %s", code, errb.String())
		case <-deadline:
			t.Fatalf("no progress line within 2 minutes: %s", errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	code := <-done
	if code != 1 || !strings.Contains(errb.String(), "streamrun bench produce: interrupted") {
		t.Fatalf("exit %d, stderr %q; want 1 and the interrupt", code, errb.String())
	}
	r := decodeBenchJSON(t, []byte(out.String()))
	if r.Sent == 0 || r.Messages+r.Failed != r.Sent {
		t.Errorf("sent %d, measured %d, failed %d: want some sent, each measured or failed", r.Sent, r.Messages, r.Failed)
	}
}

// topicExists asks the admin API at adminURL whether topic is there, as a
// topic, a partitioned one or one of its partitions.
func topicExists(t *testing.T, adminURL, topic string) bool {
	t.Helper()
	a, err := admin.New(admin.Options{URL: adminURL})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tn, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	names, err := a.Topics(context.Background(), tn.Tenant+"/"+tn.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == topic || strings.HasPrefix(n, topic+"-partition-") {
			return true
		}
	}
	return false
}

// benchAgainstURL checks a run against a broker at url (its admin API at
// admin): given neither --count nor --rate it stops at the cap, says so,
// and deletes the topics it named itself; --keep-topic keeps them; a
// rate given lifts the cap.
func benchAgainstURL(t *testing.T, url, admin string) {
	target := []string{"--url", url, "--admin-url", admin}
	r := runBenchJSON(t, append([]string{"produce", "--size", "10", "--duration", "2m"}, target...)...)
	c := r.Conditions
	if c.CountCap != benchURLCap || r.Sent != benchURLCap || r.Messages != benchURLCap || r.Failed != 0 {
		t.Errorf("cap %d, sent %d, measured %d, failed %d; want %d of each, none failed", c.CountCap, r.Sent, r.Messages, r.Failed, benchURLCap)
	}
	if !slices.Equal(r.TopicsDeleted, []string{c.Topic}) || topicExists(t, admin, c.Topic) {
		t.Errorf("topics deleted %v; %s still there: %v", r.TopicsDeleted, c.Topic, topicExists(t, admin, c.Topic))
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil || !strings.Contains(text.String(), "wrote: 100000 messages, 1.0 MiB, stopped at the cap of 100000 against --url") ||
		!strings.Contains(text.String(), "deleted at the end: "+c.Topic) {
		t.Errorf("the summary does not say what was written and deleted: %v\n%s", err, text.String())
	}

	r = runBenchJSON(t, append([]string{"produce", "--size", "10", "--duration", "1s", "--rate", "500", "--keep-topic", "--partitions", "2"}, target...)...)
	if r.Conditions.CountCap != 0 || r.Sent == 0 || r.Sent > 600 || len(r.TopicsDeleted) != 0 || !topicExists(t, admin, r.Conditions.Topic) {
		t.Errorf("--rate 500 --keep-topic: cap %d, sent %d, deleted %v, topic kept %v", r.Conditions.CountCap, r.Sent,
			r.TopicsDeleted, topicExists(t, admin, r.Conditions.Topic))
	}

	// A pipeline's output topics go too.
	r = runBenchJSON(t, append([]string{"pipeline", "--in-process", "--count", "200", "--size", "10"}, target...)...)
	c = r.Conditions
	if !slices.Equal(r.TopicsDeleted, []string{c.Topic, c.OutputTopic}) || topicExists(t, admin, c.Topic) || topicExists(t, admin, c.OutputTopic) {
		t.Errorf("pipeline: deleted %v, want %s and %s gone", r.TopicsDeleted, c.Topic, c.OutputTopic)
	}
}

// Against --url (here the embedded broker in its own cluster), a run
// writes at most benchURLCap messages unless told how many, and leaves
// no topic of its own behind.
func TestBenchAgainstURLIsCappedAndCleansUp(t *testing.T) {
	c := brokertest.Start(t)
	benchAgainstURL(t, c.ServiceURL(), c.AdminURL())
}

// The same against Apache Pulsar (STREAMRUN_PULSAR_URL and
// STREAMRUN_PULSAR_HTTP).
func TestBenchAgainstApachePulsarIsCappedAndCleansUp(t *testing.T) {
	url, admin := apachePulsar(t)
	benchAgainstURL(t, url, admin)
}

// bench pipeline --config hands the handler a config of the user's own,
// "{output}" in it naming the output topic: the slow example handler,
// told to echo, passes every message on; told nothing of an output, it
// passes none (so the config is what reached it).
func TestBenchPipelineConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a handler: not in -short")
	}
	r := runBenchJSON(t, "pipeline", "--package", "../../examples/plugins/slow", "--config", `{"delay": "1ms", "output": "{output}"}`,
		"--count", "300", "--size", "100", "--memory")
	checkBenchCounts(t, r, "pipeline", 300, 100, 1, 0)
	if h := r.Conditions.Handler; h == nil || fmt.Sprint(h.Config) != "map[delay:1ms output:{output}]" {
		t.Errorf("the conditions' handler %+v, want its config as given", h)
	}

	args := []string{"bench", "pipeline", "--package", "../../examples/plugins/slow", "--config", `{"delay": "1ms"}`,
		"--count", "50", "--size", "100", "--memory", "--drain-timeout", "2s", "--progress", "0"}
	code, _, errs := runArgs(args...)
	if code != 1 || !strings.Contains(errs, "0 of 50 messages arrived within --drain-timeout") {
		t.Errorf("%v: exit %d, stderr %q; want 1 and no output arrived", args, code, errs)
	}
}

// runBenchCompare runs `streamrun bench pipeline --state ARGS --output
// json --progress 0` and returns its comparison, having checked that
// every promised field is there (each side's as runBenchJSON does) and
// the exit status is 0.
func runBenchCompare(t *testing.T, args ...string) benchrun.Comparison {
	t.Helper()
	args = append([]string{"bench", "pipeline", "--state"}, append(args, "--output", "json", "--progress", "0")...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("%v: exit %d\nstderr: %s\nstdout: %s", args, code, errb.String(), out.String())
	}
	var raw map[string]any
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.Bytes())
	}
	hasAll(t, "", raw, benchCompareFields)
	for _, f := range []string{"msg_per_sec_ratio", "cpu_per_message_ratio"} {
		sp, _ := raw[f].(map[string]any)
		hasAll(t, f+".", sp, benchSpreadFields)
	}
	rounds, _ := raw["rounds"].([]any)
	for _, r := range rounds {
		round, _ := r.(map[string]any)
		hasAll(t, "rounds[].", round, benchRoundFields)
		for _, side := range []string{"stateless", "stateful"} {
			b, _ := json.Marshal(round[side])
			decodeBenchJSON(t, b)
		}
	}
	var c benchrun.Comparison
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Schema != benchrun.CompareSchemaVersion || c.Command != "pipeline" || c.Compare != "state" {
		t.Errorf("schema %q command %q compare %q", c.Schema, c.Command, c.Compare)
	}
	return c
}

// checkBenchCompare checks what every --state run must show: the rounds
// asked, alternating which side goes first; on each side n messages
// sent and measured, none failed, over keys keys on an Exclusive
// subscription; keyed state on the stateful side only, which found
// checked keys' counts right in its changelogs; and the ratios of the
// two.
func checkBenchCompare(t *testing.T, c benchrun.Comparison, rounds int, n int64, keys, checked int) {
	t.Helper()
	if len(c.Rounds) != rounds {
		t.Fatalf("%d rounds, want %d", len(c.Rounds), rounds)
	}
	for i, r := range c.Rounds {
		if r.StatefulFirst != (i%2 == 1) {
			t.Errorf("round %d: stateful first %v", i+1, r.StatefulFirst)
		}
		for _, side := range []*benchrun.Result{r.Stateless, r.Stateful} {
			stateful := side == r.Stateful
			if side.Messages != n || side.Sent != n || side.Failed != 0 {
				t.Errorf("round %d, stateful %v: messages %d, sent %d, failed %d; want %d, %d, 0", i+1, stateful, side.Messages, side.Sent, side.Failed, n, n)
			}
			c, h := side.Conditions, side.Conditions.Handler
			if c.Keys != keys || c.SubscriptionType != "Exclusive" || h == nil || h.State != stateful {
				t.Errorf("round %d, stateful %v: keys %d, subscription type %q, handler %+v", i+1, stateful, c.Keys, c.SubscriptionType, h)
			}
		}
		if r.Stateful.StateKeysChecked != checked || r.Stateless.StateKeysChecked != 0 {
			t.Errorf("round %d: keys checked %d stateful, %d stateless; want %d and 0", i+1, r.Stateful.StateKeysChecked, r.Stateless.StateKeysChecked, checked)
		}
		if r.Stateful.Conditions.Topic == r.Stateless.Conditions.Topic {
			t.Errorf("round %d: both sides on %s", i+1, r.Stateful.Conditions.Topic)
		}
		if want := r.Stateful.MsgPerSec / r.Stateless.MsgPerSec; r.MsgPerSecRatio != want || want <= 0 {
			t.Errorf("round %d: msg/s ratio %v, want %v", i+1, r.MsgPerSecRatio, want)
		}
		if want := r.Stateless.CPUMicrosPerMessageAll() / r.Stateful.CPUMicrosPerMessageAll(); r.CPUPerMessageRatio != want || want <= 0 {
			t.Errorf("round %d: CPU ratio %v, want %v", i+1, r.CPUPerMessageRatio, want)
		}
	}
	for _, sp := range []benchrun.Spread{c.MsgPerSecRatio, c.CPUPerMessageRatio} {
		if !(0 < sp.Min && sp.Min <= sp.Median && sp.Median <= sp.Max) {
			t.Errorf("spread %+v", sp)
		}
	}
}

// bench pipeline --state runs the pipeline with keyed state and without,
// side by side, and checks the counts: in process, two rounds; then
// under exactly_once, two pipelines each with a changelog of its own
// (7 keys over 2 topics: every key on both), as text.
func TestBenchPipelineState(t *testing.T) {
	c := runBenchCompare(t, "--in-process", "--count", "3000", "--keys", "100", "--size", "100", "--rounds", "2", "--memory")
	checkBenchCompare(t, c, 2, 3000, 100, 100)
	if cfg := c.Rounds[0].Stateful.Conditions.Handler; cfg.Kind != "in-process" || cfg.Guarantee != "at_least_once" {
		t.Errorf("handler %+v", cfg)
	}

	code, out, errs := runArgs("bench", "pipeline", "--state", "--in-process", "--count", "1400", "--keys", "7", "--size", "100",
		"--pipelines", "2", "--guarantee", "exactly_once", "--memory", "--progress", "0")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, errs)
	}
	for _, want := range []string{"== round 1 of 1: stateless\n", "== round 1 of 1: keyed state\n", "exactly_once",
		"keyed state: a count per key, 14 key(s) checked against the changelog", "round 1 (stateless first): ",
		"keyed state / stateless, median of 1 round(s): msg/s "} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
}

// With the counter in a plugin process (`streamrun bench handler`, so
// the streamrun binary), the CPU a message counts the plugin's too.
func TestBenchPipelineStatePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds streamrun: not in -short")
	}
	bin := buildStreamrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "bench", "pipeline", "--state", "--count", "20000", "--size", "100", "--memory", "--output", "json", "--progress", "0").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("streamrun bench pipeline --state: %v\n%s", err, stderr)
	}
	var c benchrun.Comparison
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	checkBenchCompare(t, c, 1, 20000, 10000, 10000)
	for _, side := range []*benchrun.Result{c.Rounds[0].Stateless, c.Rounds[0].Stateful} {
		if h := side.Conditions.Handler; h.Kind != "plugin" || h.Plugin != bin || side.HandlerCPUSeconds <= 0 || side.HandlerRSSBytes <= 0 {
			t.Errorf("handler %+v, its CPU %vs, RSS %d: want the plugin %s measured", h, side.HandlerCPUSeconds, side.HandlerRSSBytes, bin)
		}
	}
}

// benchStateAgainstURL checks --state against a broker at url (its admin
// API at admin): the topics the run named itself, changelogs included,
// are deleted at the end; on a --topic of the user's kept from one run
// to the next, the second run's counts go on from the first's.
func benchStateAgainstURL(t *testing.T, url, adminURL string) {
	target := []string{"--url", url, "--admin-url", adminURL, "--in-process", "--size", "100", "--keys", "50"}
	c := runBenchCompare(t, append(target, "--count", "1000")...)
	checkBenchCompare(t, c, 1, 1000, 50, 50)
	st := c.Rounds[0].Stateful
	if cl := st.Conditions.Topic + "-state"; !slices.Contains(st.TopicsDeleted, cl) || topicExists(t, adminURL, cl) {
		t.Errorf("deleted %v, want the changelog %s gone", st.TopicsDeleted, cl)
	}

	topic := "persistent://public/default/bench-state-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	kept := append(target, "--topic", topic, "--keep-topic")
	t.Cleanup(func() {
		a, err := admin.New(admin.Options{URL: adminURL})
		if err != nil {
			return
		}
		defer a.Close()
		for _, s := range []string{"-stateless", "-stateless-out", "-stateful", "-stateful-out", "-stateful-state"} {
			_, _ = a.DeleteTopic(context.Background(), topic+s, true)
		}
	})
	checkBenchCompare(t, runBenchCompare(t, append(kept, "--count", "500")...), 1, 500, 50, 50)
	// The changelog holds 10 a key now; 20 after this run, which the
	// check at its end asks of every key.
	checkBenchCompare(t, runBenchCompare(t, append(kept, "--count", "500")...), 1, 500, 50, 50)
}

func TestBenchStateAgainstURL(t *testing.T) {
	c := brokertest.Start(t)
	benchStateAgainstURL(t, c.ServiceURL(), c.AdminURL())
}

// The same against Apache Pulsar (STREAMRUN_PULSAR_URL and
// STREAMRUN_PULSAR_HTTP).
func TestBenchStateApachePulsar(t *testing.T) {
	url, admin := apachePulsar(t)
	benchStateAgainstURL(t, url, admin)
}
