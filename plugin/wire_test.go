package plugin

import (
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// The hand encoding of wire.go is handler.proto's: the generated code
// reads what it writes, and it reads what the generated code writes. Keys
// and properties are bytes in the contract, so ones that are not UTF-8
// cross too (generated code refuses a proto3 string that is not).
func TestTheHandEncodingIsTheContracts(t *testing.T) {
	c := newCodec()
	batch := []*Message{
		{ID: "1:2:-1:-1", Topic: "persistent://t/n/a", Key: "k\xff\xfe", OrderingKey: []byte("ok"),
			Properties: map[string]string{"a": "1", "b": "", "\xc3(": "\xa0\xa1"}, Payload: []byte("payload"),
			PublishTime: time.UnixMilli(1_700_000_000_001), EventTime: time.UnixMilli(-5),
			RedeliveryCount: 3, TraceParent: "tp", TraceState: "ts"},
		{},
		{Topic: "persistent://t/n/a", Payload: []byte("x")},
	}
	data, err := c.Marshal(&wireBatch{msgs: batch})
	if err != nil {
		t.Fatal(err)
	}
	var pbBatch pb.Batch
	if err := proto.Unmarshal(data.Materialize(), &pbBatch); err != nil {
		t.Fatal(err)
	}
	if len(pbBatch.Messages) != 3 || prop(pbBatch.Messages[0].Properties, "a") != "1" ||
		prop(pbBatch.Messages[0].Properties, "\xc3(") != "\xa0\xa1" || string(pbBatch.Messages[0].Key) != "k\xff\xfe" ||
		pbBatch.Messages[0].EventTimeMs != -5 || pbBatch.Messages[0].Tracestate != "ts" ||
		string(pbBatch.Messages[2].Payload) != "x" {
		t.Fatalf("protobuf read %v", &pbBatch)
	}
	// And back, from protobuf's own encoding.
	raw, err := proto.Marshal(&pbBatch)
	if err != nil {
		t.Fatal(err)
	}
	var in wireBatch
	if err := c.Unmarshal(memSlice(raw), &in); err != nil {
		t.Fatal(err)
	}
	for i, m := range in.msgs {
		want := *batch[i]
		want.index = i
		if !sameMessage(m, &want) {
			t.Errorf("message %d: got %+v, want %+v", i, m, &want)
		}
	}

	res := []Result{
		{Outcome: OutcomeAck, Outputs: []Output{{Topic: "o", Key: "k\x80", Payload: []byte("p"),
			Properties: map[string]string{"x": "y\xff"}, OrderingKey: []byte("ok"), EventTime: time.UnixMilli(7)},
			{Topic: "o2"}}},
		{Outcome: OutcomeRetry, RetryDelay: 1500 * time.Millisecond, Reason: "later"},
		{Outcome: OutcomeDrop, Reason: "no"},
		{Outcome: OutcomeAck, Outputs: []Output{{Topic: "o", Payload: []byte("q")}}},
	}
	data, err = c.Marshal(&wireResults{res: res})
	if err != nil {
		t.Fatal(err)
	}
	var pbRes pb.BatchResult
	if err := proto.Unmarshal(data.Materialize(), &pbRes); err != nil {
		t.Fatal(err)
	}
	if len(pbRes.Results) != 4 || pbRes.Results[1].RetryDelayMs != 1500 || pbRes.Results[3].Index != 3 ||
		prop(pbRes.Results[0].Outputs[0].Properties, "x") != "y\xff" ||
		string(pbRes.Results[0].Outputs[0].Key) != "k\x80" || pbRes.Results[0].Outputs[1].Topic != "o2" {
		t.Fatalf("protobuf read %v", &pbRes)
	}
	raw, err = proto.Marshal(&pbRes)
	if err != nil {
		t.Fatal(err)
	}
	var rin wireResultsIn
	if err := c.Unmarshal(memSlice(raw), &rin); err != nil {
		t.Fatal(err)
	}
	if len(rin.res) != 4 {
		t.Fatalf("%d results", len(rin.res))
	}
	for i, r := range rin.res {
		w := res[i]
		if r.index != uint32(i) || r.outcome != int32(outcomeToPB[w.Outcome]) ||
			r.delayMs != w.RetryDelay.Milliseconds() || r.reason != w.Reason || len(r.outputs) != len(w.Outputs) {
			t.Fatalf("result %d: got %+v, want %+v", i, r, w)
		}
		for k, o := range r.outputs {
			wo := w.Outputs[k]
			if o.Topic != wo.Topic || o.Key != wo.Key || string(o.Payload) != string(wo.Payload) ||
				string(o.OrderingKey) != string(wo.OrderingKey) || !o.EventTime.Equal(wo.EventTime) ||
				len(o.Properties) != len(wo.Properties) || o.Properties["x"] != wo.Properties["x"] {
				t.Fatalf("result %d output %d: got %+v, want %+v", i, k, o, wo)
			}
		}
	}

	// Garbage is an error, not a panic.
	for _, bad := range [][]byte{{0x0a, 0x05, 1}, {0x0a, 0x02, 0x0a, 0x09}, {0xff}} {
		if err := c.Unmarshal(memSlice(bad), &wireBatch{}); err == nil {
			t.Errorf("% x decoded as a batch", bad)
		}
		if err := c.Unmarshal(memSlice(bad), &wireResultsIn{}); err == nil {
			t.Errorf("% x decoded as results", bad)
		}
	}
}

// The Batches stream's own fields (seq, timeout, panic) cross the same
// way.
func TestTheStreamFieldsAreTheContracts(t *testing.T) {
	c := newCodec()
	data, err := c.Marshal(&wireBatch{msgs: []*Message{{Payload: []byte("p")}}, seq: 1 << 40, timeoutMs: 1500})
	if err != nil {
		t.Fatal(err)
	}
	var pbBatch pb.Batch
	if err := proto.Unmarshal(data.Materialize(), &pbBatch); err != nil {
		t.Fatal(err)
	}
	if pbBatch.Seq != 1<<40 || pbBatch.TimeoutMs != 1500 || len(pbBatch.Messages) != 1 {
		t.Fatalf("protobuf read %v", &pbBatch)
	}
	pbBatch.Seq, pbBatch.TimeoutMs = 7, 20
	raw, _ := proto.Marshal(&pbBatch)
	var in wireBatch
	if err := c.Unmarshal(memSlice(raw), &in); err != nil || in.seq != 7 || in.timeoutMs != 20 || len(in.msgs) != 1 {
		t.Fatalf("read seq %d, timeout %d, %d messages: %v", in.seq, in.timeoutMs, len(in.msgs), err)
	}

	panicked, _ := proto.Marshal(&pb.Panic{Index: 2, Value: "boom", Stack: "stack"})
	data, err = c.Marshal(&wireResults{seq: 9, panic: panicked})
	if err != nil {
		t.Fatal(err)
	}
	var pbRes pb.BatchResult
	if err := proto.Unmarshal(data.Materialize(), &pbRes); err != nil {
		t.Fatal(err)
	}
	if pbRes.Seq != 9 || pbRes.Panic.GetValue() != "boom" || pbRes.Panic.GetIndex() != 2 || len(pbRes.Results) != 0 {
		t.Fatalf("protobuf read %v", &pbRes)
	}
	pbRes.Seq = 10
	raw, _ = proto.Marshal(&pbRes)
	var rin wireResultsIn
	if err := c.Unmarshal(memSlice(raw), &rin); err != nil || rin.seq != 10 || string(rin.panic) != string(panicked) {
		t.Fatalf("read seq %d, panic %q: %v", rin.seq, rin.panic, err)
	}
}

func sameMessage(a, b *Message) bool {
	if len(a.Properties) != len(b.Properties) {
		return false
	}
	for k, v := range b.Properties {
		if w, ok := a.Properties[k]; !ok || w != v {
			return false
		}
	}
	return a.ID == b.ID && a.Topic == b.Topic && a.Key == b.Key &&
		string(a.OrderingKey) == string(b.OrderingKey) && string(a.Payload) == string(b.Payload) &&
		a.PublishTime.Equal(b.PublishTime) && a.EventTime.Equal(b.EventTime) &&
		a.RedeliveryCount == b.RedeliveryCount && a.TraceParent == b.TraceParent &&
		a.TraceState == b.TraceState && a.index == b.index
}

// prop is the value of property k, as the generated code holds them.
func prop(ps []*pb.Property, k string) string {
	for _, p := range ps {
		if string(p.Key) == k {
			return string(p.Value)
		}
	}
	return "<absent>"
}

func memSlice(b []byte) mem.BufferSlice { return mem.BufferSlice{mem.SliceBuffer(b)} }
