package host

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// BenchmarkHostCodec is the host's CPU per batch of the batch channel
// without the channel: encode a Batch of 100-byte messages, decode and
// check an echo handler's answer (one output per message).
// BenchmarkProcess is the whole round trip.
func BenchmarkHostCodec(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			payload := []byte(strings.Repeat("p", 100))
			batch := make([]*plugin.Message, n)
			answer := &pb.BatchResult{Seq: 1}
			for i := range batch {
				batch[i] = &plugin.Message{ID: fmt.Sprintf("1:%d:-1:-1", i), Topic: "persistent://public/default/bench",
					Key: fmt.Sprintf("key-%d", i%16), Payload: payload, PublishTime: time.UnixMilli(1_700_000_000_000)}
				answer.Results = append(answer.Results, &pb.Result{Index: uint32(i), Outcome: pb.Outcome_OUTCOME_ACK,
					Outputs: []*pb.Output{{Topic: "out", Key: []byte(batch[i].Key), Payload: payload}}})
			}
			frame, err := proto.Marshal(answer)
			if err != nil {
				b.Fatal(err)
			}
			inst := &Instance{name: "bench"}
			var out []byte
			var in resultsIn // recycled, as batchStream does
			b.ReportAllocs()
			cpu0 := cpuTime(0)
			for b.Loop() {
				wb := batchOut{msgs: batch, seq: 1, timeoutMs: 30000}
				out = wb.Append(out[:0])
				if err := in.Decode(frame); err != nil {
					b.Fatal(err)
				}
				if _, err := inst.decodeResults(batch, &in); err != nil {
					b.Fatal(err)
				}
			}
			// CPU, not wall: on a shared machine the wall time is mostly
			// the wait for a core.
			b.ReportMetric(float64(cpuTime(0)-cpu0)/float64(b.N*n), "cpu-ns/msg")
		})
	}
}
