package runtime

import (
	"fmt"
	"testing"
	"time"
)

// A tap passes at most Rate events a second, at most a second's worth
// at once, and counts what it skips.
func TestATapKeepsToItsRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tp := &tap{opts: TapOptions{Rate: 10}.withDefaults(), last: t0, tokens: 10}
	passed := 0
	for range 50 {
		if tp.allow(t0) {
			passed++
		}
	}
	if passed != 10 || tp.skipped != 40 {
		t.Fatalf("at once: %d passed, %d skipped; want 10 and 40", passed, tp.skipped)
	}
	passed = 0
	for i := range 100 { // 100 events over half a second
		if tp.allow(t0.Add(time.Duration(i+1) * 5 * time.Millisecond)) {
			passed++
		}
	}
	if passed != 5 {
		t.Errorf("over half a second: %d passed, want 5", passed)
	}
	// A long quiet saves up no more than a second's worth.
	passed = 0
	later := t0.Add(time.Hour)
	for range 50 {
		if tp.allow(later) {
			passed++
		}
	}
	if passed != 10 {
		t.Errorf("after an hour: %d passed at once, want 10", passed)
	}
}

// The dead letters' reasons are counted, the most frequent first, long
// ones cut, and past the bound new ones count together.
func TestDeadLetterReasonsAreBounded(t *testing.T) {
	var d deadLetterReasons
	for i := range maxDeadLetterReasons + 10 {
		d.add(fmt.Sprintf("reason %d", i))
	}
	d.add("reason 3")
	d.add("")
	long := string(make([]byte, 1000))
	d.add(long)
	got := d.list()
	if len(got) != maxDeadLetterReasons {
		t.Fatalf("%d reasons kept, want %d", len(got), maxDeadLetterReasons)
	}
	if got[0].Reason != otherReasons || got[0].Count != 13 {
		t.Errorf("first: %+v, want %q with 13 (11 past the bound, the empty one, the long one)", got[0], otherReasons)
	}
	if got[1].Reason != "reason 3" || got[1].Count != 2 {
		t.Errorf("second: %+v, want reason 3 twice", got[1])
	}
	var fresh deadLetterReasons
	fresh.add("")
	fresh.add(long)
	for _, r := range fresh.list() {
		if r.Reason != "(no reason given)" && len(r.Reason) > maxReasonLen+len("…") {
			t.Errorf("a reason of %d bytes kept", len(r.Reason))
		}
	}
}
