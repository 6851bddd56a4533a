package runtime_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// In processing time the host decides a message's time when it takes it,
// so no reference can be computed before the run. The window changelog
// records that time (a message's m| record, the message as a window's
// JSON holds it, docs/pipelines.md "Windows"; in incremental mode the s|
// segment that holds it), and these tests compute the reference from the
// records: a plain windowing of every message at its recorded time. What makes them bite without the changelog's word: every
// message published is in the outputs, in as many windows as its kind
// puts it in; a message has one time, in all its records and in every
// window that holds it (a window read back keeps the time the first host
// gave it); that time lies between its publish and the output the test
// saw it in; and a window is aligned, of its size, and answered no
// earlier than its end.

var processingKinds = []struct {
	name string
	w    pipelines.Window
}{
	{"tumbling", pipelines.Window{Type: pipelines.Tumbling, Size: 500 * time.Millisecond}},
	{"sliding", pipelines.Window{Type: pipelines.Sliding, Size: time.Second, Slide: 250 * time.Millisecond}},
	{"session", pipelines.Window{Type: pipelines.Session, Gap: 250 * time.Millisecond}},
}

// Every window's result equals the reference over the times the
// changelog recorded, for each kind of window over processing time,
// through a handler that crashes on a window of each key (once each) and
// a host stopped mid-stream, whose open windows a second host reads back
// while messages go on coming across the stop.
func TestProcessingTimeWindowsEqualTheReferenceThroughCrashesAndARestart(t *testing.T) {
	for _, k := range processingKinds {
		t.Run(k.name, func(t *testing.T) {
			testProcessingTimeAgainstReference(t, k.w)
		})
	}
}

// The same for incremental windows (tumbling and sliding): each window's
// count and sum of its messages equal the reference's, the handler
// crashing on adds and on fires, the second host reading the
// accumulators and the segments back.
func TestIncrementalProcessingTimeWindowsEqualTheReferenceThroughCrashesAndARestart(t *testing.T) {
	for _, k := range processingKinds[:2] {
		t.Run(k.name, func(t *testing.T) {
			w := k.w
			w.Mode = pipelines.ModeIncremental
			testProcessingTimeAgainstReference(t, w)
		})
	}
}

// pacedMsg is a message to publish at its offset from the start.
type pacedMsg struct {
	key, payload string
	at           time.Duration
}

// pacedSchedule makes each key's messages about 30 ms apart, a fifth of
// the time after a pause of 350-600 ms (longer than the session gap, so
// that sessions end), over span; none pause within [calmFrom, calmTo), so
// that every key has messages in its open windows when the first host
// stops there.
func pacedSchedule(seed uint64, keys int, span, calmFrom, calmTo time.Duration) []pacedMsg {
	r := rand.New(rand.NewPCG(seed, 11))
	var out []pacedMsg
	for k := range keys {
		at := time.Duration(r.IntN(30)) * time.Millisecond
		for at < span {
			out = append(out, pacedMsg{key: fmt.Sprintf("k%d", k), at: at})
			gap := 30 * time.Millisecond
			if r.IntN(5) == 0 && (at < calmFrom-600*time.Millisecond || at >= calmTo) {
				gap = time.Duration(350+r.IntN(250)) * time.Millisecond
			}
			at += gap
		}
	}
	slices.SortStableFunc(out, func(a, b pacedMsg) int { return cmp.Compare(a.at, b.at) })
	for i := range out {
		out[i].payload = fmt.Sprintf("m-%d", i)
	}
	return out
}

// placedRecord is a message's m| record in the window changelog: the
// fields of a window's message (docs/pipelines.md, "Windows") the test
// reads.
type placedRecord struct {
	ID      string `json:"id"`
	Topic   string `json:"topic"`
	Key     string `json:"key"`
	Time    int64  `json:"time"`
	Payload []byte `json:"payload"`
}

// placements are the messages the changelog's records hold, by
// payload, every record written (removals left out): m| records in
// messages mode, s| segments in incremental mode (read by the host's
// own reader).
func placements(t *testing.T, c *collector) map[string][]placedRecord {
	t.Helper()
	out := map[string][]placedRecord{}
	for _, m := range c.all() {
		if len(m.Payload) == 0 {
			continue
		}
		var rs []placedRecord
		switch {
		case strings.HasPrefix(m.Key, "m|"):
			var r placedRecord
			if err := json.Unmarshal(m.Payload, &r); err != nil {
				t.Fatalf("changelog record %s: %v", m.Key, err)
			}
			rs = []placedRecord{r}
		case strings.HasPrefix(m.Key, "s|"):
			ms, err := streamrun.SegmentMessages(m.Payload)
			if err != nil || len(ms) == 0 {
				t.Fatalf("changelog record %s: %d messages, %v", m.Key, len(ms), err)
			}
			for _, sm := range ms {
				rs = append(rs, placedRecord(sm))
			}
		default:
			continue
		}
		if want := m.Key[:2] + rs[0].Topic + "|" + rs[0].ID; m.Key != want {
			t.Errorf("changelog record %s, named after message %s", m.Key, want)
		}
		for _, r := range rs {
			out[string(r.Payload)] = append(out[string(r.Payload)], r)
		}
	}
	return out
}

// seenOutput is an output of the window handler and when the test first
// saw it.
type seenOutput struct {
	windowResult
	published int64 // Unix ms, by the host's producer
	seen      int64 // Unix ms
}

// outputWatch notes when the test first sees each output.
type outputWatch struct {
	c    *collector
	outs []seenOutput
}

func (o *outputWatch) look(t *testing.T) {
	all := o.c.all()
	now := time.Now().UnixMilli()
	for _, m := range all[len(o.outs):] {
		var r windowResult
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			t.Fatalf("output %q: %v", m.Payload, err)
		}
		o.outs = append(o.outs, seenOutput{windowResult: r, published: m.PublishTime.UnixMilli(), seen: now})
	}
}

func testProcessingTimeAgainstReference(t *testing.T, w pipelines.Window) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	w.Time = pipelines.TimeProcessing
	const span, calmFrom, calmTo = 4500 * time.Millisecond, 1500 * time.Millisecond, 2700 * time.Millisecond
	sched := pacedSchedule(uint64(len(base)), 4, span, calmFrom, calmTo)

	// Both collectors subscribe before anything is written, so that they
	// miss nothing and the broker keeps what they have not read.
	changelog := collect(t, cl, in+"-windows")
	outs := windowResults{collect(t, cl, out)}
	watch := &outputWatch{c: outs.c}

	incr := w.Mode == pipelines.ModeIncremental
	p := windowPipeline(in, out, w, windowConfig{Crash: true, MarkerDir: t.TempDir(), Incremental: incr})
	p.Handler.BatchSize = 1
	// The first host's stop gives up soon, as in
	// testWindowsAgainstReference: its open windows stay open, for the
	// second host to read back.
	opts := streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, ShutdownTimeout: 300 * time.Millisecond}
	first := runHost(t, nil, opts, p)

	// The messages go out on their schedule, before, across and after
	// the stop; each one's time before its publish is kept.
	publishedAt := map[string]int64{}
	var sent atomic.Int64
	var pubErr error
	var pubs sync.WaitGroup
	pubCtx, pubCancel := context.WithCancel(testContext(t))
	t.Cleanup(func() { pubCancel(); pubs.Wait() })
	pubs.Go(func() {
		start := time.Now()
		for _, m := range sched {
			select {
			case <-pubCtx.Done():
				pubErr = pubCtx.Err()
				return
			case <-time.After(time.Until(start.Add(m.at))):
			}
			publishedAt[m.payload] = time.Now().UnixMilli() // read once the publisher is done
			if _, err := cl.Publish(pubCtx, in, pool.Message{Key: m.key, Payload: []byte(m.payload)}); err != nil {
				pubErr = fmt.Errorf("publish %s: %w", m.payload, err)
				return
			}
			sent.Add(1)
		}
	})

	// The stop comes in the calm stretch, in the second half of a
	// tumbling window: every key's open windows hold messages.
	calm := 0
	for calm < len(sched) && sched[calm].at < calmFrom+300*time.Millisecond {
		calm++
	}
	waitFor(t, "the calm stretch", func() bool {
		watch.look(t)
		return sent.Load() >= int64(calm)
	})
	if ms := time.Now().UnixMilli() % 500; ms < 250 {
		time.Sleep(time.Duration(250-ms) * time.Millisecond)
	}
	stopAt := sent.Load()
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	restarts := first.stats("windows").Restarts
	secondAt := time.Now().UnixMilli()
	t.Logf("the first host stopped at %d of %d messages sent (%d by its end), %d windows answered", stopAt, len(sched), sent.Load(), len(outs.get(t)))
	opts.ShutdownTimeout = 0
	second := runHost(t, nil, opts, p)

	pubs.Wait()
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	var placed map[string][]placedRecord
	waitFor(t, "a changelog record of every message", func() bool {
		watch.look(t)
		placed = placements(t, changelog)
		return len(placed) >= len(sched)
	})
	var msgs []genMsg
	for pl, rs := range placed {
		msgs = append(msgs, genMsg{key: rs[0].Key, t: rs[0].Time, payload: pl})
	}
	slices.SortFunc(msgs, func(a, b genMsg) int { return cmp.Compare(a.t, b.t) })
	// Nothing is late in processing time, and nothing out of order: the
	// messages in the order of their times are the order they were
	// placed in.
	ref := pipelines.Window{Type: w.Type, Size: w.Size, Slide: w.Slide, Gap: w.Gap}
	want, late := referenceWindows(ref, msgs)
	if late != 0 {
		t.Fatalf("the reference finds %d late messages in processing time", late)
	}
	t.Logf("%d messages over %d windows in the reference", len(msgs), len(want))

	deadline := time.Now().Add(testTimeout)
	for {
		watch.look(t)
		diff := ""
		if incr {
			diff = accAgree(accResults(t, outs.c), accSums(want))
		} else {
			diff = agree(outs.get(t), want)
		}
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the windows differ from the reference: %s", diff)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	restarts += second.stats("windows").Restarts

	// The changelog once more: a message placed again (a second time)
	// after the windows agreed shows here.
	placed = placements(t, changelog)
	if bad := checkProcessingTimes(w, sched, publishedAt, placed, outs.get(t), accResults(t, outs.c), watch.outs); len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
		}
		t.Errorf("the run breaks what processing time promises:\n%s", strings.Join(bad, "\n"))
	}

	// The handler crashes on the first fire of a window starting on a
	// second that is a multiple of 3 (windowConfig.Crash), incremental
	// ones on the first add of one starting a second after.
	crashy := false
	for id := range want {
		crashy = crashy || (id.start/1000)%3 == 0 || (incr && (id.start/1000)%3 == 1)
	}
	switch {
	case crashy && restarts == 0:
		t.Errorf("the handler was not restarted, though a window starts on a second the handler crashes on")
	case !crashy:
		t.Logf("no window starts on a second the handler crashes on: no crash")
	}
	// Placed by the first host: before the second started. Incremental
	// answers hold no messages: an answer of the second host counting
	// every message of its window in the reference holds those.
	readBack, bySecond := 0, 0
	for _, o := range watch.outs {
		times := o.Times
		if incr && o.published >= secondAt && o.Count == len(want[winID{o.Key, o.Start}]) {
			times = nil
			for _, pl := range want[winID{o.Key, o.Start}] {
				times = append(times, placed[pl][0].Time)
			}
		}
		for _, tm := range times {
			switch {
			case tm < secondAt && o.published >= secondAt:
				readBack++
			case tm >= secondAt:
				bySecond++
			}
		}
	}
	t.Logf("%d handler restarts; %d messages placed by the first host answered by the second, %d placed by the second", restarts, readBack, bySecond)
	if readBack == 0 || bySecond == 0 {
		t.Errorf("the second host answered %d messages the first placed and placed %d: the test wants both", readBack, bySecond)
	}
}

// checkProcessingTimes says how the run breaks these (none: it does
// not): every message published is placed at one time, after its
// publish, in every record and every output holding it, and is in as
// many of the final windows as w's kind puts it in; the windows are
// those of w's kind around those times, each answered no earlier than
// its end and no earlier than its messages' times.
func checkProcessingTimes(w pipelines.Window, sched []pacedMsg, publishedAt map[string]int64,
	placed map[string][]placedRecord, final map[winID]windowResult, finalAcc map[winID]windowAcc, outs []seenOutput) []string {
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	size, slide := w.Size.Milliseconds(), w.Slide.Milliseconds()
	if w.Type == pipelines.Tumbling {
		slide = size
	}
	timeOf := map[string]int64{}
	for _, m := range sched {
		rs := placed[m.payload]
		if len(rs) == 0 {
			badf("%s has no changelog record", m.payload)
			continue
		}
		tm := rs[0].Time
		for _, r := range rs[1:] {
			if r.Time != tm {
				badf("%s is recorded at %d and at %d", m.payload, tm, r.Time)
			}
		}
		if rs[0].Key != m.key {
			badf("%s of key %s is recorded under key %s", m.payload, m.key, rs[0].Key)
		}
		if tm < publishedAt[m.payload] {
			badf("%s is placed at %d, before its publish at %d", m.payload, tm, publishedAt[m.payload])
		}
		timeOf[m.payload] = tm
	}
	seen := map[string]int64{}
	for _, o := range outs {
		if o.End > o.seen {
			badf("window %s [%d, %d) was answered before its end (seen at %d)", o.Key, o.Start, o.End, o.seen)
		}
		if w.Type != pipelines.Session && (o.End-o.Start != size || o.Start%slide != 0) {
			badf("window %s [%d, %d) is not a %s window of %s every %s", o.Key, o.Start, o.End, w.Type, w.Size, time.Duration(slide)*time.Millisecond)
		}
		if len(o.Times) != len(o.Payloads) {
			badf("window %s [%d, %d): %d times for %d messages", o.Key, o.Start, o.End, len(o.Times), len(o.Payloads))
			continue
		}
		for i, pl := range o.Payloads {
			tm := o.Times[i]
			if rec, ok := timeOf[pl]; ok && tm != rec {
				badf("window %s [%d, %d) holds %s at %d; the changelog recorded %d", o.Key, o.Start, o.End, pl, tm, rec)
			}
			if tm < o.Start || tm >= o.End {
				badf("window %s [%d, %d) holds %s at %d", o.Key, o.Start, o.End, pl, tm)
			}
			if s, ok := seen[pl]; !ok || o.seen < s {
				seen[pl] = o.seen
			}
		}
	}
	in := map[string]int{}
	for id, r := range final {
		lo, hi := int64(0), int64(0)
		for i, pl := range r.Payloads {
			in[pl]++
			tm := timeOf[pl]
			if i == 0 || tm < lo {
				lo = tm
			}
			hi = max(hi, tm)
		}
		if w.Type == pipelines.Session && (r.Start != lo || r.End != hi+w.Gap.Milliseconds()) {
			badf("session %v is [%d, %d), its messages at %d to %d", id, r.Start, r.End, lo, hi)
		}
	}
	each := 1
	if w.Type == pipelines.Sliding {
		each = int(size / slide)
	}
	if w.Mode == pipelines.ModeIncremental {
		// Counted, not held: every message in as many windows.
		counted := 0
		for _, a := range finalAcc {
			counted += a.Count
		}
		if counted != each*len(sched) {
			badf("the windows count %d messages, want %d: %d messages, each in %d", counted, each*len(sched), len(sched), each)
		}
		clear(in)
	}
	for _, m := range sched {
		if w.Mode != pipelines.ModeIncremental && in[m.payload] != each {
			badf("%s is in %d windows, want %d", m.payload, in[m.payload], each)
		}
		if s, ok := seen[m.payload]; ok && timeOf[m.payload] > s {
			badf("%s is placed at %d, after the test saw it answered at %d", m.payload, timeOf[m.payload], s)
		}
	}
	return bad
}

// In processing time a window closes by the clock, but a message taken
// for it before its end is in it when it first fires, however long its
// changelog write takes: the window waits for it. Here the write of a
// key's second message is held for 2.5 s (the changelog on a broker of
// its own, the outputs on the other) while its window's end passes.
// Before, the window fired with the first message alone and, in messages
// mode, was forgotten, so that the second, placed then, made the same
// window again: a second fire 1, holding the second alone, which a
// consumer keying on the window takes in place of the first (incremental
// windows kept the window and fired it again, fire 2). Embedded broker:
// it needs the broker to hold a write.
func TestAProcessingTimeWindowWaitsForAMessageBeingWritten(t *testing.T) {
	for _, mode := range []pipelines.WindowMode{pipelines.ModeMessages, pipelines.ModeIncremental} {
		t.Run(string(mode), func(t *testing.T) {
			c := cluster(t, func(o *broker.Options) { o.Brokers = 2 })
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			changelog := in + "-windows"
			for topic, b := range map[string]int{in: 0, out: 0, changelog: 1} {
				if err := c.MoveTopic(topic, b); err != nil {
					t.Fatal(err)
				}
			}
			cl := client(t, c)
			outs := collect(t, cl, out)
			const size = 2000 // ms
			w := pipelines.Window{Type: pipelines.Tumbling, Size: size * time.Millisecond, Time: pipelines.TimeProcessing, Mode: mode}
			incr := mode == pipelines.ModeIncremental
			r := runHost(t, c, streamrun.Options{}, windowPipeline(in, out, w, windowConfig{Incremental: incr}))

			// A first window answered: the output's producer is there
			// before the changelog's connection is held.
			publishOne(t, cl, in, pool.Message{Key: "warm", Payload: []byte("warm")})
			outs.waitLen(t, 1)
			// Early in a window: both messages are taken before its end.
			if ms := time.Now().UnixMilli() % size; ms > 100 {
				time.Sleep(time.Duration(size-ms) * time.Millisecond)
			}
			t0 := time.Now().UnixMilli()
			start := t0 - t0%size
			publishOne(t, cl, in, pool.Message{Key: "a", Payload: []byte("first")})
			waitFor(t, "the first message placed", func() bool { return r.stats("windows").Acked >= 2 })
			slow := brokertest.Faults(t, c).Add(faults.Fault{Broker: 1, Command: pb.BaseCommand_SEND, Topic: changelog,
				Delay: 2500 * time.Millisecond, Count: 1})
			publishOne(t, cl, in, pool.Message{Key: "a", Payload: []byte("second")})
			waitFor(t, "the second message's write held", func() bool { return slow.Fired() >= 1 })
			if now := time.Now().UnixMilli(); now >= start+size {
				t.Fatalf("the second message was taken by %d, maybe after the window [%d, %d): the test could not make its case", now, start, start+size)
			}

			// Answered once, with both.
			both := func(r windowResult) bool { return slices.Contains(r.Payloads, "second") || r.Count == 2 }
			var got []windowResult
			deadline := time.Now().Add(testTimeout)
			for done := false; !done; {
				got = got[:0]
				for _, m := range outs.all()[1:] {
					var res windowResult
					if err := json.Unmarshal(m.Payload, &res); err != nil {
						t.Fatalf("output %q: %v", m.Payload, err)
					}
					got = append(got, res)
					done = done || both(res) || len(got) > 1
				}
				if !done && time.Now().After(deadline) {
					t.Fatalf("no answer holds the second message: %+v", got)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(got) != 1 || got[0].Key != "a" || got[0].Start != start || got[0].Fire != 1 || !both(got[0]) {
				t.Errorf("want one answer, fire 1 of a's window [%d, %d) with both messages; got %+v", start, start+size, got)
			}
		})
	}
}
