package plugin

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// BenchmarkPluginCodec is the plugin's CPU per batch of the batch
// channel without the channel: decode a Batch of 100-byte messages into
// a worker's arrays, run an echo handler (one output per message, the
// payload), encode the answer: in full (contract versions 1 and 2) or
// compact (version 3). plugin/host's BenchmarkProcess is the whole round
// trip.
func BenchmarkPluginCodec(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, compact := range []bool{false, true} {
			b.Run(fmt.Sprintf("answer=%s/batch=%d", answerForm(compact), n), func(b *testing.B) {
				benchPluginCodec(b, n, compact)
			})
		}
	}
}

func answerForm(compact bool) string {
	if compact {
		return "compact"
	}
	return "full"
}

func benchPluginCodec(b *testing.B, n int, compact bool) {
	{
		{
			frame := benchBatchFrame(b, n)
			echo := HandlerFunc(func(_ context.Context, w ResultWriter, batch []*Message) error {
				for _, m := range batch {
					w.Output(m, Output{Topic: "out", Key: m.Key, Payload: m.Payload})
				}
				return nil
			})
			sc := new(scratch)
			var out []byte
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				var in batchIn
				if err := in.decode(frame, sc); err != nil {
					b.Fatal(err)
				}
				res, p, herr := handle(context.Background(), echo, in.msgs, sc)
				if herr != nil || p != nil {
					b.Fatal(herr, p)
				}
				r := resultsOut{res: res, seq: in.seq, sizes: sc.sizes, codes: sc.codes, msgs: in.msgs, compact: compact}
				var err error
				if out, err = wire.AppendFrame(out[:0], &r); err != nil {
					b.Fatal(err)
				}
				sc.sizes, sc.codes = r.sizes, r.codes
			}
			// CPU, not wall: on a shared machine the wall time is mostly
			// the wait for a core.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/msg")
			b.ReportMetric(float64(len(out))/float64(n), "answer-B/msg")
		}
	}
}

// benchBatchFrame is a Batch of n messages as the host sends them.
func benchBatchFrame(b testing.TB, n int) []byte {
	batch := &pb.Batch{Seq: 1, TimeoutMs: 30000}
	payload := []byte(strings.Repeat("p", 100))
	for i := range n {
		batch.Messages = append(batch.Messages, &pb.Message{Id: fmt.Sprintf("1:%d:-1:-1", i),
			Topic: "persistent://public/default/bench", Key: []byte(fmt.Sprintf("key-%d", i%16)),
			Payload: payload, PublishTimeMs: time.UnixMilli(1_700_000_000_000).UnixMilli()})
	}
	frame, err := proto.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	return frame
}

// processCPU is the CPU time (user and system) of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPluginKeyedCounter is BenchmarkPluginCodec for a batch that
// comes with keyed state (pipelines with a state block): decode a Batch
// of 100 messages of distinct keys with their counts, run a counter
// (GetJSON, PutJSON of the count plus one, one output of a payload of its
// own, as runtime's BenchmarkKeyedStateCounter's handler does), encode
// the answer (contract version 4). The plugin's share of keyed state's cost; "echo" is
// BenchmarkPluginCodec's compact echo of the same batch without state.
func BenchmarkPluginKeyedCounter(b *testing.B) {
	for _, counter := range []bool{false, true} {
		name := "echo"
		if counter {
			name = "counter"
		}
		b.Run(name, func(b *testing.B) {
			const n = 100
			batch := &pb.Batch{Seq: 1, TimeoutMs: 30000}
			payload := []byte(strings.Repeat("p", 100))
			for i := range n {
				k := fmt.Sprintf("key-%05d", i*37)
				batch.Messages = append(batch.Messages, &pb.Message{Id: fmt.Sprintf("1:%d:-1:-1", i),
					Topic: "persistent://public/default/bench", Key: []byte(k),
					Payload: payload, PublishTimeMs: time.UnixMilli(1_700_000_000_000).UnixMilli()})
				if counter {
					batch.State = append(batch.State, &pb.StateEntry{Key: []byte(k), Value: []byte("123")})
				}
			}
			frame, err := proto.Marshal(batch)
			if err != nil {
				b.Fatal(err)
			}
			h := HandlerFunc(func(_ context.Context, w ResultWriter, batch []*Message) error {
				for _, m := range batch {
					if !counter {
						w.Output(m, Output{Topic: "out", Key: m.Key, Payload: m.Payload})
						continue
					}
					var c int
					if _, err := m.State().GetJSON(&c); err != nil {
						return err
					}
					if err := m.State().PutJSON(c + 1); err != nil {
						return err
					}
					w.Output(m, Output{Topic: "out", Key: m.Key, Payload: fmt.Appendf(nil, "%s=%d", m.Key, c+1)})
				}
				return nil
			})
			sc := new(scratch)
			var out []byte
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				var in batchIn
				if err := in.decode(frame, sc); err != nil {
					b.Fatal(err)
				}
				if counter {
					sc.state.reset(in.state, len(in.msgs))
					sc.state.attach(in.msgs)
				}
				res, p, herr := handle(context.Background(), h, in.msgs, sc)
				if herr != nil || p != nil {
					b.Fatal(herr, p)
				}
				r := resultsOut{res: res, seq: in.seq, sizes: sc.sizes, codes: sc.codes, msgs: in.msgs, compact: true, compactState: true}
				if out, err = wire.AppendFrame(out[:0], &r); err != nil {
					b.Fatal(err)
				}
				sc.sizes, sc.codes = r.sizes, r.codes
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/msg")
			b.ReportMetric(float64(len(out))/float64(n), "answer-B/msg")
		})
	}
}
