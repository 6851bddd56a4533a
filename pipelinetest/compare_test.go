package pipelinetest

import (
	"testing"
)

func ptr(s string) *string { return &s }

// TestAMessageMatchesWhatIsExpectedOfIt: text and base64 exactly, json
// whatever its spacing and key order, json_contains a subset (lists as
// long), key exactly, properties given among others.
func TestAMessageMatchesWhatIsExpectedOfIt(t *testing.T) {
	got := output{key: "k", properties: map[string]string{"a": "1", "traceparent": "x"},
		payload: []byte(`{"id": "o1", "n": 2, "tags": [{"t": "x", "u": 1}], "more": true}`)}
	for _, c := range []struct {
		name string
		want Message
		ok   bool
	}{
		{"nothing asked", Message{}, true},
		{"json, other spacing and order", Message{JSON: map[string]any{"more": true, "n": 2, "id": "o1", "tags": []any{map[string]any{"u": 1, "t": "x"}}}}, true},
		{"json, a key fewer", Message{JSON: map[string]any{"id": "o1", "n": 2, "tags": []any{map[string]any{"t": "x", "u": 1}}}}, false},
		{"json_contains, a subset", Message{JSONContains: map[string]any{"id": "o1", "tags": []any{map[string]any{"t": "x"}}}}, true},
		{"json_contains, another value", Message{JSONContains: map[string]any{"n": 3}}, false},
		{"json_contains, a list shorter", Message{JSONContains: map[string]any{"tags": []any{}}}, false},
		{"text, exactly", Message{Text: ptr(string(got.payload))}, true},
		{"text, not quite", Message{Text: ptr(`{"id":"o1"}`)}, false},
		{"base64", Message{Base64: ptr("eyJpZCI6ICJvMSIsICJuIjogMiwgInRhZ3MiOiBbeyJ0IjogIngiLCAidSI6IDF9XSwgIm1vcmUiOiB0cnVlfQ==")}, true},
		{"key", Message{Key: ptr("k")}, true},
		{"another key", Message{Key: ptr("")}, false},
		{"a property among others", Message{Properties: map[string]string{"a": "1"}}, true},
		{"a property's other value", Message{Properties: map[string]string{"a": "2"}}, false},
	} {
		if ok := matches(c.want, got); ok != c.ok {
			t.Errorf("%s: matches %v, want %v", c.name, ok, c.ok)
		}
	}
}

// TestOutcomesAreJudgedByTheLastOneOrAnyRetry: the last outcome counts
// (a retry then an ack is an ack), a retry is expected among them, and
// with nothing expected an input must still be settled for good.
func TestOutcomesAreJudgedByTheLastOneOrAnyRetry(t *testing.T) {
	retried := settled{OutcomeRetry, "later"}
	for _, c := range []struct {
		in   Input
		seen []settled
		want string
	}{
		{Input{Outcome: OutcomeAck}, []settled{retried, {OutcomeAck, ""}}, ""},
		{Input{}, []settled{{OutcomeDrop, "no"}}, ""},
		{Input{}, []settled{retried}, `not settled: retry ("later")`},
		{Input{}, nil, "never settled (no outcome)"},
		{Input{Outcome: OutcomeRetry, Reason: "^lat"}, []settled{retried, {OutcomeAck, ""}}, ""},
		{Input{Outcome: OutcomeRetry, Reason: "soon"}, []settled{retried}, `want a retry with a reason matching "soon", got retry ("later")`},
		{Input{Outcome: OutcomeDeadLetter, Reason: "bad"}, []settled{{OutcomeDeadLetter, "worse"}}, `want dead_letter with a reason matching "bad", got dead_letter ("worse")`},
		{Input{Outcome: OutcomeFilter}, []settled{{OutcomeAck, ""}}, "want filter, got ack"},
	} {
		if got := outcomeProblem(c.in, c.seen); got != c.want {
			t.Errorf("%+v after %v: %q, want %q", c.in, c.seen, got, c.want)
		}
	}
}
