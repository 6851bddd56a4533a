package runtime

import (
	"log/slog"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// The messages in hand of a keyed-state pipeline (keyedState.admit and
// leave, kept in per-topic lists in id order, state_held.go): a copy of
// a message in hand is refused however it is found (the oldest, the
// middle of the list, a message received out of order); a message let
// go is admitted again when it comes back; one acknowledged while a
// retry's redelivery may still come is refused as acknowledged until the
// sweep after heldAfterAck; and lists emptied and moved down keep the
// rest findable.
func TestKeyedStateHeldMessages(t *testing.T) {
	s := newKeyedState("changelog", 0, false, 0, "", slog.New(slog.DiscardHandler))
	msg := func(topic string, entry uint64) *subscribe.Message {
		return &subscribe.Message{Topic: topic, ID: pulsarwire.MessageID{Ledger: 1, Entry: entry, BatchIndex: -1, BatchSize: 3}}
	}
	admit := func(ms ...*subscribe.Message) ([]bool, []bool) {
		ok, acked := make([]bool, len(ms)), make([]bool, len(ms))
		s.admit(ms, ok, acked)
		return ok, acked
	}
	const n = 3000
	a := make([]*subscribe.Message, n)
	for i := range a {
		a[i] = msg("a", uint64(i))
	}
	b := msg("b", 7)
	if ok, _ := admit(append(append([]*subscribe.Message(nil), a...), b)...); !ok[0] || !ok[n-1] || !ok[n] {
		t.Fatalf("new messages refused: %v %v %v", ok[0], ok[n-1], ok[n])
	}
	// Copies (other *Message values, the same ids; BatchSize is no part
	// of the identity) are refused, not acknowledged.
	for _, i := range []int{0, 1, n / 2, n - 1} {
		c := msg("a", uint64(i))
		c.ID.BatchSize = 0
		if ok, acked := admit(c); ok[0] || acked[0] {
			t.Errorf("copy of a[%d] in hand: admitted %v, acked %v", i, ok[0], acked[0])
		}
	}
	if ok, _ := admit(msg("b", 7)); ok[0] {
		t.Error("copy of b in hand admitted")
	}
	// Let go out of order: the rest stay found; a message let go (a
	// retry) is admitted again, out of order, and found there.
	for i := 0; i < n; i += 2 {
		s.leave(a[i], false)
	}
	s.leave(a[1], false)
	if ok, _ := admit(msg("a", 1)); !ok[0] {
		t.Error("a[1] let go, then received again: refused")
	}
	if ok, _ := admit(msg("a", 1)); ok[0] {
		t.Error("second copy of a[1], received out of order: admitted")
	}
	for i := 3; i < n; i += 2 {
		if ok, _ := admit(msg("a", uint64(i))); ok[0] {
			t.Fatalf("copy of a[%d] admitted after others were let go", i)
		}
		s.leave(a[i], false)
	}
	if got := s.held.len(); got != 2 {
		t.Errorf("held: %d, want 2 (a[1]'s copy, b)", got)
	}
	// Acknowledged while a redelivery may come: refused as acknowledged
	// until the sweep.
	s.retried(time.Second)
	c := msg("a", n)
	admit(c)
	s.leave(c, true)
	if ok, acked := admit(msg("a", n)); ok[0] || !acked[0] {
		t.Errorf("copy of an acknowledged message: admitted %v, acked %v", ok[0], acked[0])
	}
	s.swept = time.Now().Add(-2 * heldAfterAck)
	s.heldMu.Lock()
	s.held.find(retryKeyOf(c)).at = time.Now().Add(-2 * heldAfterAck)
	s.heldMu.Unlock()
	admit(msg("a", n+1))
	if ok, _ := admit(msg("a", n)); !ok[0] {
		t.Error("an acknowledged message's id kept past the sweep")
	}
}
