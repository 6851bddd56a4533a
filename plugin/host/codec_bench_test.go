package host

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// BenchmarkHostCodec is the host's CPU per batch of the batch channel
// without the channel: encode a Batch of 100-byte messages, decode and
// check an echo handler's answer (one output per message), in full
// (contract versions 1 and 2) or compact (version 3). BenchmarkProcess is
// the whole round trip.
func BenchmarkHostCodec(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, compact := range []bool{false, true} {
			form := "full"
			if compact {
				form = "compact"
			}
			b.Run(fmt.Sprintf("answer=%s/batch=%d", form, n), func(b *testing.B) { benchHostCodec(b, n, compact) })
		}
	}
}

func benchHostCodec(b *testing.B, n int, compact bool) {
	{
		{
			payload := []byte(strings.Repeat("p", 100))
			batch := make([]*plugin.Message, n)
			answer := &pb.BatchResult{Seq: 1}
			for i := range batch {
				batch[i] = &plugin.Message{ID: fmt.Sprintf("1:%d:-1:-1", i), Topic: "persistent://public/default/bench",
					Key: fmt.Sprintf("key-%d", i%16), Payload: payload, PublishTime: time.UnixMilli(1_700_000_000_000)}
				answer.Results = append(answer.Results, &pb.Result{Index: uint32(i), Outcome: pb.Outcome_OUTCOME_ACK,
					Outputs: []*pb.Output{{Topic: "out", Key: []byte(batch[i].Key), Payload: payload}}})
			}
			if compact {
				answer = &pb.BatchResult{Seq: 1, EchoTopic: "out", Outcomes: bytes.Repeat([]byte{wire.CompactEcho}, n)}
			}
			frame, err := proto.Marshal(answer)
			if err != nil {
				b.Fatal(err)
			}
			inst := &Instance{name: "bench"}
			var out []byte
			in := resultsIn{compact: compact} // recycled, as batchStream does
			b.ReportAllocs()
			cpu0 := cpuTime(0)
			for b.Loop() {
				wb := batchOut{batch: Messages(batch), seq: 1, timeoutMs: 30000}
				out = wb.Append(out[:0])
				if err := in.Decode(frame); err != nil {
					b.Fatal(err)
				}
				res, err := inst.decodeResults(Messages(batch), &in)
				if err != nil {
					b.Fatal(err)
				}
				inst.Recycle(res) // as the runtime does once it has settled them
			}
			// CPU, not wall: on a shared machine the wall time is mostly
			// the wait for a core.
			b.ReportMetric(float64(cpuTime(0)-cpu0)/float64(b.N*n), "cpu-ns/msg")
		}
	}
}
