package host

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// The host reads contract version 3's compact answer as the generated
// code writes it: echoed outputs are made of the host's own messages, full
// results go to the messages their bytes name.
func TestTheHostReadsCompactAnswers(t *testing.T) {
	batch := []*plugin.Message{
		{ID: "0", Key: "k0", Payload: []byte("p0")},
		{ID: "1", Key: "k1", OrderingKey: []byte("ok1"), Properties: map[string]string{"a": "1"}, Payload: []byte("p1")},
		{ID: "2", Key: "k2", Payload: []byte("p2")},
		{ID: "3", Payload: []byte("p3")},
	}
	answer := &pb.BatchResult{Seq: 3, EchoTopic: "out",
		Outcomes: []byte{wire.CompactAck, wire.CompactEcho, wire.CompactEchoPayload, wire.CompactFull},
		Payloads: [][]byte{[]byte("new")},
		Results:  []*pb.Result{{Index: 3, Outcome: pb.Outcome_OUTCOME_RETRY, Reason: "later"}}}
	res, err := decodeAnswer(t, batch, answer)
	if err != nil {
		t.Fatal(err)
	}
	want := []plugin.Result{
		{Outcome: plugin.OutcomeAck},
		{Outcome: plugin.OutcomeAck, Outputs: []plugin.Output{{Topic: "out", Key: "k1", OrderingKey: []byte("ok1"),
			Properties: batch[1].Properties, Payload: []byte("p1")}}},
		{Outcome: plugin.OutcomeAck, Outputs: []plugin.Output{{Topic: "out", Key: "k2", Payload: []byte("new")}}},
		{Outcome: plugin.OutcomeRetry, Reason: "later"},
	}
	for i := range want {
		g, w := res[i], want[i]
		if g.Outcome != w.Outcome || g.Reason != w.Reason || len(g.Outputs) != len(w.Outputs) {
			t.Fatalf("message %d: %+v, want %+v", i, g, w)
		}
		for k := range w.Outputs {
			o, wo := g.Outputs[k], w.Outputs[k]
			if o.Topic != wo.Topic || o.Key != wo.Key || string(o.OrderingKey) != string(wo.OrderingKey) ||
				string(o.Payload) != string(wo.Payload) || len(o.Properties) != len(wo.Properties) || o.Properties["a"] != wo.Properties["a"] {
				t.Errorf("message %d output %d: %+v, want %+v", i, k, o, wo)
			}
		}
	}
	if &res[1].Outputs[0].Payload[0] != &batch[1].Payload[0] {
		t.Error("an echoed payload is a copy, not the host's own")
	}
}

// A compact answer that does not add up is a wrong answer naming what is
// wrong, never a panic; and on versions 1 and 2 the compact fields are
// not read at all.
func TestWrongCompactAnswersAreErrors(t *testing.T) {
	batch := []*plugin.Message{{ID: "0", Payload: []byte("a")}, {ID: "1", Payload: []byte("b")}}
	full := func(i uint32) *pb.Result { return &pb.Result{Index: i, Outcome: pb.Outcome_OUTCOME_ACK} }
	for _, tc := range []struct {
		name   string
		answer *pb.BatchResult
		want   string
	}{
		{"short", &pb.BatchResult{Outcomes: []byte{0}}, "1 outcomes for a batch of 2 messages"},
		{"unknown byte", &pb.BatchResult{Outcomes: []byte{0, 9}}, "for message 1 (1): unknown compact outcome 9"},
		{"no echo topic", &pb.BatchResult{Outcomes: []byte{1, 0}}, "for message 0 (0): an echoed output, and no echo topic"},
		{"payload missing", &pb.BatchResult{Outcomes: []byte{2, 0}, EchoTopic: "o"}, "for message 0 (0): an output's payload is missing"},
		{"payload extra", &pb.BatchResult{Outcomes: []byte{0, 0}, Payloads: [][]byte{nil}}, "1 payloads more than the outcomes ask for"},
		{"full missing", &pb.BatchResult{Outcomes: []byte{3, 0}}, "0 full results where the outcomes ask for 1"},
		{"full not asked", &pb.BatchResult{Outcomes: []byte{3, 0}, Results: []*pb.Result{full(1)}},
			"full result 0 is for message index 1, which the outcomes do not ask for"},
		{"full twice", &pb.BatchResult{Outcomes: []byte{3, 3}, Results: []*pb.Result{full(1), full(1)}},
			"full result 1 is for message index 1, which the outcomes do not ask for after 1"},
		{"full out of range", &pb.BatchResult{Outcomes: []byte{3, 0}, Results: []*pb.Result{full(7)}},
			"full result 0 is for message index 7"},
		{"full result wrong", &pb.BatchResult{Outcomes: []byte{0, 3}, Results: []*pb.Result{{Index: 1}}},
			"for message 1 (1): unknown outcome 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := decodeAnswer(t, batch, tc.answer)
			if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), tc.want) || res != nil {
				t.Fatalf("got %v, %v; want %q", res, err, tc.want)
			}
		})
	}
	t.Run("not on version 2", func(t *testing.T) {
		raw, _ := proto.Marshal(&pb.BatchResult{Outcomes: []byte{0, 0}})
		var rin resultsIn // compact unset: a carrier of versions 1 and 2
		if err := rin.Decode(raw); err != nil {
			t.Fatal(err)
		}
		inst := &Instance{name: "p"}
		if _, err := inst.decodeResults(Messages(batch), &rin); err == nil || !strings.Contains(err.Error(), "0 results for a batch of 2") {
			t.Fatalf("compact fields read on version 2: %v", err)
		}
	})
}

// A state change the host cannot read (cut short on the wire) makes the
// whole answer unreadable, with an error naming the message's index: the
// carrier closes the instance and the batch fails whole, so nothing of it
// is acknowledged (runtime: retried on a fresh instance).
func TestAMalformedStateChangeIsAnErrorNamingTheMessage(t *testing.T) {
	ok, err := proto.Marshal(&pb.Result{Index: 0, Outcome: pb.Outcome_OUTCOME_ACK})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := proto.Marshal(&pb.Result{Index: 1, Outcome: pb.Outcome_OUTCOME_ACK})
	if err != nil {
		t.Fatal(err)
	}
	// A key of 5 bytes of which 1 is there.
	bad = protowire.AppendTag(bad, wire.ResState, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0x0a, 0x05, 'k'})
	var raw []byte
	for _, r := range [][]byte{ok, bad} {
		raw = protowire.AppendTag(raw, wire.ResultsResults, protowire.BytesType)
		raw = protowire.AppendBytes(raw, r)
	}
	var rin resultsIn
	err = rin.Decode(raw)
	if want := "results: result 1: the state change of message index 1: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Decode: %v, want an error containing %q", err, want)
	}
}

// decodeAnswer decodes answer as a version 3 carrier would, and converts
// it as Instance.Process does.
func decodeAnswer(t *testing.T, batch []*plugin.Message, answer *pb.BatchResult) ([]plugin.Result, error) {
	t.Helper()
	raw, err := proto.Marshal(answer)
	if err != nil {
		t.Fatal(err)
	}
	rin := resultsIn{compact: true}
	if err := rin.Decode(raw); err != nil {
		t.Fatal(err)
	}
	inst := &Instance{name: "p"}
	return inst.decodeResults(Messages(batch), &rin)
}

// Contract version 4's compact state bytes (4 to 6) are the acks of
// bytes 0 to 2 with a new value of the message's own key, the next of
// the answer's states: the host makes the change with its own key, and
// checks it as a full result's.
func TestTheHostReadsCompactStateChanges(t *testing.T) {
	batch := []*plugin.Message{
		{ID: "0", Key: "k0", Payload: []byte("p0")},
		{ID: "1", Key: "k1", Payload: []byte("p1")},
		{ID: "2", Key: "k2", Payload: []byte("p2")},
		{ID: "3", Key: "k3", Payload: []byte("p3")},
	}
	answer := &pb.BatchResult{EchoTopic: "out",
		Outcomes: []byte{wire.CompactAck | wire.CompactState, wire.CompactEcho | wire.CompactState,
			wire.CompactEchoPayload | wire.CompactState, wire.CompactEcho},
		Payloads: [][]byte{[]byte("k2=1")},
		States:   [][]byte{[]byte("v0"), []byte("v1"), []byte("v2")}}
	res, err := decodeAnswerAs(t, batch, answer, true, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"v0", "v1", "v2", ""} {
		r := res[i]
		if r.Outcome != plugin.OutcomeAck {
			t.Fatalf("message %d: %+v", i, r)
		}
		if want == "" {
			if r.State != nil {
				t.Errorf("message %d: a change %+v, want none", i, r.State)
			}
			continue
		}
		if r.State == nil || r.State.Key != batch[i].Key || string(r.State.Value) != want || r.State.Delete {
			t.Errorf("message %d: change %+v, want %s=%s", i, r.State, batch[i].Key, want)
		}
	}
	if len(res[0].Outputs) != 0 || len(res[1].Outputs) != 1 || string(res[1].Outputs[0].Payload) != "p1" ||
		len(res[2].Outputs) != 1 || string(res[2].Outputs[0].Payload) != "k2=1" || res[2].Outputs[0].Key != "k2" {
		t.Errorf("outputs %+v, %+v, %+v", res[0].Outputs, res[1].Outputs, res[2].Outputs)
	}
}

// A compact state byte that does not add up, or comes where version 4
// was not negotiated or the pipeline keeps no state, is a wrong answer
// naming the message, never a change.
func TestWrongCompactStateChangesAreErrors(t *testing.T) {
	batch := []*plugin.Message{{ID: "0", Key: "k0", Payload: []byte("a")}, {ID: "1", Payload: []byte("b")}}
	v := [][]byte{[]byte("v")}
	for _, tc := range []struct {
		name         string
		answer       *pb.BatchResult
		state, keyed bool
		want         string
	}{
		{"value missing", &pb.BatchResult{Outcomes: []byte{4, 0}}, true, true, "for message 0 (0): a state value is missing"},
		{"value extra", &pb.BatchResult{Outcomes: []byte{4, 0}, States: [][]byte{[]byte("v"), []byte("w")}}, true, true,
			"1 state values more than the outcomes ask for"},
		{"empty value", &pb.BatchResult{Outcomes: []byte{4, 0}, States: [][]byte{nil}}, true, true,
			"for message 0 (0): a state change with an empty value that does not delete"},
		{"message without a key", &pb.BatchResult{Outcomes: []byte{0, 4}, States: v}, true, true,
			"for message 1 (1): a state change for a message without a key"},
		{"with a full result", &pb.BatchResult{Outcomes: []byte{7, 0}, States: v}, true, true,
			"for message 0 (0): unknown compact outcome 7"},
		{"version 3", &pb.BatchResult{Outcomes: []byte{4, 0}, States: v}, false, true,
			"for message 0 (0): unknown compact outcome 4"},
		{"no keyed state", &pb.BatchResult{Outcomes: []byte{4, 0}, States: v}, true, false,
			"for message 0 (0): a state change, and the pipeline keeps no state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := decodeAnswerAs(t, batch, tc.answer, tc.state, tc.keyed)
			if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), tc.want) || res != nil {
				t.Fatalf("got %v, %v; want %q", res, err, tc.want)
			}
		})
	}
}

// decodeAnswerAs is decodeAnswer on a carrier of version 4 (state) or 3,
// for a pipeline with keyed state or without.
func decodeAnswerAs(t *testing.T, batch []*plugin.Message, answer *pb.BatchResult, state, keyed bool) ([]plugin.Result, error) {
	t.Helper()
	raw, err := proto.Marshal(answer)
	if err != nil {
		t.Fatal(err)
	}
	rin := resultsIn{compact: true, compactState: state}
	if err := rin.Decode(raw); err != nil {
		t.Fatal(err)
	}
	inst := &Instance{name: "p"}
	inst.opts.KeyedState = keyed
	return inst.decodeResults(Messages(batch), &rin)
}
