package msglines_test

import (
	"context"
	"testing"

	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
)

func drain(t *testing.T, g msglines.Generated) []pool.Message {
	t.Helper()
	next := g.Messages()
	var out []pool.Message
	for {
		m, ok, err := next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

// "{n}" becomes each message's number; the template's key and
// properties go on every message; Count bounds them.
func TestGeneratedNumbersEachMessage(t *testing.T) {
	g := msglines.Generated{Template: pool.Message{Key: "k", Properties: map[string]string{"a": "b"}}, Text: "order {n}", Count: 3}
	if g.Fixed() != nil {
		t.Fatal("a text with {n} has a fixed payload")
	}
	ms := drain(t, g)
	if len(ms) != 3 {
		t.Fatalf("%d messages, want 3", len(ms))
	}
	for i, want := range []string{"order 0", "order 1", "order 2"} {
		if string(ms[i].Payload) != want || ms[i].Key != "k" || ms[i].Properties["a"] != "b" {
			t.Errorf("message %d: %q key %q props %v", i, ms[i].Payload, ms[i].Key, ms[i].Properties)
		}
	}
}

// A size gives that many bytes of a-z, a text without "{n}" itself, to
// every message alike.
func TestGeneratedFixedPayloads(t *testing.T) {
	if got := string((msglines.Generated{Size: 28}).Fixed()); got != "abcdefghijklmnopqrstuvwxyzab" {
		t.Errorf("size 28: %q", got)
	}
	if got := (msglines.Generated{}).Fixed(); got == nil || len(got) != 0 {
		t.Errorf("no text, no size: %q, want an empty payload", got)
	}
	ms := drain(t, msglines.Generated{Text: "same", Count: 2})
	if len(ms) != 2 || string(ms[0].Payload) != "same" || string(ms[1].Payload) != "same" {
		t.Errorf("fixed text: %v", ms)
	}
}
