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
// code reads the Batch it writes, and it reads the BatchResult the
// generated code writes. (package plugin tests the other two directions.)
// Keys and properties are bytes in the contract: ones that are not UTF-8
// cross too (generated code refuses a proto3 string that is not).
func TestTheHostsHandEncodingIsTheContracts(t *testing.T) {
	c := wire.NewCodec()
	batch := []*plugin.Message{
		{ID: "1:2:-1:-1", Topic: "persistent://t/n/a", Key: "k\xff", OrderingKey: []byte("ok"),
			Properties: map[string]string{"a": "1", "\xc3(": "\xa0"}, Payload: []byte("payload"),
			PublishTime: time.UnixMilli(1_700_000_000_001), EventTime: time.UnixMilli(-5),
			RedeliveryCount: 3, TraceParent: "tp", TraceState: "ts"},
		{},
		{Topic: "persistent://t/n/a", Payload: []byte("x")},
	}
	data, err := c.Marshal(&batchOut{msgs: batch, seq: 1 << 40, timeoutMs: 1500})
	if err != nil {
		t.Fatal(err)
	}
	var pbBatch pb.Batch
	if err := proto.Unmarshal(data.Materialize(), &pbBatch); err != nil {
		t.Fatal(err)
	}
	if pbBatch.Seq != 1<<40 || pbBatch.TimeoutMs != 1500 || len(pbBatch.Messages) != 3 {
		t.Fatalf("protobuf read %v", &pbBatch)
	}
	m0 := pbBatch.Messages[0]
	if m0.Id != "1:2:-1:-1" || m0.Topic != "persistent://t/n/a" || string(m0.Key) != "k\xff" || string(m0.OrderingKey) != "ok" ||
		prop(m0.Properties, "a") != "1" || prop(m0.Properties, "\xc3(") != "\xa0" || len(m0.Properties) != 2 || string(m0.Payload) != "payload" ||
		m0.PublishTimeMs != 1_700_000_000_001 || m0.EventTimeMs != -5 || m0.RedeliveryCount != 3 ||
		m0.Traceparent != "tp" || m0.Tracestate != "ts" || string(pbBatch.Messages[2].Payload) != "x" ||
		!proto.Equal(pbBatch.Messages[1], &pb.Message{}) {
		t.Fatalf("protobuf read %v", &pbBatch)
	}

	pbRes := &pb.BatchResult{Seq: 10, Results: []*pb.Result{
		{Index: 0, Outcome: pb.Outcome_OUTCOME_ACK, Outputs: []*pb.Output{
			{Topic: "o", Key: []byte("k\x80"), Payload: []byte("p"), Properties: pbProps(map[string]string{"x": "y\xff"}),
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
	if rin.seq != 10 || len(rin.res) != 4 {
		t.Fatalf("seq %d, %d results", rin.seq, len(rin.res))
	}
	for i, r := range rin.res {
		w := pbRes.Results[i]
		if r.index != w.Index || r.outcome != int32(w.Outcome) || r.delayMs != w.RetryDelayMs ||
			r.reason != w.Reason || len(r.outputs) != len(w.Outputs) {
			t.Fatalf("result %d: got %+v, want %v", i, r, w)
		}
		for k, o := range r.outputs {
			wo := w.Outputs[k]
			if o.Topic != wo.Topic || o.Key != string(wo.Key) || string(o.Payload) != string(wo.Payload) ||
				string(o.OrderingKey) != string(wo.OrderingKey) || wire.Millis(o.EventTime) != wo.EventTimeMs ||
				len(o.Properties) != len(wo.Properties) || (len(wo.Properties) > 0 && o.Properties["x"] != prop(wo.Properties, "x")) {
				t.Fatalf("result %d output %d: got %+v, want %v", i, k, o, wo)
			}
		}
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

// pbProps is m as the generated code holds properties.
func pbProps(m map[string]string) []*pb.Property {
	var ps []*pb.Property
	for k, v := range m {
		ps = append(ps, &pb.Property{Key: []byte(k), Value: []byte(v)})
	}
	return ps
}

// prop is the value of property k in ps, "<absent>" when there is none.
func prop(ps []*pb.Property, k string) string {
	for _, p := range ps {
		if string(p.Key) == k {
			return string(p.Value)
		}
	}
	return "<absent>"
}

func memSlice(b []byte) mem.BufferSlice { return mem.BufferSlice{mem.SliceBuffer(b)} }
