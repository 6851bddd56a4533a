package plugin

import (
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// The plugin's end of the hand encoding is handler.proto's: it reads the
// Batch the generated code writes, and the generated code reads the
// BatchResult it writes. (plugin/host tests the other two directions.)
// Keys and properties are bytes in the contract: ones that are not UTF-8
// cross too (generated code refuses a proto3 string that is not).
func TestThePluginsHandEncodingIsTheContracts(t *testing.T) {
	c := wire.NewCodec()
	t.Run("the plugin reads the generated code's Batch", func(t *testing.T) { checkBatchIn(t, c) })
	t.Run("the generated code reads the plugin's BatchResult", func(t *testing.T) { checkResultsOut(t, c) })
	t.Run("and its panic report", func(t *testing.T) { checkPanicOut(t, c) })
	t.Run("garbage is an error, not a panic", func(t *testing.T) {
		for _, bad := range [][]byte{{0x0a, 0x05, 1}, {0x0a, 0x02, 0x0a, 0x09}, {0xff}} {
			if err := c.Unmarshal(memSlice(bad), &batchIn{}); err == nil {
				t.Errorf("% x decoded as a batch", bad)
			}
		}
	})
}

func checkBatchIn(t *testing.T, c wire.Codec) {
	batch := []*Message{
		{ID: "1:2:-1:-1", Topic: "persistent://t/n/a", Key: "k\xff\xfe", OrderingKey: []byte("ok"),
			Properties: map[string]string{"a": "1", "b": "", "\xc3(": "\xa0\xa1"}, Payload: []byte("payload"),
			PublishTime: time.UnixMilli(1_700_000_000_001), EventTime: time.UnixMilli(-5),
			RedeliveryCount: 3, TraceParent: "tp", TraceState: "ts"},
		{},
		{Topic: "persistent://t/n/a", Payload: []byte("x")},
	}
	pbBatch := &pb.Batch{Seq: 7, TimeoutMs: 20}
	for _, m := range batch {
		pbBatch.Messages = append(pbBatch.Messages, &pb.Message{Id: m.ID, Topic: m.Topic, Key: []byte(m.Key),
			OrderingKey: m.OrderingKey, Properties: pbProps(m.Properties), Payload: m.Payload,
			PublishTimeMs: wire.Millis(m.PublishTime), EventTimeMs: wire.Millis(m.EventTime),
			RedeliveryCount: m.RedeliveryCount, Traceparent: m.TraceParent, Tracestate: m.TraceState})
	}
	raw, err := proto.Marshal(pbBatch)
	if err != nil {
		t.Fatal(err)
	}
	var in batchIn
	if err := c.Unmarshal(memSlice(raw), &in); err != nil {
		t.Fatal(err)
	}
	if in.seq != 7 || in.timeoutMs != 20 || len(in.msgs) != len(batch) {
		t.Fatalf("read seq %d, timeout %d, %d messages", in.seq, in.timeoutMs, len(in.msgs))
	}
	for i, m := range in.msgs {
		want := *batch[i]
		want.index = i
		if !sameMessage(m, &want) {
			t.Errorf("message %d: got %+v, want %+v", i, m, &want)
		}
	}
}

func checkResultsOut(t *testing.T, c wire.Codec) {
	res := []Result{
		{Outcome: OutcomeAck, Outputs: []Output{{Topic: "o", Key: "k\x80", Payload: []byte("p"),
			Properties: map[string]string{"x": "y\xff"}, OrderingKey: []byte("ok"), EventTime: time.UnixMilli(7)},
			{Topic: "o2"}}},
		{Outcome: OutcomeRetry, RetryDelay: 1500 * time.Millisecond, Reason: "later"},
		{Outcome: OutcomeDrop, Reason: "no"},
		{Outcome: OutcomeAck, Outputs: []Output{{Topic: "o", Payload: []byte("q")}}},
	}
	data, err := c.Marshal(&resultsOut{res: res, seq: 9})
	if err != nil {
		t.Fatal(err)
	}
	var pbRes pb.BatchResult
	if err := proto.Unmarshal(data.Materialize(), &pbRes); err != nil {
		t.Fatal(err)
	}
	if pbRes.Seq != 9 || len(pbRes.Results) != 4 {
		t.Fatalf("protobuf read %v", &pbRes)
	}
	r0, r1 := pbRes.Results[0], pbRes.Results[1]
	checks := []struct {
		what      string
		got, want any
	}{
		{"result 1's delay", r1.RetryDelayMs, int64(1500)}, {"result 1's outcome", r1.Outcome, pb.Outcome_OUTCOME_RETRY},
		{"result 3's index", pbRes.Results[3].Index, uint32(3)}, {"result 2's reason", pbRes.Results[2].Reason, "no"},
		{"output 0's property x", prop(r0.Outputs[0].Properties, "x"), "y\xff"},
		{"output 0's key", string(r0.Outputs[0].Key), "k\x80"}, {"output 0's event time", r0.Outputs[0].EventTimeMs, int64(7)},
		{"output 1's topic", r0.Outputs[1].Topic, "o2"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %#v, want %#v (protobuf read %v)", c.what, c.got, c.want, &pbRes)
		}
	}
}

func checkPanicOut(t *testing.T, c wire.Codec) {
	panicked, _ := proto.Marshal(&pb.Panic{Index: 2, Value: "boom", Stack: "stack"})
	data, err := c.Marshal(&resultsOut{seq: 10, panic: panicked})
	if err != nil {
		t.Fatal(err)
	}
	var pbRes pb.BatchResult
	if err := proto.Unmarshal(data.Materialize(), &pbRes); err != nil {
		t.Fatal(err)
	}
	if pbRes.Seq != 10 || pbRes.Panic.GetValue() != "boom" || pbRes.Panic.GetIndex() != 2 || len(pbRes.Results) != 0 {
		t.Fatalf("protobuf read %v", &pbRes)
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
