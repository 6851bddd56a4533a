package campaign_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// The ledger's arithmetic, without a broker: a receipted message that
// never came out is lost, the same id under a new message id is a
// duplicate, a redelivery to the campaign's reader (same message id) is
// not, and an id no one published is reported.
func TestLedgerCounts(t *testing.T) {
	p := newPipe("p", "shared", 0, "in", "out")
	for range 5 {
		p.mu.Lock()
		p.pubAt = append(p.pubAt, time.Now().UnixNano())
		p.receipt = append(p.receipt, receiptOK)
		p.outs = append(p.outs, 0)
		p.mu.Unlock()
	}
	p.receipt[4] = receiptFailed
	out := func(entry uint64, payload string) *subscribe.Message {
		return &subscribe.Message{ID: pulsarwire.MessageID{Ledger: 1, Entry: entry}, Payload: []byte(payload)}
	}
	now := time.Now()
	p.record(out(1, "p:0"), now)
	p.record(out(1, "p:0"), now)         // redelivered to the reader: not a duplicate
	p.record(out(2, "p:0|padding"), now) // published twice: a duplicate
	p.record(out(3, "p:1"), now)
	p.record(out(4, "p:2"), now)
	p.record(out(5, "p:9"), now) // never published
	p.record(out(6, "q:1"), now) // another pipeline's

	// Caught up at 2: 0 and 1 came out, and 2 (not below 2). Not at 3:
	// nothing at or above 3 came out.
	if !p.caughtUp(2) || p.caughtUp(3) {
		t.Errorf("caughtUp(2), caughtUp(3) = %v, %v; want true, false", p.caughtUp(2), p.caughtUp(3))
	}
	// Seq 4's publish failed, yet it came out (the broker stored it): it
	// counts, unreceipted; seq 3, receipted, still holds recovery back.
	p.record(out(7, "p:4"), now)
	if p.caughtUp(4) {
		t.Errorf("caughtUp(4) with seq 3 receipted and not out")
	}
	c := p.counts()
	want := pipeCounts{Pipeline: "p", Type: "shared", Guarantee: "at_least_once", Published: 5, Receipted: 4, PublishFailed: 1, Processed: 5, Output: 4, Duplicated: 1, Lost: 1, UnreceiptedOut: 1}
	if c != want {
		t.Errorf("counts:\n got %+v\nwant %+v", c, want)
	}
	if miss, n := p.missing(10); n != 1 || len(miss) != 1 || miss[0] != 3 {
		t.Errorf("missing = %v, %d; want [3], 1", miss, n)
	}
	if len(p.unknown) != 2 || len(p.dupAt) != 1 {
		t.Errorf("unknown %v, duplicates at %v; want 2 and 1", p.unknown, p.dupAt)
	}
}

func TestMedianMax(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		in       []time.Duration
		med, max string
	}{
		{nil, "", ""},
		{ms(5), "5ms", "5ms"},
		{ms(9, 1), "5ms", "9ms"},
		{ms(3, 1, 2), "2ms", "3ms"},
	} {
		if med, mx := medianMax(c.in); med != c.med || mx != c.max {
			t.Errorf("medianMax(%v) = %q, %q; want %q, %q", c.in, med, mx, c.med, c.max)
		}
	}
}

// A publish whose receipt was lost with its connection is sent again and,
// on a broker without deduplication, stored twice: two input messages of
// one seq. Each put out once is no duplicate of the pipeline (the campaign
// at 4ad72d0, seed 1796537229464655224, called it one: eo-failover's
// input partition held seq 18066 as entries 4066 and 4067, one producer
// and sequence id); a second output of one input still is, and a counting
// pipeline counts both copies.
func TestLedgerCopiesOfAPublishAreNotDuplicates(t *testing.T) {
	p := newPipe("p", "failover", 2, "in", "out")
	for range 2 {
		p.mu.Lock()
		p.pubAt = append(p.pubAt, time.Now().UnixNano())
		p.receipt = append(p.receipt, receiptOK)
		p.outs = append(p.outs, 0)
		p.mu.Unlock()
	}
	out := func(entry uint64, payload, input string) *subscribe.Message {
		return &subscribe.Message{ID: pulsarwire.MessageID{Ledger: 8, Entry: entry}, Payload: []byte(payload),
			Properties: map[string]string{propInputID: input}}
	}
	now := time.Now()
	p.record(out(1, "p:0", "4:4066:0:-1"), now)
	p.record(out(2, "p:0", "4:4067:0:-1"), now) // the publish's second copy: put out once
	p.record(out(3, "p:1", "4:4068:0:-1"), now)
	if c := p.counts(); c.Duplicated != 0 || c.InputCopies != 1 || c.Output != 2 || c.Processed != 3 {
		t.Errorf("two copies of one publish: duplicated %d, input copies %d, output %d, processed %d; want 0, 1, 2, 3",
			c.Duplicated, c.InputCopies, c.Output, c.Processed)
	}
	if len(p.dupAt) != 0 {
		t.Errorf("duplicates at %v; want none", p.dupAt)
	}
	want, n := p.wantCounts()
	if n != 3 || want["k0"] != 2 || want["k1"] != 1 {
		t.Errorf("wantCounts = %v, %d; want k0 2 (both copies count), k1 1, 3 in all", want, n)
	}

	p.record(out(4, "p:0", "4:4067:0:-1"), now) // one input put out twice
	if c := p.counts(); c.Duplicated != 1 || c.InputCopies != 1 || len(p.dupAt) != 1 {
		t.Errorf("a second output of one input: duplicated %d, input copies %d, %d duplicate times; want 1, 1, 1",
			c.Duplicated, c.InputCopies, len(p.dupAt))
	}
}

// The window pipeline's check, without a broker: the reference follows
// the stored order (a copy of a publish stored twice counts twice, a
// message a minute behind is late), a window whose last fire holds its
// inputs agrees, and an input left out, one counted twice, a fire put
// out twice and a late message in a window are each found.
func TestWindowLedgerAgainstTheReference(t *testing.T) {
	p := newWinPipe("w", "in", "out", "late", "windows")
	const n = 120
	for range n {
		p.mu.Lock()
		p.pubAt = append(p.pubAt, time.Now().UnixNano())
		p.receipt = append(p.receipt, receiptOK)
		p.outs = append(p.outs, 0)
		p.mu.Unlock()
	}
	now := time.Now()
	entry := uint64(0)
	stored := map[int][]string{} // seq → its input ids
	store := func(seq int) {
		entry++
		id := pulsarwire.MessageID{Ledger: 3, Entry: entry, Partition: -1, BatchIndex: -1}
		key, payload, at := winFlushKey, "w:flush", winBase+1e10
		if seq >= 0 {
			key, payload, at = winKeyOf(seq), fmt.Sprintf("w:%d", seq), eventTimeOf(seq)
			stored[seq] = append(stored[seq], id.String())
		}
		p.recordInput(&subscribe.Message{ID: id, Key: key, Payload: []byte(payload), EventTime: time.UnixMilli(at)}, now)
	}
	for seq := range n {
		store(seq)
		if seq == 40 {
			store(40) // stored twice: its receipt was lost and it was sent again
		}
	}
	store(-1)
	ref, late := p.win.referenceWindows()
	if len(late) == 0 {
		t.Fatalf("no late input in %d: eventTimeOf makes one in a hundred late", n)
	}
	if len(ref) < n/winKeys {
		t.Fatalf("%d windows for %d inputs", len(ref), n)
	}
	seqOf := func(id string) int { return p.win.stored[id].seq }
	out := uint64(0)
	fire := func(w winID, ids []string, fire int) {
		r := winResult{Key: w.Key, Start: w.Start, End: w.Start + winSize.Milliseconds(), Fire: fire, Count: len(ids)}
		for _, id := range ids {
			r.IDs = append(r.IDs, fmt.Sprintf("%d@%s", seqOf(id), id))
		}
		b, _ := json.Marshal(r)
		out++
		p.record(&subscribe.Message{ID: pulsarwire.MessageID{Ledger: 9, Entry: out}, Payload: b}, now)
	}
	for w, ids := range ref {
		if len(ids) > 1 {
			fire(w, ids[:1], 1) // an early fire; the last one counts
		}
		fire(w, ids, 2)
	}
	for id := range late {
		out++
		p.recordLate(&subscribe.Message{ID: pulsarwire.MessageID{Ledger: 10, Entry: out}, Payload: fmt.Appendf(nil, "w:%d", seqOf(id)),
			Properties: map[string]string{subscribe.PropertyOriginMessageID: id}}, now)
	}
	if c := p.checkWindowsOnce(); c.wrong() != 0 || c.Inputs != n+1 || c.Late != len(late) {
		t.Fatalf("windows equal to the reference: %+v; want nothing wrong, %d inputs, %d late", c, n+1, len(late))
	}
	if c := p.counts(); c.Lost != 0 || c.Duplicated != 0 || c.InputCopies != 1 || c.Output != n {
		t.Errorf("counts %+v: want 0 lost, 0 duplicated, 1 input copy, %d out", c, n)
	}
	var some winID
	for w, ids := range ref {
		if len(ids) > 2 && !slices.Contains(ids, stored[40][0]) {
			some = w
		}
	}
	ids := ref[some]
	fire(some, ids[1:], 3) // the first input left out
	if c := p.checkWindowsOnce(); c.WindowsWrong != 1 || c.Lost != 1 {
		t.Errorf("an input left out: %+v; want 1 window wrong, 1 lost", c)
	}
	fire(some, append(slices.Clone(ids), ids[0]), 4) // one counted twice
	if c := p.checkWindowsOnce(); c.WindowsWrong != 1 || c.Twice != 1 || c.Lost != 0 {
		t.Errorf("an input counted twice: %+v; want 1 window wrong, 1 counted twice", c)
	}
	fire(some, ids, 5)
	fire(some, ids, 5) // a fire put out twice
	if c := p.checkWindowsOnce(); c.wrong() != 1 || c.FiresTwice != 1 {
		t.Errorf("a fire put out twice: %+v; want that only", c)
	}
	if c := p.counts(); c.Duplicated != 1 {
		t.Errorf("a fire put out twice: duplicated %d, want 1", c.Duplicated)
	}
	for id := range late {
		w := winID{winKeyOf(seqOf(id)), eventTimeOf(seqOf(id)) / winSize.Milliseconds() * winSize.Milliseconds()}
		fire(w, []string{id}, 9) // a late input in a window too
		break
	}
	if c := p.checkWindowsOnce(); c.Twice != 1 || c.WindowsWrong == 0 {
		t.Errorf("a late input in a window: %+v; want it counted twice and its window wrong", c)
	}
}
