package host

import (
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// The host's end of the hand encoding is handler.proto's: the generated
// code reads the Batch it writes (this test), and it reads the
// BatchResult the generated code writes (the next). Package plugin tests
// the other two directions.
func TestTheHostsBatchIsTheContracts(t *testing.T) {
	batch := []*plugin.Message{
		{ID: "1:2:-1:-1", Topic: "persistent://t/n/a", Key: "k", OrderingKey: []byte("ok"),
			Properties: map[string]string{"a": "1", "b": ""}, Payload: []byte("payload"),
			PublishTime: time.UnixMilli(1_700_000_000_001), EventTime: time.UnixMilli(-5),
			RedeliveryCount: 3, TraceParent: "tp", TraceState: "ts"},
		{},
		{Topic: "persistent://t/n/a", Payload: []byte("x")},
	}
	data, err := wire.NewCodec().Marshal(&batchOut{msgs: batch, seq: 1 << 40, timeoutMs: 1500})
	if err != nil {
		t.Fatal(err)
	}
	var got pb.Batch
	if err := proto.Unmarshal(data.Materialize(), &got); err != nil {
		t.Fatal(err)
	}
	want := &pb.Batch{Seq: 1 << 40, TimeoutMs: 1500}
	for _, m := range batch {
		want.Messages = append(want.Messages, &pb.Message{Id: m.ID, Topic: m.Topic, Key: m.Key,
			OrderingKey: m.OrderingKey, Properties: m.Properties, Payload: m.Payload,
			PublishTimeMs: wire.Millis(m.PublishTime), EventTimeMs: wire.Millis(m.EventTime),
			RedeliveryCount: m.RedeliveryCount, Traceparent: m.TraceParent, Tracestate: m.TraceState})
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("protobuf read\n%v\nwant\n%v", &got, want)
	}
}

func TestTheHostReadsTheContractsResults(t *testing.T) {
	c := wire.NewCodec()
	pbRes := &pb.BatchResult{Seq: 10, Results: []*pb.Result{
		{Index: 0, Outcome: pb.Outcome_OUTCOME_ACK, Outputs: []*pb.Output{
			{Topic: "o", Key: "k", Payload: []byte("p"), Properties: map[string]string{"x": "y"},
				OrderingKey: []byte("ok"), EventTimeMs: 7},
			{Topic: "o2"}}},
		{Index: 1, Outcome: pb.Outcome_OUTCOME_RETRY, RetryDelayMs: 1500, Reason: "later"},
		{Index: 2, Outcome: pb.Outcome_OUTCOME_DROP, Reason: "no"},
		{Index: 3, Outcome: pb.Outcome_OUTCOME_ACK, Outputs: []*pb.Output{{Topic: "o", Payload: []byte("q")}}},
	}}
	raw, err := proto.Marshal(pbRes)
	if err != nil {
		t.Fatal(err)
	}
	var rin resultsIn
	if err := c.Unmarshal(memSlice(raw), &rin); err != nil {
		t.Fatal(err)
	}
	// What was read, written back with the generated types, is what was sent.
	back := &pb.BatchResult{Seq: rin.seq}
	for _, r := range rin.res {
		pr := &pb.Result{Index: r.index, Outcome: pb.Outcome(r.outcome), RetryDelayMs: r.delayMs, Reason: r.reason}
		for _, o := range r.outputs {
			pr.Outputs = append(pr.Outputs, &pb.Output{Topic: o.Topic, Key: o.Key, OrderingKey: o.OrderingKey,
				Properties: o.Properties, Payload: o.Payload, EventTimeMs: wire.Millis(o.EventTime)})
		}
		back.Results = append(back.Results, pr)
	}
	if !proto.Equal(back, pbRes) {
		t.Fatalf("read\n%v\nwant\n%v", back, pbRes)
	}

	panicked, _ := proto.Marshal(&pb.Panic{Index: 2, Value: "boom", Stack: "stack"})
	raw, _ = proto.Marshal(&pb.BatchResult{Seq: 11, Panic: &pb.Panic{Index: 2, Value: "boom", Stack: "stack"}})
	rin = resultsIn{}
	if err := c.Unmarshal(memSlice(raw), &rin); err != nil || rin.seq != 11 || string(rin.panic) != string(panicked) {
		t.Fatalf("read seq %d, panic %q: %v", rin.seq, rin.panic, err)
	}

	// Garbage is an error, not a panic.
	for _, bad := range [][]byte{{0x0a, 0x05, 1}, {0x0a, 0x02, 0x0a, 0x09}, {0xff}} {
		if err := c.Unmarshal(memSlice(bad), &resultsIn{}); err == nil {
			t.Errorf("% x decoded as results", bad)
		}
	}
}

func memSlice(b []byte) mem.BufferSlice { return mem.BufferSlice{mem.SliceBuffer(b)} }
