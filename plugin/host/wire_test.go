package host

import (
	"fmt"
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
	t.Run("the generated code reads the host's Batch", func(t *testing.T) { checkBatchOut(t, c) })
	t.Run("the host reads the generated code's BatchResult", func(t *testing.T) { checkResultsIn(t, c) })
	t.Run("and its panic report", func(t *testing.T) { checkPanicIn(t, c) })
	t.Run("garbage is an error, not a panic", func(t *testing.T) {
		for _, bad := range [][]byte{{0x0a, 0x05, 1}, {0x0a, 0x02, 0x0a, 0x09}, {0xff}} {
			if err := c.Unmarshal(memSlice(bad), &resultsIn{}); err == nil {
				t.Errorf("% x decoded as results", bad)
			}
		}
	})
}

// check is one field compared: what it is, what came, what was sent.
type check struct {
	what      string
	got, want any
}

func checkAll(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func checkBatchOut(t *testing.T, c wire.Codec) {
	batch := []*plugin.Message{
		{ID: "1:2:-1:-1", Topic: "persistent://t/n/a", Key: "k\xff", OrderingKey: []byte("ok"),
			Properties: map[string]string{"a": "1", "\xc3(": "\xa0"}, Payload: []byte("payload"),
			PublishTime: time.UnixMilli(1_700_000_000_001), EventTime: time.UnixMilli(-5),
			RedeliveryCount: 3, TraceParent: "tp", TraceState: "ts"},
		{},
		{Topic: "persistent://t/n/a", Payload: []byte("x")},
	}
	data, err := c.Marshal(&batchOut{batch: Messages(batch), seq: 1 << 40, timeoutMs: 1500})
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
	checkAll(t, []check{
		{"id", m0.Id, "1:2:-1:-1"}, {"topic", m0.Topic, "persistent://t/n/a"},
		{"key", string(m0.Key), "k\xff"}, {"ordering key", string(m0.OrderingKey), "ok"},
		{"property a", prop(m0.Properties, "a"), "1"}, {"property \\xc3(", prop(m0.Properties, "\xc3("), "\xa0"},
		{"properties", len(m0.Properties), 2}, {"payload", string(m0.Payload), "payload"},
		{"publish time", m0.PublishTimeMs, int64(1_700_000_000_001)}, {"event time", m0.EventTimeMs, int64(-5)},
		{"redeliveries", m0.RedeliveryCount, uint32(3)},
		{"traceparent", m0.Traceparent, "tp"}, {"tracestate", m0.Tracestate, "ts"},
		{"message 2's payload", string(pbBatch.Messages[2].Payload), "x"},
		{"an empty message is empty", proto.Equal(pbBatch.Messages[1], &pb.Message{}), true},
	})
}

func checkResultsIn(t *testing.T, c wire.Codec) {
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
			checkOutput(t, fmt.Sprintf("result %d output %d", i, k), o, w.Outputs[k])
		}
	}
}

func checkOutput(t *testing.T, where string, o plugin.Output, wo *pb.Output) {
	t.Helper()
	if o.Topic != wo.Topic || o.Key != string(wo.Key) || string(o.Payload) != string(wo.Payload) ||
		string(o.OrderingKey) != string(wo.OrderingKey) || wire.Millis(o.EventTime) != wo.EventTimeMs ||
		len(o.Properties) != len(wo.Properties) || (len(wo.Properties) > 0 && o.Properties["x"] != prop(wo.Properties, "x")) {
		t.Fatalf("%s: got %+v, want %v", where, o, wo)
	}
}

func checkPanicIn(t *testing.T, c wire.Codec) {
	panicked, _ := proto.Marshal(&pb.Panic{Index: 2, Value: "boom", Stack: "stack"})
	raw, _ := proto.Marshal(&pb.BatchResult{Seq: 11, Panic: &pb.Panic{Index: 2, Value: "boom", Stack: "stack"}})
	var rin resultsIn
	if err := c.Unmarshal(memSlice(raw), &rin); err != nil || rin.seq != 11 || string(rin.panic) != string(panicked) {
		t.Fatalf("read seq %d, panic %q: %v", rin.seq, rin.panic, err)
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
