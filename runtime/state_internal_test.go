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
	s := newKeyedState("changelog", time.Hour, false, 0, "", slog.New(slog.DiscardHandler))
	now := time.Now()
	s.set("fresh", []byte("1"), false, now)
	s.set("old", []byte("2"), false, now.Add(-2*time.Hour))
	items := []*item{
		{m: &subscribe.Message{Key: "fresh"}}, {m: &subscribe.Message{Key: "old"}},
		{m: &subscribe.Message{Key: "fresh"}}, {m: &subscribe.Message{Key: "none"}}, {m: &subscribe.Message{}},
	}
	got := mustEntries(t, s, items)
	if len(got) != 1 || got[0].Key != "fresh" || string(got[0].Value) != "1" {
		t.Errorf("entries: %+v, want fresh=1 alone", got)
	}
	s.apply(items[:3], []plugin.Result{
		{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: "fresh", Delete: true}},
		{Outcome: plugin.OutcomeRetry, State: &plugin.StateChange{Key: "none", Value: []byte("x")}},
		{Outcome: plugin.OutcomeAck, State: &plugin.StateChange{Key: "new", Value: []byte("y")}},
	})
	if _, ok := s.lookup("fresh"); ok {
		t.Error("a deleted key kept its value")
	}
	if _, ok := s.lookup("none"); ok {
		t.Error("a retried message's change was kept")
	}
	if v, _ := s.lookup("new"); string(v.v) != "y" {
		t.Errorf("new = %q, want y", v.v)
	}
	if want := cachedSize("old", []byte("2")) + cachedSize("new", []byte("y")); s.vals.used != want {
		t.Errorf("size %d, want %d: the bytes of old and new", s.vals.used, want)
	}
}

// A change may be written into the array of the value it replaces, but
// never under exactly_once, where the value replaced is what a rollback
// puts back; either way the key reads the new value, and the size counts
// its bytes.
func TestKeyedStateChangesKeepTheValueARollbackNeeds(t *testing.T) {
	for _, eo := range []bool{false, true} {
		s := newKeyedState("changelog", 0, eo, 0, "", slog.New(slog.DiscardHandler))
		now := time.Now()
		s.set("k", []byte("12345"), false, now)
		before := s.value("k")
		s.set("k", []byte("9"), false, now)
		if got := string(s.value("k")); got != "9" {
			t.Errorf("exactly once %v: k = %q, want 9", eo, got)
		}
		if want := cachedSize("k", []byte("9")); s.vals.used != want {
			t.Errorf("exactly once %v: size %d, want %d", eo, s.vals.used, want)
		}
		if eo && string(before) != "12345" {
			t.Errorf("exactly once: the value replaced changed to %q; a rollback would put that back", before)
		}
		s.set("k", []byte("123456789"), false, now)
		if got := string(s.value("k")); got != "123456789" {
			t.Errorf("exactly once %v: k = %q, want 123456789", eo, got)
		}
	}
}

// lookup is key k's value, for tests.
func (s *keyedState) lookup(k string) (stateValue, bool) {
	s.mu.Lock()
	defer s.unlock()
	sv, ok, err := s.vals.get(k)
	if err != nil {
		panic(err)
	}
	return sv, ok
}

// mustEntries is s.entries(items), which must not fail.
func mustEntries(t testing.TB, s *keyedState, items []*item) []plugin.StateEntry {
	t.Helper()
	es, err := s.entries(items)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// value is key k's value's bytes, for tests.
func (s *keyedState) value(k string) []byte {
	sv, _ := s.lookup(k)
	return sv.v
}
