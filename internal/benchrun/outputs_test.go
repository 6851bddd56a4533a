package benchrun

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/pool"
)

// TestPipelineOutputsPerInput measures what outputs per input cost
// (docs/benchmarks/exactly-once.md): the pipeline of `streamrun bench
// pipeline` with the identity handler in this process making 1, 2 and 4
// outputs of each message (HandlerOptions.Copies), at least once and
// exactly once, rounds alternating. Only with STREAMRUN_BENCH=1:
//
//	STREAMRUN_BENCH=1 go test ./internal/benchrun -run OutputsPerInput -v
//	STREAMRUN_BENCH=1 STREAMRUN_BENCH_URL=pulsar://127.0.0.1:6681 go test ./internal/benchrun -run OutputsPerInput -v
//
// Embedded broker (durability write) unless STREAMRUN_BENCH_URL names one
// with transactions on (its admin API STREAMRUN_BENCH_ADMIN_URL, default
// http://127.0.0.1:8281, deletes the topics); STREAMRUN_BENCH_COUNT is the messages published a
// run (default 200000), STREAMRUN_BENCH_ROUNDS the rounds (default 1).
func TestPipelineOutputsPerInput(t *testing.T) {
	if os.Getenv("STREAMRUN_BENCH") != "1" {
		t.Skip("set STREAMRUN_BENCH=1 to measure the cost of outputs per input")
	}
	url := os.Getenv("STREAMRUN_BENCH_URL")
	count := envInt64("STREAMRUN_BENCH_COUNT", 200000)
	rounds := int(envInt64("STREAMRUN_BENCH_ROUNDS", 1))
	var out strings.Builder
	broker := url
	if broker == "" {
		broker = "embedded"
	}
	fmt.Fprintf(&out, "pipeline, identity handler in process, 100 B, batch 100, commit interval 100 ms; %d messages a run; %s; GOMAXPROCS %d\n",
		count, broker, runtime.GOMAXPROCS(0))
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "outputs/input\tguarantee\tinputs/s\toutputs/s\tCPU µs/input\tCPU µs/output\t")
	for round := 0; round < rounds; round++ {
		for _, copies := range []int{1, 2, 4} {
			for _, exactly := range []bool{false, true} {
				r := runOutputs(t, url, count, copies, exactly)
				g := "at_least_once"
				if exactly {
					g = "exactly_once"
				}
				c := float64(copies)
				fmt.Fprintf(w, "%d\t%s\t%.0f\t%.0f\t%.2f\t%.2f\t\n", copies, g, r.MsgPerSec/c, r.MsgPerSec, r.CPUMicrosPerMessage*c, r.CPUMicrosPerMessage)
			}
		}
	}
	w.Flush()
	t.Log("\n" + out.String())
	fmt.Print(out.String())
}

func runOutputs(t *testing.T, url string, count int64, copies int, exactly bool) *Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	adminURL := os.Getenv("STREAMRUN_BENCH_ADMIN_URL")
	if adminURL == "" {
		adminURL = "http://127.0.0.1:8281"
	}
	// Run deletes the topics it named against a URL, through the admin API.
	r, err := Run(ctx, KindPipeline, Options{
		ServiceURL:     url,
		Client:         func(u string) (pool.Options, error) { return pool.Options{ServiceURL: u}, nil },
		Admin:          admin.Options{URL: adminURL},
		ConnectTimeout: 30 * time.Second, CloseTimeout: 30 * time.Second, DrainTimeout: 2 * time.Minute,
		Size: 100, Count: count, Subscription: "bench", ReceiverQueue: 1000,
		Handler: HandlerOptions{InProcess: true, Identity: []string{"in-process"}, BatchSize: 100, Instances: 1,
			ExactlyOnce: exactly, CommitInterval: 100 * time.Millisecond, Copies: copies},
	})
	if err != nil {
		t.Fatalf("%d outputs an input, exactly once %v: %v", copies, exactly, err)
	}
	if want := count * int64(copies); r.Messages != want {
		t.Fatalf("%d outputs received, want %d", r.Messages, want)
	}
	return r
}

func envInt64(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return def
}
