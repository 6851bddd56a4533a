package host

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

// BenchmarkProcess measures a Process round trip to a plugin process (the
// test binary's echo handler: every message acked with one output of the
// same payload), for batches of 100-byte messages. ns/msg is the cost per
// message of the whole trip: encode, the batch channel (contract version
// 2, which the SDK negotiates), decode, handle, and back.
func BenchmarkProcess(b *testing.B) {
	inst := start(b, selfPlugin(b, "sdk", nil), `{"mode":"echo"}`)
	// Closed, not only killed: the plugin then ends its CPU profile
	// (STREAMRUN_PLUGIN_TEST_CPUPROFILE, see TestMain).
	b.Cleanup(func() { _ = inst.Close(context.Background()) })
	benchBatches(b, inst.Pid(), inst.Process, inst.Recycle)
}

// BenchmarkProcessLocal is the same handler run in the host's process
// (ProcessLocal), the baseline for BenchmarkProcess.
func BenchmarkProcessLocal(b *testing.B) {
	h := &testHandler{mode: "echo"}
	benchBatches(b, 0, func(ctx context.Context, batch []*plugin.Message) ([]plugin.Result, error) {
		return ProcessLocal(ctx, h, batch)
	}, nil)
}

// benchBatches runs process over batches; pid is the plugin's process, 0
// for none; recycle, when not nil, takes the results back as the runtime
// does once it has settled them. cpu-µs/msg is the CPU time of the test
// process and of the plugin's, per message.
func benchBatches(b *testing.B, pid int, process func(context.Context, []*plugin.Message) ([]plugin.Result, error),
	recycle func([]plugin.Result)) {
	payload := strings.Repeat("p", 100)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			batch := make([]*plugin.Message, n)
			for i := range batch {
				batch[i] = &plugin.Message{
					ID:          fmt.Sprintf("1:%d:-1:-1", i),
					Topic:       "persistent://public/default/bench",
					Key:         fmt.Sprintf("key-%d", i%16),
					Payload:     []byte(payload),
					PublishTime: time.UnixMilli(1_700_000_000_000),
				}
			}
			ctx := context.Background()
			b.SetBytes(int64(n * len(payload)))
			b.ReportAllocs()
			cpu0 := cpuTime(pid)
			for b.Loop() {
				res, err := process(ctx, batch)
				if err != nil || len(res) != n {
					b.Fatalf("%d results, %v", len(res), err)
				}
				if recycle != nil {
					recycle(res)
				}
			}
			perMsg := float64(b.Elapsed().Nanoseconds()) / float64(b.N*n)
			b.ReportMetric(perMsg, "ns/msg")
			b.ReportMetric(1e9/perMsg, "msg/s")
			b.ReportMetric(float64(cpuTime(pid)-cpu0)/float64(time.Microsecond)/float64(b.N*n), "cpu-µs/msg")
		})
	}
}

// cpuTime is the CPU time (user and system) used so far by this process
// and by process pid (0 for none).
func cpuTime(pid int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if pid == 0 {
		return d
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return d
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15 of stat, in clock ticks (100 a
	// second on Linux).
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return d + time.Duration(ut+st)*10*time.Millisecond
}
