package runtime

import (
	"log/slog"
	"testing"
	"time"
	"unsafe"
)

// A key's change names it with a string into the answer frame it came in;
// the state must not keep that frame alive, neither when the key is new
// nor when a later change (a later frame) replaces its value: a map
// assignment would put the new string in as the key.
func TestKeyedStateKeepsNoAnswerFrameAlive(t *testing.T) {
	for _, eo := range []bool{false, true} {
		s := newKeyedState("changelog", 0, eo, 0, "", slog.New(slog.DiscardHandler))
		var frames [][]byte
		for i := range 3 {
			frame := []byte("...customer-42...")
			frames = append(frames, frame)
			k := unsafe.String(&frame[3], len("customer-42"))
			s.set(k, []byte{byte('0' + i)}, false, time.Time{})
		}
		if s.vals.n != 1 {
			t.Fatalf("eo %v: %d keys, want 1", eo, s.vals.n)
		}
		for k, v := range s.vals.all() {
			if k != "customer-42" || string(v.v) != "2" {
				t.Errorf("eo %v: %q=%q, want customer-42=2", eo, k, v.v)
			}
			for i, f := range frames {
				if unsafe.StringData(k) == &f[3] || unsafe.StringData(v.key) == &f[3] {
					t.Errorf("eo %v: the key is held in answer frame %d's memory", eo, i)
				}
			}
		}
	}
}
