package runtime

import (
	"log/slog"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/subscribe"
)

// A batch is sent the values of its distinct keys that have one, each
// key once; a value last changed longer ago than the TTL is not sent (the
// handler sees no value); an acknowledged answer's change is kept, a
// retried one's is not, and a delete removes the key.
func TestKeyedStateEntriesTTLAndChanges(t *testing.T) {
	s := newKeyedState("changelog", time.Hour, false, slog.New(slog.DiscardHandler))
	now := time.Now()
	s.set("fresh", []byte("1"), false, now)
	s.set("old", []byte("2"), false, now.Add(-2*time.Hour))
	items := []*item{
		{m: &subscribe.Message{Key: "fresh"}}, {m: &subscribe.Message{Key: "old"}},
		{m: &subscribe.Message{Key: "fresh"}}, {m: &subscribe.Message{Key: "none"}}, {m: &subscribe.Message{}},
	}
	got := s.entries(items)
	if len(got) != 1 || got[0].Key != "fresh" || string(got[0].Value) != "1" {
		t.Errorf("entries: %+v, want fresh=1 alone", got)
	}
	s.apply(items[:3], []plugin.Result{
		{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: "fresh", Delete: true}},
		{Outcome: plugin.OutcomeRetry, State: &plugin.StateChange{Key: "none", Value: []byte("x")}},
		{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: "new", Value: []byte("y")}},
	})
	if _, ok := s.vals["fresh"]; ok {
		t.Error("a deleted key kept its value")
	}
	if _, ok := s.vals["none"]; ok {
		t.Error("a retried message's change was kept")
	}
	if v := s.vals["new"]; string(v.v) != "y" {
		t.Errorf("new = %q, want y", v.v)
	}
	if s.size != int64(len("old")+1+len("new")+1) {
		t.Errorf("size %d, want the bytes of old and new", s.size)
	}
}

// A change may be written into the array of the value it replaces, but
// never under exactly_once, where the value replaced is what a rollback
// puts back; either way the key reads the new value, and the size counts
// its bytes.
func TestKeyedStateChangesKeepTheValueARollbackNeeds(t *testing.T) {
	for _, eo := range []bool{false, true} {
		s := newKeyedState("changelog", 0, eo, slog.New(slog.DiscardHandler))
		now := time.Now()
		s.set("k", []byte("12345"), false, now)
		before := s.vals["k"].v
		s.set("k", []byte("9"), false, now)
		if got := string(s.vals["k"].v); got != "9" {
			t.Errorf("exactly once %v: k = %q, want 9", eo, got)
		}
		if s.size != int64(len("k")+1) {
			t.Errorf("exactly once %v: size %d, want %d", eo, s.size, len("k")+1)
		}
		if eo && string(before) != "12345" {
			t.Errorf("exactly once: the value replaced changed to %q; a rollback would put that back", before)
		}
		s.set("k", []byte("123456789"), false, now)
		if got := string(s.vals["k"].v); got != "123456789" {
			t.Errorf("exactly once %v: k = %q, want 123456789", eo, got)
		}
	}
}
