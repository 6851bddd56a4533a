package functions

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// result is what scripts/bench-functions --json writes.
type result struct {
	Schema     string           `json:"schema"`
	Conditions map[string]any   `json:"conditions"`
	Throughput []throughputRow  `json:"throughput"`
	Summary    []summaryRow     `json:"summary"`
	Latency    []latencyRow     `json:"latency"`
	Complete   bool             `json:"complete"`
	raw        map[string]any   // the same, undecoded, for field checks
	rawRows    []map[string]any // throughput rows, undecoded
}

type throughputRow struct {
	Side         string    `json:"side"`
	Lang         string    `json:"lang"`
	MessageSize  int       `json:"message_size"`
	Instances    int       `json:"instances"`
	Backlog      int       `json:"backlog"`
	Round        int       `json:"round"`
	Order        int       `json:"order"`
	Outputs      int       `json:"outputs"`
	Steady       float64   `json:"steady_msg_per_sec"`
	StartToLast  float64   `json:"start_to_last_output_seconds"`
	CPU          float64   `json:"cpu_seconds"`
	CPUPerMsg    float64   `json:"cpu_us_per_message"`
	RSS          int64     `json:"rss_bytes"`
	Processes    int       `json:"processes"`
	PulsarCPU    float64   `json:"pulsar_cpu_seconds"`
	LoadAvgAtEnd []float64 `json:"load_average_end"`
}

type sideSummary struct {
	Rounds      int     `json:"rounds"`
	Steady      float64 `json:"steady_msg_per_sec"`
	StartToLast float64 `json:"start_to_last_output_seconds"`
	CPU         float64 `json:"cpu_seconds"`
	RSS         float64 `json:"rss_bytes"`
	PulsarCPU   float64 `json:"pulsar_cpu_seconds"`
}

type summaryRow struct {
	Lang        string             `json:"lang"`
	MessageSize int                `json:"message_size"`
	Instances   int                `json:"instances"`
	Function    *sideSummary       `json:"function"`
	Streamrun   *sideSummary       `json:"streamrun"`
	Ratios      map[string]float64 `json:"ratios"`
	TargetsMet  map[string]bool    `json:"targets_met"`
}

type latencyRow struct {
	Side         string    `json:"side"`
	Lang         string    `json:"lang"`
	Rate         int       `json:"rate"`
	MessageSize  int       `json:"message_size"`
	BatchWait    *string   `json:"batch_wait"`
	Messages     int       `json:"messages"`
	Sent         int       `json:"sent"`
	LatencyFrom  string    `json:"latency_from"`
	P50          float64   `json:"p50_ms"`
	P99          float64   `json:"p99_ms"`
	Max          float64   `json:"max_ms"`
	Mean         float64   `json:"mean_ms"`
	LoadAvgAtEnd []float64 `json:"load_average_end"`
}

// The short form's settings (scripts/bench-functions --short).
const (
	shortCount      = 20000
	shortPyCount    = 5000
	shortSize       = 100
	shortRate       = 200
	shortLatSeconds = 2
)

var shortBatchWaits = []string{"10ms", "1ms"}

// TestBenchFunctionsShort runs scripts/bench-functions --short: both
// languages, both sides, every throughput and latency phase, on a
// standalone with the functions worker; every field of its JSON must be
// there and hold what the run did.
func TestBenchFunctionsShort(t *testing.T) {
	// A result --short wrote before, checked without running it again.
	if path := os.Getenv("STREAMRUN_BENCH_FUNCTIONS_RESULT"); path != "" {
		r := readResult(t, path)
		checkConditions(t, r)
		checkThroughput(t, r)
		checkSummary(t, r)
		checkLatency(t, r)
		return
	}
	if os.Getenv("STREAMRUN_BENCH_FUNCTIONS") != "1" {
		t.Skip("set STREAMRUN_BENCH_FUNCTIONS=1 to run scripts/bench-functions --short (needs Java, Python and the Apache Pulsar distribution; starts a standalone with the functions worker)")
	}
	script, err := filepath.Abs("../../scripts/bench-functions")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "result.json")
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "--short", "--json", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("scripts/bench-functions --short:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("scripts/bench-functions --short: %v\nstderr:\n%s", err, stderr.String())
	}
	r := readResult(t, out)
	checkConditions(t, r)
	checkThroughput(t, r)
	checkSummary(t, r)
	checkLatency(t, r)
}

func readResult(t *testing.T, path string) *result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := json.Unmarshal(b, &r.raw); err != nil {
		t.Fatal(err)
	}
	var rows struct {
		Throughput []map[string]any `json:"throughput"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	r.rawRows = rows.Throughput
	for _, f := range []string{"schema", "conditions", "throughput", "summary", "latency", "complete"} {
		if _, ok := r.raw[f]; !ok {
			t.Errorf("the result lacks %s", f)
		}
	}
	if r.Schema != "streamrun.bench-functions/v1" || !r.Complete {
		t.Errorf("schema %q, complete %v", r.Schema, r.Complete)
	}
	return &r
}

func checkConditions(t *testing.T, r *result) {
	t.Helper()
	c := r.Conditions
	for _, f := range []string{"started_at", "cpu_model", "kernel", "go_version", "java_version", "python_version",
		"python_client", "streamrun_version", "pulsar", "pulsar_url", "pulsar_conf", "pulsar_jvm_memory", "page_cache"} {
		if s, _ := c[f].(string); s == "" {
			t.Errorf("conditions.%s is %v, want a text", f, c[f])
		}
	}
	for _, f := range []string{"load_average_before", "load_average_after"} {
		if l, _ := c[f].([]any); len(l) != 3 {
			t.Errorf("conditions.%s is %v, want 3 averages", f, c[f])
		}
	}
	if n, _ := c["cores"].(float64); n < 1 {
		t.Errorf("conditions.cores %v", c["cores"])
	}
	if g, _ := c["memory_gib"].(float64); g <= 0 {
		t.Errorf("conditions.memory_gib %v", c["memory_gib"])
	}
	if _, ok := c["journal_sync_data"].(bool); !ok {
		t.Errorf("conditions.journal_sync_data %v, want a bool", c["journal_sync_data"])
	}
	// Started here, or already running (null): either is a field.
	if v, ok := c["standalone_start_seconds"]; !ok || (v != nil && v.(float64) <= 0) {
		t.Errorf("conditions.standalone_start_seconds %v (present %v)", v, ok)
	}
	if rounds, _ := c["rounds"].(float64); rounds != 1 {
		t.Errorf("conditions.rounds %v, want 1", c["rounds"])
	}
	backlog, _ := c["backlog"].(map[string]any)
	if backlog["java"] != float64(shortCount) || backlog["python"] != float64(shortPyCount) {
		t.Errorf("conditions.backlog %v", c["backlog"])
	}
	for f, want := range map[string]int{"message_sizes": 1, "instances": 1, "langs": 2} {
		if l, _ := c[f].([]any); len(l) != want {
			t.Errorf("conditions.%s %v, want %d", f, c[f], want)
		}
	}
	fn, _ := c["function"].(map[string]any)
	for _, f := range []string{"runtime", "processing_guarantees", "subscription_position", "output_compression", "java_class", "python_class"} {
		if s, _ := fn[f].(string); s == "" {
			t.Errorf("conditions.function.%s missing", f)
		}
	}
	sr, _ := c["streamrun"].(map[string]any)
	for _, f := range []string{"subscription_type", "initial_position", "batch_wait", "go_handler", "python_handler"} {
		if s, _ := sr[f].(string); s == "" {
			t.Errorf("conditions.streamrun.%s missing", f)
		}
	}
	if sr["batch_size"] != float64(100) {
		t.Errorf("conditions.streamrun.batch_size %v", sr["batch_size"])
	}
	lat, _ := c["latency"].(map[string]any)
	if rates, _ := lat["rates"].([]any); len(rates) != 1 || rates[0] != float64(shortRate) {
		t.Errorf("conditions.latency.rates %v", lat["rates"])
	}
	if lat["seconds"] != float64(shortLatSeconds) || lat["message_size"] != float64(shortSize) {
		t.Errorf("conditions.latency %v", lat)
	}
	if w, _ := lat["batch_waits"].([]any); len(w) != len(shortBatchWaits) {
		t.Errorf("conditions.latency.batch_waits %v", lat["batch_waits"])
	}
	if s, _ := lat["load"].(string); s == "" {
		t.Error("conditions.latency.load missing")
	}
}

var throughputFields = []string{"side", "lang", "message_size", "instances", "backlog", "round", "order", "outputs",
	"steady_msg_per_sec", "start_to_last_output_seconds", "cpu_seconds", "cpu_us_per_message", "rss_bytes",
	"processes", "pulsar_cpu_seconds", "load_average_end"}

func checkThroughput(t *testing.T, r *result) {
	t.Helper()
	if len(r.Throughput) != 4 {
		t.Fatalf("%d throughput phases, want 4 (2 languages × 2 sides)", len(r.Throughput))
	}
	for i, raw := range r.rawRows {
		for _, f := range throughputFields {
			if _, ok := raw[f]; !ok {
				t.Errorf("throughput[%d] lacks %s", i, f)
			}
		}
	}
	seen := map[string]int{}
	for i, p := range r.Throughput {
		backlog := shortCount
		if p.Lang == "python" {
			backlog = shortPyCount
		}
		seen[p.Lang+"/"+p.Side]++
		if p.MessageSize != shortSize || p.Instances != 1 || p.Round != 1 || p.Backlog != backlog || p.Outputs != backlog {
			t.Errorf("throughput[%d]: %+v, want %d of %d B, 1 instance, round 1, every output", i, p, backlog, shortSize)
		}
		if p.Order != 1 && p.Order != 2 {
			t.Errorf("throughput[%d]: order %d", i, p.Order)
		}
		if p.Steady <= 0 || p.StartToLast <= 0 || p.CPU <= 0 || p.RSS <= 0 || p.PulsarCPU < 0 || len(p.LoadAvgAtEnd) != 3 {
			t.Errorf("throughput[%d]: a figure is missing: %+v", i, p)
		}
		if want := p.CPU / float64(backlog) * 1e6; math.Abs(p.CPUPerMsg-want) > 0.02*want+0.01 {
			t.Errorf("throughput[%d]: %.2f µs a message, want CPU over outputs, %.2f", i, p.CPUPerMsg, want)
		}
		// One instance: the Function's one instance process; streamrun's
		// host and its one handler process.
		wantProcs := map[string]int{"function": 1, "streamrun": 2}[p.Side]
		if p.Processes != wantProcs {
			t.Errorf("throughput[%d]: %s %s measured %d processes, want %d", i, p.Side, p.Lang, p.Processes, wantProcs)
		}
	}
	for _, k := range []string{"java/function", "java/streamrun", "python/function", "python/streamrun"} {
		if seen[k] != 1 {
			t.Errorf("%d phases of %s, want 1", seen[k], k)
		}
	}
	// The two sides of a configuration ran one after the other.
	for i := 0; i+1 < len(r.Throughput); i += 2 {
		a, b := r.Throughput[i], r.Throughput[i+1]
		if a.Lang != b.Lang || a.Side == b.Side || a.Order != 1 || b.Order != 2 {
			t.Errorf("phases %d and %d are not the two sides of one configuration: %+v %+v", i, i+1, a, b)
		}
	}
}

func checkSummary(t *testing.T, r *result) {
	t.Helper()
	if len(r.Summary) != 2 {
		t.Fatalf("%d summary rows, want 2", len(r.Summary))
	}
	for _, s := range r.Summary {
		if s.Function == nil || s.Streamrun == nil || s.Function.Rounds != 1 || s.Streamrun.Rounds != 1 {
			t.Errorf("summary %s: sides %+v %+v", s.Lang, s.Function, s.Streamrun)
			continue
		}
		find := func(side string) throughputRow {
			for _, p := range r.Throughput {
				if p.Lang == s.Lang && p.Side == side {
					return p
				}
			}
			t.Fatalf("no %s phase of %s", side, s.Lang)
			return throughputRow{}
		}
		f, o := find("function"), find("streamrun")
		// One round: the medians are the phases' figures, the ratios theirs.
		want := map[string]float64{
			"steady_rate":          o.Steady / f.Steady,
			"start_to_last_output": o.StartToLast / f.StartToLast,
			"cpu":                  o.CPU / f.CPU,
			"rss":                  float64(o.RSS) / float64(f.RSS),
		}
		for k, w := range want {
			got, ok := s.Ratios[k]
			if !ok || math.Abs(got-w) > 0.006+0.001*w {
				t.Errorf("summary %s: ratio %s %v (present %v), want %.3f", s.Lang, k, got, ok, w)
			}
		}
		for k, limit := range map[string]float64{"steady_rate": 1.3, "cpu": 0.3, "rss": 0.25} {
			met, ok := s.TargetsMet[k]
			wantMet := s.Ratios[k] >= limit
			if k != "steady_rate" {
				wantMet = s.Ratios[k] <= limit
			}
			if !ok || met != wantMet {
				t.Errorf("summary %s: targets_met.%s %v (present %v), ratio %v", s.Lang, k, met, ok, s.Ratios[k])
			}
		}
		if s.Function.Steady != f.Steady || s.Streamrun.CPU != o.CPU || s.Streamrun.RSS != float64(o.RSS) || s.Function.PulsarCPU != f.PulsarCPU {
			t.Errorf("summary %s: medians of one round differ from the round: %+v %+v", s.Lang, s.Function, s.Streamrun)
		}
	}
}

func checkLatency(t *testing.T, r *result) {
	t.Helper()
	want := 2 * (1 + len(shortBatchWaits))
	if len(r.Latency) != want {
		t.Fatalf("%d latency phases, want %d", len(r.Latency), want)
	}
	waits := map[string]int{}
	for i, l := range r.Latency {
		n := shortRate * shortLatSeconds
		if l.Rate != shortRate || l.MessageSize != shortSize || l.Messages != n || l.Sent != n {
			t.Errorf("latency[%d]: %+v, want %d messages at %d msg/s, all sent and arrived", i, l, n, shortRate)
		}
		if l.LatencyFrom != "payload_timestamp" {
			t.Errorf("latency[%d]: measured from %q, want the payload's publish time", i, l.LatencyFrom)
		}
		if !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.Max && l.Mean > 0) || len(l.LoadAvgAtEnd) != 3 {
			t.Errorf("latency[%d]: p50 %v p99 %v max %v mean %v", i, l.P50, l.P99, l.Max, l.Mean)
		}
		switch l.Side {
		case "function":
			if l.BatchWait != nil {
				t.Errorf("latency[%d]: a Function with batch_wait %q", i, *l.BatchWait)
			}
		case "streamrun":
			if l.BatchWait == nil {
				t.Errorf("latency[%d]: streamrun without its batch_wait", i)
			} else {
				waits[l.Lang+"/"+*l.BatchWait]++
			}
		default:
			t.Errorf("latency[%d]: side %q", i, l.Side)
		}
	}
	for _, lang := range []string{"java", "python"} {
		for _, w := range shortBatchWaits {
			if waits[lang+"/"+w] != 1 {
				t.Errorf("%d latency phases of streamrun %s with batch_wait %s, want 1", waits[lang+"/"+w], lang, w)
			}
		}
	}
}
