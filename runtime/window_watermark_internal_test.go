package runtime

import (
	"testing"
	"time"
)

// In processing time the watermark is the clock, held at the earliest
// time of the messages taken and not placed yet, however they come and
// go: two of one time, one taken after the clock went back, one placed
// twice (counted once), and the clock again once none is left.
func TestAProcessingWatermarkHoldsAtTheEarliestMessageTaken(t *testing.T) {
	wm := newWatermarks(0, time.Hour, true)
	now := time.UnixMilli(100)
	steps := []struct {
		do   func()
		what string
		want int64
	}{
		{func() {}, "nothing taken", 100},
		{func() { wm.take(50); wm.take(50); wm.take(70) }, "50, 50 and 70 taken", 50},
		{func() { wm.take(30) }, "30 taken after the clock went back", 30},
		{func() { wm.placed(30) }, "30 placed", 50},
		{func() { wm.placed(50) }, "one 50 placed", 50},
		{func() { wm.placed(50) }, "the other 50 placed", 70},
		{func() { wm.placed(50) }, "a 50 placed again", 70},
		{func() { wm.placed(70) }, "70 placed", 100},
		{func() { wm.take(120) }, "a time after the clock's taken", 100},
	}
	for _, s := range steps {
		s.do()
		if got := wm.at(now); got != s.want {
			t.Fatalf("%s: the watermark is %d, want %d", s.what, got, s.want)
		}
	}
	if len(wm.taken) != 1 {
		t.Errorf("%d runs of times kept, want 1 (120): %v", len(wm.taken), wm.taken)
	}

	// In event time nothing is held.
	ev := newWatermarks(0, time.Hour, false)
	ev.take(50)
	if len(ev.taken) != 0 {
		t.Errorf("event time keeps the times taken: %v", ev.taken)
	}
}
