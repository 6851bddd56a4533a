package subscribe

import "testing"

// The watch reports a skip only when an entry of the epoch the notes were
// made under comes from beyond a noted entry that has not come again.
func TestStaleWatchReportsOnlyASkip(t *testing.T) {
	var w staleWatch
	at := func(e uint64) entryPos { return entryPos{7, e} }
	if _, gap := w.arrived(at(5), 1); gap {
		t.Fatal("a skip reported with nothing noted")
	}
	for e := uint64(10); e < 13; e++ {
		w.stale(at(e), 2)
	}
	// The rewind sends from the oldest again: no skip.
	for e := uint64(0); e < 12; e++ {
		if q, gap := w.arrived(at(e), 2); gap {
			t.Fatalf("entry %d in order reported as skipping %s", e, q)
		}
	}
	// An entry of an older epoch says nothing of this epoch's rewind.
	if _, gap := w.arrived(at(20), 1); gap {
		t.Fatal("an entry of another epoch reported a skip")
	}
	// 12 was noted and has not come again: 13 skipped it.
	q, gap := w.arrived(at(13), 2)
	if !gap || q != at(12) {
		t.Fatalf("arrived(13) = %s, %v; want the skip of 7:12", q, gap)
	}
	// Reported once: the notes are forgotten, everything is asked again.
	if _, gap := w.arrived(at(14), 2); gap {
		t.Fatal("the same skip reported twice")
	}
	// Notes made under an older epoch are forgotten by a newer one.
	w.stale(at(30), 3)
	w.stale(at(31), 4)
	if _, gap := w.arrived(at(40), 3); gap {
		t.Fatal("a note of epoch 3 outlived epoch 4's")
	}
	if q, gap := w.arrived(at(40), 4); !gap || q != at(31) {
		t.Fatalf("arrived(40) under epoch 4 = %s, %v; want the skip of 7:31", q, gap)
	}
	// A new session starts from the oldest entry: no notes carry over.
	w.stale(at(50), 5)
	w.reset()
	if _, gap := w.arrived(at(60), 5); gap {
		t.Fatal("a note outlived reset")
	}
}
