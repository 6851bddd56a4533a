package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkProcess measures a Process round trip to a plugin process (the
// test binary's echo handler: every message acked with one output of the
// same payload), for batches of 100-byte messages. ns/msg is the cost per
// message of the whole trip: encode, gRPC over mTLS on a unix socket,
// decode, handle, and back.
func BenchmarkProcess(b *testing.B) {
	inst := start(b, selfPlugin(b, "sdk", nil), `{"mode":"echo"}`)
	benchBatches(b, inst.Process)
}

// BenchmarkProcessLocal is the same handler run in the host's process
// (ProcessLocal), the baseline for BenchmarkProcess.
func BenchmarkProcessLocal(b *testing.B) {
	h := &testHandler{mode: "echo"}
	benchBatches(b, func(ctx context.Context, batch []*Message) ([]Result, error) {
		return ProcessLocal(ctx, h, batch)
	})
}

func benchBatches(b *testing.B, process func(context.Context, []*Message) ([]Result, error)) {
	payload := strings.Repeat("p", 100)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			batch := make([]*Message, n)
			for i := range batch {
				batch[i] = &Message{
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
			for b.Loop() {
				res, err := process(ctx, batch)
				if err != nil || len(res) != n {
					b.Fatalf("%d results, %v", len(res), err)
				}
			}
			perMsg := float64(b.Elapsed().Nanoseconds()) / float64(b.N*n)
			b.ReportMetric(perMsg, "ns/msg")
			b.ReportMetric(1e9/perMsg, "msg/s")
		})
	}
}
