package campaign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// The window pipeline (eo-window, exactly_once) counts each key's
// messages in tumbling windows of event time, incremental: the chaos
// handler's accumulator counts a window's messages and lists their ids
// ("<seq>@<input message id>"), and a window's fire puts out the count
// and the list. The campaign reads the input topic itself (a second
// subscription) to know what the broker stored, in the order it stored
// it, copies of a publish included, and computes every window and every
// late message from that with the rules of docs/pipelines.md
// ("Windows"); the last fire of each window must equal it.

// The window pipeline's event time: seq s is at winBase + s·winStep,
// some a little out of order, a few after their window fired (within
// the allowed lateness: the window fires again) and a few late beyond
// it (to the late topic). Synthetic, not the clock's: a backlog held by
// a fault is not late when it comes, and the reference depends on the
// stored order only.
const (
	winStep       = 100 * time.Millisecond
	winSize       = 5 * time.Second
	winOutOfOrder = 2 * time.Second
	winLateness   = 10 * time.Second
	// winKeys: about six messages a key in a window of 50 seqs.
	winKeys = 8
	// winBase is on a window's start (2026-01-01T00:00:00Z).
	winBase = int64(1_767_225_600_000)
	// winFlushKey's one message, far ahead in event time, published once
	// the load stops, closes every other window.
	winFlushKey = "~flush"
)

func winKeyOf(seq int) string { return "k" + strconv.Itoa(seq%winKeys) }

// eventTimeOf is the event time of the window pipeline's seq, in Unix
// ms: one in ten up to 1 s back (within out_of_order: on time), two in a
// hundred 9 s back (their window fired already: within the lateness, it
// fires again), one in a hundred a minute back (late: the late topic).
func eventTimeOf(seq int) int64 {
	step := winStep.Milliseconds()
	t := winBase + int64(seq)*step
	h := mix64(uint64(seq))
	switch r := h % 100; {
	case r < 10:
		t -= int64(1+h/100%10) * step
	case r < 12:
		t -= (winOutOfOrder + winSize + 2*time.Second).Milliseconds()
	case r < 13:
		t -= time.Minute.Milliseconds()
	}
	return t
}

// mix64 is splitmix64's finalizer: a seq's stable random choices.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// winID names a window: its key and start (Unix ms).
type winID struct {
	Key   string
	Start int64
}

// winResult is what a fire of the window pipeline puts out, and its
// accumulator (Count and IDs only).
type winResult struct {
	Key   string   `json:"key,omitempty"`
	Start int64    `json:"start,omitempty"`
	End   int64    `json:"end,omitempty"`
	Fire  int      `json:"fire,omitempty"`
	Count int      `json:"count"`
	IDs   []string `json:"ids"`
}

// winInput is an input message as the broker stored it.
type winInput struct {
	seq   int // -1: the flush
	key   string
	t     int64 // event time, Unix ms
	order int   // its place in the order the campaign's reader got them
}

// winLedger is a window pipeline's part of the ledger (under pipe.mu).
type winLedger struct {
	late   string // the late topic
	stored map[string]winInput
	// flushed: the flush message was read back from the input topic,
	// so every input before it is in stored.
	flushed bool
	fires   map[winID]map[int]int // window → fire number → distinct outputs
	last    map[winID]winResult   // each window's highest fire
	lateIDs map[string]int        // input id → distinct late-topic messages
	lateOut map[pulsarwire.MessageID]struct{}
	// fireDups: fires put out more than once.
	fireDups int64
}

func newWinPipe(name, in, out, late, changelog string) *pipe {
	p := newPipe(name, "exclusive", 0, in, out)
	p.changelog = changelog
	p.win = &winLedger{late: late, stored: map[string]winInput{}, fires: map[winID]map[int]int{},
		last: map[winID]winResult{}, lateIDs: map[string]int{}, lateOut: map[pulsarwire.MessageID]struct{}{}}
	return p
}

// seqOf reads "<pipeline>:<seq>" (padding after '|' ignored): -1 for
// the flush, false when it is no id of p's.
func (p *pipe) seqOf(payload []byte) (int, bool) {
	id, _, _ := bytes.Cut(payload, []byte("|"))
	name, s, ok := strings.Cut(string(id), ":")
	if !ok || name != p.name {
		return 0, false
	}
	if s == "flush" {
		return -1, true
	}
	seq, err := strconv.Atoi(s)
	return seq, err == nil && seq >= 0 && seq < len(p.pubAt)
}

func (p *pipe) unknownOut(m *subscribe.Message, why string) {
	if len(p.unknown) < 10 {
		p.unknown = append(p.unknown, fmt.Sprintf("%.60q (%s)", m.Payload, why))
	}
}

// cameOut notes that seq came out (in a window or the late topic) from the
// input message input.
func (p *pipe) cameOut(seq int, input string) {
	p.outs[seq]++
	if !slices.Contains(p.inputs[seq], input) {
		if len(p.inputs[seq]) > 0 {
			p.copies++
		}
		p.inputs[seq] = append(p.inputs[seq], input)
	}
	if int64(seq) > p.maxSeq.Load() {
		p.maxSeq.Store(int64(seq))
	}
}

// recordWindow takes one message of the window pipeline's output topic:
// a fire. A redelivery to the collector (same message id) is not a
// duplicate; a fire (key, start, fire number) put out twice is.
func (p *pipe) recordWindow(m *subscribe.Message, at time.Time) {
	var r winResult
	err := json.Unmarshal(m.Payload, &r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || r.Fire < 1 {
		p.unknownOut(m, "want a window's result")
		return
	}
	mid := m.ID
	mid.BatchSize = 0
	if _, dup := p.outIDs[mid]; dup {
		return
	}
	p.outIDs[mid] = struct{}{}
	p.processed++
	w := p.win
	id := winID{r.Key, r.Start}
	if w.fires[id] == nil {
		w.fires[id] = map[int]int{}
	}
	if w.fires[id][r.Fire]++; w.fires[id][r.Fire] > 1 {
		w.fireDups++
		p.dupAt = append(p.dupAt, at)
	}
	if r.Fire >= w.last[id].Fire {
		w.last[id] = r
	}
	for _, e := range r.IDs {
		s, input, _ := strings.Cut(e, "@")
		seq, ok := p.seqOf([]byte(p.name + ":" + s))
		if !ok || seq < 0 {
			p.unknownOut(m, "an id no one published: "+e)
			continue
		}
		p.cameOut(seq, input)
	}
}

// recordLate takes one message of the window pipeline's late topic.
func (p *pipe) recordLate(m *subscribe.Message, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq, ok := p.seqOf(m.Payload)
	if !ok || seq < 0 {
		p.unknownOut(m, "in the late topic")
		return
	}
	mid := m.ID
	mid.BatchSize = 0
	if _, dup := p.win.lateOut[mid]; dup {
		return
	}
	p.win.lateOut[mid] = struct{}{}
	input := m.Properties[subscribe.PropertyOriginMessageID]
	p.win.lateIDs[input]++
	p.cameOut(seq, input)
}

// recordInput takes one message of the window pipeline's input topic, as
// the broker stored it.
func (p *pipe) recordInput(m *subscribe.Message, _ time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq, ok := p.seqOf(m.Payload)
	if !ok {
		p.unknownOut(m, "in the input topic")
		return
	}
	mid := m.ID
	mid.BatchSize = 0
	id := mid.String()
	if _, seen := p.win.stored[id]; seen {
		return
	}
	p.win.stored[id] = winInput{seq: seq, key: m.Key, t: m.EventTime.UnixMilli(), order: len(p.win.stored)}
	if seq < 0 {
		p.win.flushed = true
	}
}

// copies counts the seqs the window pipeline took from more than one
// input message (a publish the broker stored twice).
func (w *winLedger) copies() int64 {
	var n int64
	seqs := map[int]int{}
	for _, in := range w.stored {
		if in.seq >= 0 {
			if seqs[in.seq]++; seqs[in.seq] == 2 {
				n++
			}
		}
	}
	return n
}

// duplicated counts what the window pipeline put out more than once: a
// fire twice, or an input message in more than one window's last fire or
// in the late topic more than once.
func (w *winLedger) duplicated() int64 {
	n := w.fireDups
	for _, c := range w.counted() {
		n += int64(max(c-1, 0))
	}
	return n
}

// counted is how many times each input message is in a window's last
// fire or in the late topic.
func (w *winLedger) counted() map[string]int {
	got := map[string]int{}
	for _, r := range w.last {
		for _, e := range r.IDs {
			_, input, _ := strings.Cut(e, "@")
			got[input]++
		}
	}
	for input, n := range w.lateIDs {
		got[input] += n
	}
	return got
}

// flush publishes the window pipeline's flush message, once every other
// publish has its answer: its event time closes every window.
func (p *pipe) flush(ctx context.Context, cl *pool.Client) error {
	m := pool.Message{Key: winFlushKey, Payload: []byte(p.name + ":flush"), EventTime: time.UnixMilli(winBase + 1e10)}
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = cl.Publish(pctx, p.in, m)
		cancel()
		if err == nil {
			return nil
		}
		sleepCtx(ctx, time.Second)
	}
	return fmt.Errorf("publish the flush message of %s: %w", p.name, err)
}

// referenceWindows is what each window of the window pipeline must hold
// (its inputs' ids) and which inputs are late, computed from what the
// broker stored, in its order, with the rules of docs/pipelines.md
// ("Windows", one partition): the watermark before a message is the
// newest event time before it less out_of_order; a message is late when
// its tumbling window's end plus the allowed lateness is at or below it;
// else it is in its window (which fires again if it fired already).
func (w *winLedger) referenceWindows() (map[winID][]string, map[string]bool) {
	ids := make([]string, 0, len(w.stored))
	for id := range w.stored {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return w.stored[a].order - w.stored[b].order })
	size, ooo, lateness := winSize.Milliseconds(), winOutOfOrder.Milliseconds(), winLateness.Milliseconds()
	wins, late := map[winID][]string{}, map[string]bool{}
	newest, any := int64(0), false
	for _, id := range ids {
		in := w.stored[id]
		start := in.t - ((in.t%size)+size)%size
		switch {
		case in.seq < 0: // the flush: in no window that fires
		case any && start+size+lateness <= newest-ooo:
			late[id] = true
		default:
			wid := winID{in.key, start}
			wins[wid] = append(wins[wid], id)
		}
		if !any || in.t > newest {
			newest, any = in.t, true
		}
	}
	for _, v := range wins {
		slices.Sort(v)
	}
	return wins, late
}

// windowCheck is what the final check of a window pipeline found.
type windowCheck struct {
	Pipeline string `json:"pipeline"`
	// Inputs: input messages the broker stored (copies of a publish
	// included, the flush not), read back from the input topic.
	Inputs  int `json:"inputs"`
	Windows int `json:"windows"` // in the reference
	// Refired: windows that fired more than once (a message within the
	// allowed lateness came after the first fire).
	Refired int `json:"windows_fired_again"`
	Late    int `json:"late"` // inputs late by the reference
	// WindowsWrong: windows whose last fire's count or inputs differ from
	// the reference's (or that the reference does not have).
	WindowsWrong int `json:"windows_wrong"`
	// LateWrong: inputs in the late topic that the reference puts in a
	// window, or late by the reference and not in the late topic.
	LateWrong int `json:"late_wrong"`
	// Lost: inputs in no window's last fire nor the late topic. Twice:
	// the extra times inputs are in them. FiresTwice: fires (key, start,
	// fire number) put out more than once.
	Lost       int      `json:"lost"`
	Twice      int      `json:"counted_twice"`
	FiresTwice int      `json:"fires_twice"`
	Examples   []string `json:"examples,omitempty"`
	Err        string   `json:"error,omitempty"`
}

func (c windowCheck) wrong() int {
	return c.WindowsWrong + c.LateWrong + c.Lost + c.Twice + c.FiresTwice
}

// checkWindows compares p's windows with the reference, once the flush
// is read back from the input topic, for up to winSettle while they
// differ (a fire may still be on its way).
func (e *env) checkWindows(ctx context.Context, p *pipe) windowCheck {
	const winSettle = 30 * time.Second
	for deadline := time.Now().Add(time.Minute); ; {
		p.mu.Lock()
		flushed := p.win.flushed
		p.mu.Unlock()
		if flushed {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return windowCheck{Pipeline: p.name, Err: "the flush message did not come back from the input topic within 1m"}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	deadline := time.Now().Add(winSettle)
	for {
		c := p.checkWindowsOnce()
		if c.wrong() == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return c
		}
		sleepCtx(ctx, time.Second)
	}
}

func (p *pipe) checkWindowsOnce() windowCheck {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.win
	ref, late := w.referenceWindows()
	c := windowCheck{Pipeline: p.name, Inputs: len(w.stored), Windows: len(ref), Late: len(late)}
	if w.flushed {
		c.Inputs--
	}
	example := func(s string, a ...any) {
		if len(c.Examples) < 10 {
			c.Examples = append(c.Examples, fmt.Sprintf(s, a...))
		}
	}
	seqOf := func(id string) int { return w.stored[id].seq }
	ws := make([]winID, 0, len(ref))
	for id := range ref {
		ws = append(ws, id)
	}
	for id := range w.last {
		if _, ok := ref[id]; !ok {
			ws = append(ws, id)
		}
	}
	slices.SortFunc(ws, func(a, b winID) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, id := range ws {
		want, r := ref[id], w.last[id]
		var got []string
		for _, e := range r.IDs {
			_, input, _ := strings.Cut(e, "@")
			got = append(got, input)
		}
		slices.Sort(got)
		if len(w.fires[id]) > 1 {
			c.Refired++
		}
		if r.Count != len(want) || !slices.Equal(got, want) {
			c.WindowsWrong++
			var miss, extra []string
			for _, x := range want {
				if !slices.Contains(got, x) {
					miss = append(miss, fmt.Sprintf("%d@%s", seqOf(x), x))
				}
			}
			for i, x := range got {
				if !slices.Contains(want, x) || (i > 0 && got[i-1] == x) {
					extra = append(extra, fmt.Sprintf("%d@%s", seqOf(x), x))
				}
			}
			example("window %s@%d: count %d (fire %d), reference %d; missing %v, not in the reference %v", id.Key, id.Start, r.Count, r.Fire, len(want), miss[:min(len(miss), 5)], extra[:min(len(extra), 5)])
		}
		for f, n := range w.fires[id] {
			if n > 1 {
				c.FiresTwice += n - 1
				example("window %s@%d: fire %d put out %d times", id.Key, id.Start, f, n)
			}
		}
	}
	got := w.counted()
	for id, in := range w.stored {
		if in.seq < 0 {
			continue
		}
		switch n := got[id]; {
		case n == 0:
			c.Lost++
			example("input %d@%s (event time %d) in no window and not late", in.seq, id, in.t)
		case n > 1:
			c.Twice += n - 1
			example("input %d@%s counted %d times", in.seq, id, n)
		}
		if late[id] != (w.lateIDs[id] > 0) {
			c.LateWrong++
			example("input %d@%s (event time %d): late by the reference %t, in the late topic %d times", in.seq, id, in.t, late[id], w.lateIDs[id])
		}
	}
	for id := range got {
		if _, ok := w.stored[id]; !ok {
			c.WindowsWrong++
			example("input %s put out, and the input topic does not hold it", id)
		}
	}
	return c
}

// windowHandler is the chaos handler's part for a window pipeline: the
// add step counts a window's messages and lists their ids, the fire puts
// them out.
func (c *chaos) windowHandler() plugin.Handler {
	return plugin.IncrementalWindow{
		Add: func(_ context.Context, w *plugin.Window) ([]byte, error) {
			var a winResult
			if w.Accumulator != nil {
				if err := json.Unmarshal(w.Accumulator, &a); err != nil {
					return nil, fmt.Errorf("chaos: window %s@%d's accumulator: %w", w.Key, w.Start.UnixMilli(), err)
				}
			}
			for _, m := range w.Messages {
				id, _, _ := bytes.Cut(m.Payload, []byte("|"))
				_, seq, _ := bytes.Cut(id, []byte(":"))
				a.Count++
				a.IDs = append(a.IDs, string(seq)+"@"+m.ID)
			}
			return json.Marshal(a)
		},
		Fire: func(_ context.Context, w *plugin.Window) ([]plugin.Output, error) {
			var a winResult
			if err := json.Unmarshal(w.Accumulator, &a); err != nil {
				return nil, fmt.Errorf("chaos: window %s@%d's accumulator: %w", w.Key, w.Start.UnixMilli(), err)
			}
			a.Key, a.Start, a.End, a.Fire = w.Key, w.Start.UnixMilli(), w.End.UnixMilli(), w.Fire
			b, err := json.Marshal(a)
			if err != nil {
				return nil, err
			}
			return []plugin.Output{{Topic: c.cfg.Output, Key: w.Key, Payload: b}}, nil
		},
	}
}
