package plugin

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// Contract version 3's compact answer, as the generated code reads it:
// a byte a message for an ack with no output and for an output that
// echoes its input (the payload kept or replaced) to the one echo topic,
// and a full result, in the batch's order, for everything else.
func TestCompactAnswersSayEveryOutcome(t *testing.T) {
	in := func(key string, payload string, props map[string]string) *Message {
		return &Message{ID: key, Topic: "persistent://t/n/in", Key: key, Payload: []byte(payload), Properties: props,
			EventTime: time.UnixMilli(5)}
	}
	props := map[string]string{"a": "1"}
	batch := []*Message{
		in("k0", "p0", nil), in("k1", "p1", props), in("k2", "p2", nil), in("k3", "p3", nil), in("k4", "p4", nil),
		in("k5", "p5", nil), in("k6", "p6", nil), in("k7", "p7", nil), in("k8", "p8", props), in("k9", "p9", nil),
		in("k10", "p10", nil),
	}
	echo := func(m *Message) Output {
		return Output{Topic: "out", Key: m.Key, Properties: m.Properties, Payload: m.Payload}
	}
	with := func(o Output, f func(*Output)) Output { f(&o); return o }
	cases := []struct {
		res  Result
		code byte
	}{
		{Result{Outcome: OutcomeAck}, wire.CompactAck},
		{Result{Outcome: OutcomeAck, Outputs: []Output{echo(batch[1])}}, wire.CompactEcho},
		{Result{Outcome: OutcomeAck, Outputs: []Output{with(echo(batch[2]), func(o *Output) { o.Payload = []byte("new") })}}, wire.CompactEchoPayload},
		{Result{Outcome: OutcomeAck, Outputs: []Output{with(echo(batch[3]), func(o *Output) { o.Payload = nil })}}, wire.CompactEchoPayload},
		{Result{Outcome: OutcomeAck, Outputs: []Output{with(echo(batch[4]), func(o *Output) { o.Topic = "other" })}}, wire.CompactFull},
		{Result{Outcome: OutcomeAck, Outputs: []Output{with(echo(batch[5]), func(o *Output) { o.Key = "other" })}}, wire.CompactFull},
		{Result{Outcome: OutcomeAck, Outputs: []Output{with(echo(batch[6]), func(o *Output) { o.EventTime = time.UnixMilli(5) })}}, wire.CompactFull},
		{Result{Outcome: OutcomeRetry, RetryDelay: time.Second, Reason: "later"}, wire.CompactFull},
		{Result{Outcome: OutcomeAck, Outputs: []Output{with(echo(batch[8]), func(o *Output) { o.Properties = map[string]string{"a": "2"} })}}, wire.CompactFull},
		{Result{Outcome: OutcomeAck, Outputs: []Output{echo(batch[9]), echo(batch[9])}}, wire.CompactFull},
		{Result{Outcome: OutcomeDrop, Reason: "no"}, wire.CompactFull},
	}
	res := make([]Result, len(cases))
	for i, c := range cases {
		res[i] = c.res
	}
	frame, err := wire.AppendFrame(nil, &resultsOut{res: res, seq: 12, msgs: batch, compact: true})
	if err != nil {
		t.Fatal(err)
	}
	var got pb.BatchResult
	if err := proto.Unmarshal(frame[wire.FrameHeader:], &got); err != nil {
		t.Fatal(err)
	}
	if got.Seq != 12 || got.EchoTopic != "out" || len(got.Outcomes) != len(batch) {
		t.Fatalf("seq %d, echo topic %q, %d outcomes; want 12, out, %d", got.Seq, got.EchoTopic, len(got.Outcomes), len(batch))
	}
	var full []int
	for i, c := range cases {
		if got.Outcomes[i] != c.code {
			t.Errorf("message %d: byte %d, want %d", i, got.Outcomes[i], c.code)
		}
		if c.code == wire.CompactFull {
			full = append(full, i)
		}
	}
	if len(got.Payloads) != 2 || string(got.Payloads[0]) != "new" || len(got.Payloads[1]) != 0 {
		t.Errorf("payloads %q, want [new, empty]", got.Payloads)
	}
	if len(got.Results) != len(full) {
		t.Fatalf("%d full results, want %d", len(got.Results), len(full))
	}
	for k, r := range got.Results {
		i := full[k]
		if int(r.Index) != i {
			t.Fatalf("full result %d is for message %d, want %d", k, r.Index, i)
		}
		checkFullResult(t, i, r, cases[i].res)
	}
}

func checkFullResult(t *testing.T, i int, r *pb.Result, want Result) {
	t.Helper()
	if len(r.Outputs) != len(want.Outputs) || r.Reason != want.Reason ||
		r.RetryDelayMs != want.RetryDelay.Milliseconds() || r.Outcome != outcomeToPB[want.Outcome] {
		t.Errorf("full result for message %d: %v, want %+v", i, r, want)
		return
	}
	for j, o := range r.Outputs {
		wo := want.Outputs[j]
		if o.Topic != wo.Topic || string(o.Key) != wo.Key || !bytes.Equal(o.Payload, wo.Payload) ||
			o.EventTimeMs != wire.Millis(wo.EventTime) || prop(o.Properties, "a") != propOr(wo.Properties, "a") {
			t.Errorf("message %d output %d: %v, want %+v", i, j, o, wo)
		}
	}
}

// A panic report and an answer of version 1 or 2 keep the full form.
func TestOnlyAnAnswerOfVersion3IsCompact(t *testing.T) {
	batch := []*Message{{Key: "k", Payload: []byte("p")}}
	res := []Result{{Outcome: OutcomeAck, Outputs: []Output{{Topic: "out", Key: "k", Payload: []byte("p")}}}}
	for _, compact := range []bool{false, true} {
		frame, err := wire.AppendFrame(nil, &resultsOut{res: res, seq: 1, msgs: batch, compact: compact})
		if err != nil {
			t.Fatal(err)
		}
		var got pb.BatchResult
		if err := proto.Unmarshal(frame[wire.FrameHeader:], &got); err != nil {
			t.Fatal(err)
		}
		if compact != (len(got.Outcomes) == 1 && len(got.Results) == 0) || !compact && len(got.Results) != 1 {
			t.Errorf("compact %v: %v", compact, &got)
		}
	}
	panicked, _ := proto.Marshal(&pb.Panic{Index: -1, Value: "boom"})
	frame, err := wire.AppendFrame(nil, &resultsOut{seq: 2, panic: panicked, msgs: batch, compact: true})
	if err != nil {
		t.Fatal(err)
	}
	var got pb.BatchResult
	if err := proto.Unmarshal(frame[wire.FrameHeader:], &got); err != nil || got.Panic.GetValue() != "boom" || got.Outcomes != nil {
		t.Fatalf("a panic answer: %v, %v", &got, err)
	}
}

func propOr(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return "<absent>"
}

// Contract version 4 answers a new value of the message's own key in the
// compact byte (4 added to 0, 1 or 2) with the value among the states;
// a deletion, a change of another key, and any change on version 3 go
// in full.
func TestCompactAnswersCarryStateOnVersion4(t *testing.T) {
	batch := []*Message{
		{Key: "k0", Payload: []byte("p0")}, {Key: "k1", Payload: []byte("p1")}, {Key: "k2", Payload: []byte("p2")},
		{Key: "k3", Payload: []byte("p3")}, {Key: "k4", Payload: []byte("p4")}, {Payload: []byte("p5")},
	}
	put := func(k, v string) *StateChange { return &StateChange{Key: k, Value: []byte(v)} }
	echo := func(m *Message, payload string) []Output {
		return []Output{{Topic: "out", Key: m.Key, Payload: []byte(payload)}}
	}
	res := []Result{
		{Outcome: OutcomeAck, State: put("k0", "1")},
		{Outcome: OutcomeAck, Outputs: echo(batch[1], "p1"), State: put("k1", "2")},
		{Outcome: OutcomeAck, Outputs: echo(batch[2], "k2=3"), State: put("k2", "3")},
		{Outcome: OutcomeAck, Outputs: echo(batch[3], "p3"), State: &StateChange{Key: "k3", Delete: true}},
		{Outcome: OutcomeAck, State: put("other", "5")},
		{Outcome: OutcomeAck, State: put("", "6")},
	}
	for _, version4 := range []bool{true, false} {
		frame, err := wire.AppendFrame(nil, &resultsOut{res: res, seq: 1, msgs: batch, compact: true, compactState: version4})
		if err != nil {
			t.Fatal(err)
		}
		var got pb.BatchResult
		if err := proto.Unmarshal(frame[wire.FrameHeader:], &got); err != nil {
			t.Fatal(err)
		}
		want := []byte{wire.CompactAck | wire.CompactState, wire.CompactEcho | wire.CompactState,
			wire.CompactEchoPayload | wire.CompactState, wire.CompactFull, wire.CompactFull, wire.CompactFull}
		wantStates := []string{"1", "2", "3"}
		if !version4 {
			want, wantStates = bytes.Repeat([]byte{wire.CompactFull}, 6), nil
		}
		if !bytes.Equal(got.Outcomes, want) {
			t.Errorf("version 4 %v: bytes %v, want %v", version4, got.Outcomes, want)
		}
		if len(got.States) != len(wantStates) {
			t.Fatalf("version 4 %v: states %q, want %q", version4, got.States, wantStates)
		}
		for i, s := range wantStates {
			if string(got.States[i]) != s {
				t.Errorf("version 4 %v: state %d %q, want %q", version4, i, got.States[i], s)
			}
		}
		for _, r := range got.Results {
			w := res[r.Index].State
			if r.State == nil || string(r.State.Key) != w.Key || string(r.State.Value) != string(w.Value) || r.State.Delete != w.Delete {
				t.Errorf("version 4 %v: full result %d's change %v, want %+v", version4, r.Index, r.State, w)
			}
		}
		if version4 && (len(got.Payloads) != 1 || string(got.Payloads[0]) != "k2=3") {
			t.Errorf("payloads %q, want [k2=3]", got.Payloads)
		}
	}
}
