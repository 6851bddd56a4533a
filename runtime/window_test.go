package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// These run against either broker: the embedded one, or Apache Pulsar
// when STREAMRUN_PULSAR_URL is set (brokertest.Target).

// genMsg is a generated input message.
type genMsg struct {
	key     string
	t       int64 // Unix ms
	payload string
}

// windowBase is a time on the minute, so that windows start on round
// times.
const windowBase = int64(1_767_225_600_000) // 2026-01-01T00:00:00Z

// flushKey's one message, far in the future, closes every other window.
const flushKey = "~flush"

// generate makes n messages over keys, about a second apart in time,
// with a tenth out of order by up to 8 s and a thirtieth late by one to
// two minutes; every time is distinct. The last message is flushKey's.
func generate(seed uint64, n, keys int) []genMsg {
	r := rand.New(rand.NewPCG(seed, 7))
	var out []genMsg
	for i := range n {
		t := windowBase + int64(i)*1000 + int64(i%997)
		switch x := r.IntN(100); {
		case x < 10:
			t -= int64(r.IntN(8000))
		case x < 13:
			t -= 60_000 + int64(r.IntN(60_000))
		}
		out = append(out, genMsg{key: fmt.Sprintf("k%d", r.IntN(keys)), t: t, payload: fmt.Sprintf("m-%d", i)})
	}
	return append(out, genMsg{key: flushKey, t: windowBase + 86_400_000, payload: "flush"})
}

type winID struct {
	key   string
	start int64
}

// referenceWindows is a plain computation of what each window holds
// (docs/pipelines.md, "Windows"), over the messages of one partition in
// order: the watermark before a message is the newest time before it
// less outOfOrder; a message is late when the last window it may be in
// ends, plus lateness, at or before it; it joins no window that ended,
// plus lateness, at or before it. flushKey's window never closes. The
// second result is how many are late.
func referenceWindows(w pipelines.Window, msgs []genMsg) (map[winID][]string, int) {
	out, late := referenceWithLate(w, msgs)
	return out, len(late)
}

// referenceWithLate is referenceWindows with the payloads of the late
// messages. Times may repeat (a batch's messages share its publish
// time): the arithmetic needs no order among equal times, and a session
// is named by its key and start as the host names it.
func referenceWithLate(w pipelines.Window, msgs []genMsg) (map[winID][]string, []string) {
	size, slide, gap := w.Size.Milliseconds(), w.Slide.Milliseconds(), w.Gap.Milliseconds()
	lateness, ooo := w.AllowedLateness.Milliseconds(), w.OutOfOrder.Milliseconds()
	if w.Type == pipelines.Tumbling {
		slide = size
	}
	floor := func(a, b int64) int64 { return int64(math.Floor(float64(a) / float64(b))) }
	type in struct {
		genMsg
		horizon int64
	}
	newest := int64(math.MinInt64)
	var kept []in
	var late []string
	for _, m := range msgs {
		wm := int64(math.MinInt64)
		if newest != math.MinInt64 {
			wm = newest - ooo
		}
		lastEnd := m.t + gap
		if w.Type != pipelines.Session {
			lastEnd = floor(m.t, slide)*slide + size
		}
		if wm != math.MinInt64 && lastEnd+lateness <= wm && w.Type != pipelines.Session {
			late = append(late, m.payload)
			continue
		}
		h := int64(math.MinInt64)
		if wm != math.MinInt64 {
			h = wm - lateness
		}
		kept = append(kept, in{m, h})
		newest = max(newest, m.t)
	}
	out := map[winID][]string{}
	if w.Type != pipelines.Session {
		for _, m := range kept {
			if m.key == flushKey {
				continue
			}
			for s := floor(m.t, slide)*slide - size + slide; s <= m.t; s += slide {
				if s+size > m.t && s+size > m.horizon {
					id := winID{m.key, s}
					out[id] = append(out[id], m.payload)
				}
			}
		}
	} else {
		// In the order they came: a message joins (and so merges) every
		// session of its key it falls within gap of that is not
		// forgotten (its end after the message's horizon); one that
		// joins none starts its own, unless that one is forgotten too:
		// then it is late.
		type session struct {
			start, end int64
			ps         []string
		}
		byKey := map[string][]*session{}
		for _, m := range kept {
			if m.key == flushKey {
				continue
			}
			ns := &session{start: m.t, end: m.t + gap, ps: []string{m.payload}}
			var left []*session
			joined := false
			for _, s := range byKey[m.key] {
				if s.end > m.horizon && s.start < m.t+gap && m.t < s.end {
					ns.start, ns.end, ns.ps = min(ns.start, s.start), max(ns.end, s.end), append(ns.ps, s.ps...)
					joined = true
					continue
				}
				left = append(left, s)
			}
			if !joined && ns.end <= m.horizon {
				late = append(late, m.payload)
				continue
			}
			byKey[m.key] = append(left, ns)
		}
		for key, ss := range byKey {
			for _, s := range ss {
				out[winID{key, s.start}] = s.ps
			}
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out, late
}

// windowResults are the outputs of the window handler: for each window,
// the fullest result it was answered with (a window fires again, whole,
// for what lateness brings; after a crash or restart it may fire again).
type windowResults struct {
	c *collector
}

func (wr windowResults) get(t testing.TB) map[winID]windowResult {
	out := map[winID]windowResult{}
	replaced := map[winID]bool{}
	for _, m := range wr.c.all() {
		var r windowResult
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			t.Fatalf("output %q: %v", m.Payload, err)
		}
		r.sortPayloads()
		id := winID{r.Key, r.Start}
		if old, ok := out[id]; !ok || len(r.Payloads) > len(old.Payloads) {
			out[id] = r
		}
		for _, s := range r.Replaces {
			replaced[winID{r.Key, s}] = true
		}
	}
	for id := range replaced {
		delete(out, id)
	}
	return out
}

// agree says how windows got differs from want ("" when they agree).
func agree(got map[winID]windowResult, want map[winID][]string) string {
	var diffs []string
	for id, ps := range want {
		r, ok := got[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("window %v missing", id))
		case !slices.Equal(r.Payloads, ps):
			diffs = append(diffs, fmt.Sprintf("window %v holds %v, want %v", id, r.Payloads, ps))
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("window %v not in the reference: %v", id, got[id].Payloads))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}

func windowPipeline(in, out string, w pipelines.Window, h windowConfig) pipelines.Pipeline {
	return windowPipelineOf(in, out, w, h, windowHandler)
}

func windowPipelineOf(in, out string, w pipelines.Window, h windowConfig, handler func(windowConfig) pipelines.Handler) pipelines.Pipeline {
	h.Output = out
	hc := handler(h)
	hc.BatchSize, hc.Instances = 4, 1
	w.Changelog = in + "-windows"
	w.IdleTimeout = time.Hour // the flush message closes the windows
	return pipelines.Pipeline{
		Name:        "windows",
		Source:      pipelines.Source{Topics: []string{in}, Subscription: "windows", Type: pipelines.Exclusive, InitialPosition: pipelines.Earliest},
		Handler:     hc,
		ErrorPolicy: pipelines.ErrorPolicy{Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}},
		Window:      w,
	}
}

func publishGenerated(t testing.TB, cl *pool.Client, topic string, msgs []genMsg, asField bool) {
	t.Helper()
	ctx := testContext(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, g := range msgs {
		m := pool.Message{Key: g.key, Payload: []byte(g.payload), EventTime: time.UnixMilli(g.t)}
		if asField {
			m.EventTime = time.Time{}
			m.Payload = fmt.Appendf(nil, `{"id":%q,"order":{"ts":%d}}`, g.payload, g.t)
		}
		wg.Add(1)
		cl.PublishAsync(ctx, topic, m, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

var windowKinds = []struct {
	name string
	w    pipelines.Window
}{
	{"tumbling", pipelines.Window{Type: pipelines.Tumbling, Size: 20 * time.Second, OutOfOrder: 5 * time.Second, AllowedLateness: 10 * time.Second}},
	{"sliding", pipelines.Window{Type: pipelines.Sliding, Size: 20 * time.Second, Slide: 5 * time.Second, OutOfOrder: 5 * time.Second, AllowedLateness: 10 * time.Second}},
	{"session", pipelines.Window{Type: pipelines.Session, Gap: 7 * time.Second, OutOfOrder: 5 * time.Second}},
	// Long sessions kept a minute after they fire: messages a minute or
	// more late join fired sessions (whose own [t, t+gap) is forgotten
	// already), move their starts and merge them.
	{"session-lateness", pipelines.Window{Type: pipelines.Session, Gap: 7 * time.Second, OutOfOrder: 2 * time.Second, AllowedLateness: time.Minute}},
}

// Every window's result equals the reference's, for each kind of window
// over event time, through a handler that crashes on a window of each
// key (once each) and a host that stops mid-stream and a new one that
// reads the open windows back from the changelog.
func TestWindowsEqualTheReferenceThroughCrashesAndARestart(t *testing.T) {
	for _, k := range windowKinds {
		t.Run(k.name, func(t *testing.T) {
			testWindowsAgainstReference(t, k.w, generatedInput(false), true, windowHandler)
		})
	}
}

// The same with the Python SDK's handler (message.window), whose
// interpreter dies on a window of each key, once each.
func TestPythonWindowsEqualTheReferenceThroughCrashesAndARestart(t *testing.T) {
	pythonSDK(t)
	for _, k := range windowKinds {
		t.Run(k.name, func(t *testing.T) {
			testWindowsAgainstReference(t, k.w, generatedInput(false), true, func(cfg windowConfig) pipelines.Handler {
				return pythonScript(t, "runtime/testdata/python/window.py",
					map[string]any{"output": cfg.Output, "crash": cfg.Crash, "marker_dir": cfg.MarkerDir})
			})
		})
	}
}

// The time from a field of a JSON payload: the same windows.
func TestWindowsOnAJSONFieldEqualTheReference(t *testing.T) {
	w := windowKinds[0].w
	w.Time, w.TimeField = pipelines.TimeField, "order.ts"
	testWindowsAgainstReference(t, w, generatedInput(true), false, windowHandler)
}

// In publish time, every window's result equals the reference's over
// the input as the topic holds it, each message at its publish time:
// four clients publish the same topic in turn, one sending its batches
// at once and three holding them (Batching.MaxDelay), so that theirs reach
// the topic behind the first's newer ones, some past out_of_order, some
// late. Each kind of window at a hundredth of its size, through the
// same crashes and restart.
func TestPublishTimeWindowsEqualTheReferenceThroughCrashesAndARestart(t *testing.T) {
	for _, k := range windowKinds {
		t.Run(k.name, func(t *testing.T) {
			w := inPublishTime(k.w)
			testWindowsAgainstReference(t, w, publishedInput(w), true, windowHandler)
		})
	}
}

// inPublishTime is w in publish time at a hundredth of its sizes, for an
// input published over a few seconds (publishedInput).
func inPublishTime(w pipelines.Window) pipelines.Window {
	for _, d := range []*time.Duration{&w.Size, &w.Slide, &w.Gap, &w.OutOfOrder, &w.AllowedLateness} {
		*d /= 100
	}
	w.Time = pipelines.TimePublish
	return w
}

// publishedInput is 300 messages over 5 keys, one every 10 ms, half by
// a prompt client (batches of 1 ms), the rest by three clients whose
// batches wait: three quarters of out_of_order, past it and half the lateness and
// window, and past them all. A batch carries the time it
// was started at as its messages' publish time (pool/partition.go), and
// reaches the topic when it is sent, behind the prompt client's newer
// batches. Once every receipt is in, and after a pause past every
// window's lateness, flushKey's message closes the windows. The topic is
// then read back, in order, at the publish times its consumer is given
// (Apache Pulsar keeps the client's).
func publishedInput(w pipelines.Window) windowInput {
	reach := w.OutOfOrder + w.AllowedLateness + max(w.Size, w.Gap)
	holds := []time.Duration{time.Millisecond, w.OutOfOrder * 3 / 4, w.OutOfOrder + (reach-w.OutOfOrder)/2, reach + 50*time.Millisecond}
	return func(t *testing.T, url, in string, seed uint64) []genMsg {
		const n, keys = 300, 5
		var cls []*pool.Client
		for _, h := range holds {
			cls = append(cls, clientURL(t, url, func(o *pool.Options) { o.Producer.Batching.MaxDelay = h }))
		}
		ctx := testContext(t)
		r := rand.New(rand.NewPCG(seed, 11))
		var wg sync.WaitGroup
		errs := make(chan error, n+1)
		send := func(cl *pool.Client, m pool.Message) {
			wg.Add(1)
			cl.PublishAsync(ctx, in, m, func(_ pulsarwire.MessageID, err error) {
				if err != nil {
					errs <- err
				}
				wg.Done()
			})
		}
		for i := range n {
			c := max(0, r.IntN(len(holds)+2)-2)
			send(cls[c], pool.Message{Key: fmt.Sprintf("k%d", r.IntN(keys)), Payload: fmt.Appendf(nil, "m-%d", i)})
			time.Sleep(10 * time.Millisecond) // the input spreads over real time
		}
		wg.Wait()
		time.Sleep(2 * reach) // flushKey's time is past every window's lateness
		send(cls[0], pool.Message{Key: flushKey, Payload: []byte("flush")})
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatalf("publish to %s: %v", in, err)
		}
		c := collect(t, clientURL(t, url), in)
		got := c.waitLen(t, n+1)
		c.close()
		slices.SortFunc(got, func(a, b *subscribe.Message) int { return a.ID.Compare(b.ID) })
		msgs := make([]genMsg, 0, len(got))
		for _, m := range got {
			msgs = append(msgs, genMsg{key: m.Key, t: m.PublishTime.UnixMilli(), payload: string(m.Payload)})
		}
		return msgs
	}
}

// windowInput publishes a test's input to topic in, at url, and returns
// it as the reference takes it: in topic order, each message at the time
// the windows place it. seed varies the input.
type windowInput func(t *testing.T, url, in string, seed uint64) []genMsg

// generatedInput is generate's 400 messages over 5 keys, their times
// the event times, or with asField in the JSON payload's field order.ts
// (the reference then holds the payloads as published).
func generatedInput(asField bool) windowInput {
	return func(t *testing.T, url, in string, seed uint64) []genMsg {
		msgs := generate(seed, 400, 5)
		publishGenerated(t, clientURL(t, url), in, msgs, asField)
		if asField {
			for i, m := range msgs {
				msgs[i].payload = fmt.Sprintf(`{"id":%q,"order":{"ts":%d}}`, m.payload, m.t)
			}
		}
		return msgs
	}
}

// disorder counts the messages of msgs whose time is before the newest
// before them (out of order), and those before the watermark, the newest
// less out_of_order (behind), late or not.
func disorder(w pipelines.Window, msgs []genMsg) (outOfOrder, behind int) {
	newest := int64(math.MinInt64)
	for _, m := range msgs {
		if newest != math.MinInt64 && m.t < newest {
			outOfOrder++
		}
		if newest != math.MinInt64 && m.t < newest-w.OutOfOrder.Milliseconds() {
			behind++
		}
		newest = max(newest, m.t)
	}
	return outOfOrder, behind
}

// testWindowsAgainstReference runs the input through a window pipeline
// whose handler crashes on a window of each key, with restart through a
// host stopped mid-stream and a second one going on, and checks every
// window's result against the reference; the late messages are dropped
// and counted, or with restart (each host counts its own) published to
// the late topic.
func testWindowsAgainstReference(t *testing.T, w pipelines.Window, input windowInput, restart bool, handler func(windowConfig) pipelines.Handler) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out, lateTopic := base+"-in", base+"-out", base+"-late"
	cl := clientURL(t, peer.URL)
	if w.Time == "" {
		w.Time = pipelines.TimeEvent
	}
	outs := windowResults{collect(t, cl, out)}
	var lates *collector
	if restart {
		w.LateTopic = lateTopic
		lates = collect(t, cl, lateTopic)
	}
	msgs := input(t, peer.URL, in, uint64(len(base)))
	want, late := referenceWithLate(w, msgs)
	ooo, behind := disorder(w, msgs)
	t.Logf("%d messages, %d out of order, %d of them behind the watermark, %d of those late; %d windows in the reference",
		len(msgs), ooo, behind, len(late), len(want))
	if len(late) == 0 || behind == len(late) || ooo == behind {
		t.Fatalf("the input has %d messages out of order, %d of them behind the watermark, %d of those late: the test wants some of each and some not", ooo, behind, len(late))
	}
	// One window a call, slow enough that the stop comes mid-stream.
	p := windowPipelineOf(in, out, w, windowConfig{Crash: true, MarkerDir: t.TempDir(), BatchDelay: 4 * time.Second / time.Duration(len(want))}, handler)
	p.Handler.BatchSize = 1
	opts := streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}
	if restart {
		// The first host's stop gives up soon: every window is due at
		// once, and a full drain would answer them all, leaving the
		// second host nothing to read back.
		opts.ShutdownTimeout = 300 * time.Millisecond
	}
	r := runHost(t, nil, opts, p)
	var restarts int64
	if restart {
		waitFor(t, "a quarter of the windows", func() bool { return len(outs.get(t)) >= len(want)/4 })
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		// The crashes fall on windows by their start's second: in
		// publish time, on the clock's, so perhaps after the first
		// host's quarter. Either host's restarts count.
		restarts = r.stats("windows").Restarts
		answered := len(outs.get(t))
		t.Logf("stopped with %d windows answered; a new host goes on", answered)
		if answered >= len(want) {
			t.Errorf("the first host answered every window: the test wants it stopped mid-stream")
		}
		opts.ShutdownTimeout = 0
		r = runHost(t, nil, opts, p)
	}
	waitAgree(t, outs, want)
	if restarts += r.stats("windows").Restarts; restarts == 0 {
		t.Errorf("the handler was not restarted; the test wants it to crash")
	}
	if !restart {
		if s := r.stats("windows"); s.Dropped < int64(len(late)) {
			t.Errorf("%d dropped, want the %d late messages", s.Dropped, len(late))
		}
		return
	}
	// A late message judged again by the second host comes again.
	slices.Sort(late)
	var got []string
	waitFor(t, "the late messages on the late topic", func() bool {
		got = slices.Compact(slices.Sorted(slices.Values(lates.payloads())))
		return len(got) >= len(late)
	})
	if !slices.Equal(got, late) {
		t.Errorf("the late topic holds %d messages, want the reference's %d late: %s", len(got), len(late), stringsDiff(got, late))
	}
}

// stringsDiff says which of got are not in want and which of want not in
// got (both sorted), a few of each.
func stringsDiff(got, want []string) string {
	var extra, missing []string
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			missing = append(missing, w)
		}
	}
	return fmt.Sprintf("not late %v, missing %v", extra[:min(len(extra), 5)], missing[:min(len(missing), 5)])
}

// waitAgree waits until the results agree with want, failing t with the
// differences after testTimeout.
func waitAgree(t *testing.T, outs windowResults, want map[winID][]string) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(testTimeout)
	for {
		diff := agree(outs.get(t), want)
		if diff == "" {
			t.Logf("the windows agree with the reference after %s", time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the windows differ from the reference after %s: %s", time.Since(start).Round(time.Millisecond), diff)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// windowChildHost is a child host (roleEnv "windowhost") running the
// tumbling pipeline of STREAMRUN_TEST_IN and _OUT at STREAMRUN_TEST_URL
// until it is killed (incremental with STREAMRUN_TEST_INCREMENTAL, in
// publish time with STREAMRUN_TEST_TIME=publish); it prints "running"
// once its pipeline runs.
func windowChildHost() {
	ctx := context.Background()
	h, err := streamrun.New(ctx, streamrun.Options{
		Pool:   pool.Options{ServiceURL: os.Getenv("STREAMRUN_TEST_URL")},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	w, incr := windowKinds[0].w, os.Getenv("STREAMRUN_TEST_INCREMENTAL") != ""
	if os.Getenv("STREAMRUN_TEST_TIME") == string(pipelines.TimePublish) {
		w = inPublishTime(w)
	}
	if incr {
		w.Mode = pipelines.ModeIncremental
	}
	p := windowPipeline(os.Getenv("STREAMRUN_TEST_IN"), os.Getenv("STREAMRUN_TEST_OUT"), w,
		windowConfig{BatchDelay: 40 * time.Millisecond, Incremental: incr})
	p.Handler.BatchSize = 1
	exactlyFromEnv(&p)
	go func() {
		err := h.Run(ctx, p)
		fmt.Println("error: Run returned:", err)
		os.Exit(1)
	}()
	for {
		if hs := h.Health(); len(hs) == 1 && hs[0].State == streamrun.StateHealthy {
			fmt.Println("running")
			select {}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A host killed with SIGKILL mid-stream and a new one started on the
// same pipeline: every tumbling window's result still equals the
// reference (a window answered before the kill may be answered again,
// whole), in event time and in publish time.
func TestWindowsEqualTheReferenceThroughAKilledHost(t *testing.T) {
	for _, tm := range []pipelines.WindowTime{pipelines.TimeEvent, pipelines.TimePublish} {
		t.Run(string(tm), func(t *testing.T) {
			peer := brokertest.Target(t)
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, peer.URL)
			w, input := windowKinds[0].w, generatedInput(false)
			w.Time = pipelines.TimeEvent
			if tm == pipelines.TimePublish {
				w = inPublishTime(w)
				input = publishedInput(w)
			}
			outs := windowResults{collect(t, cl, out)}
			msgs := input(t, peer.URL, in, uint64(len(base))+1)
			want, _ := referenceWindows(w, msgs)

			cmd := startWindowHost(t, peer.URL, in, out, "STREAMRUN_TEST_TIME="+string(tm))
			waitFor(t, "a third of the windows", func() bool { return len(outs.get(t)) >= len(want)/3 })
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			answered := len(outs.get(t))
			t.Logf("killed with %d of %d windows answered", answered, len(want))
			if answered >= len(want) {
				t.Errorf("the first host answered every window: the test wants it killed mid-stream")
			}

			p := windowPipeline(in, out, w, windowConfig{})
			runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)
			waitAgree(t, outs, want)
		})
	}
}

// BenchmarkWindowCount is a tumbling one-minute count per key over
// 10 000 keys in event time, 5 % of the messages up to 5 s out of order
// (out_of_order 5s), with the handler in a plugin process, beside the
// same pipeline without a window echoing each message (the stateless
// baseline, mode=none), each on an Exclusive subscription with batches
// of 100: mode=messages holds each window's messages and hands them to
// the handler when it fires; mode=incremental adds them to a count and
// a sum a window as they come (window.mode incremental). b.N messages
// of 100 bytes, 2 000 a second of event time, are published first
// (then one that closes every window); msg/s is b.N over the time from
// the host's start to the last acknowledgement and, with windows, to
// every window's answer on the output topic; host-cpu-µs/msg is the CPU
// the test process spent in that time (the host, the embedded broker,
// the output's consumer), plugin-cpu-µs/msg the handler process's: on a
// shared machine they vary less than the rate. The incremental answers
// are then checked against the reference. The broker is an embedded one
// in the test process, or Apache Pulsar with STREAMRUN_PULSAR_URL. With
// STREAMRUN_TEST_EXACTLY set, every pipeline (the stateless one too) is
// exactly_once, committing every 100 ms (on Apache Pulsar, the one at
// STREAMRUN_PULSAR_TXN_URL).
//
//	go test ./runtime -run '^$' -bench WindowCount -benchtime 200000x
func BenchmarkWindowCount(b *testing.B) {
	for _, mode := range []string{"none", "messages", "incremental"} {
		b.Run("mode="+mode, func(b *testing.B) {
			eo := os.Getenv("STREAMRUN_TEST_EXACTLY") != ""
			url := brokertest.TargetB(b, func(o *broker.Options) { o.Transactions = eo })
			if u := os.Getenv("STREAMRUN_PULSAR_TXN_URL"); eo && u != "" && brokertest.PulsarURL() != "" {
				url = u
			}
			run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
			in, out := "persistent://public/default/bench-window-in-"+run, "persistent://public/default/bench-window-out-"+run
			pub := clientURL(b, url)
			r := rand.New(rand.NewPCG(1, 2))
			payload := strings.Repeat("x", 100)
			msgs := make([]genMsg, 0, b.N+1)
			for i := range b.N {
				t := windowBase + int64(i)/2
				if r.IntN(100) < 5 {
					t -= int64(r.IntN(5000))
				}
				msgs = append(msgs, genMsg{key: fmt.Sprintf("key-%05d", i%10_000), t: t, payload: payload})
			}
			msgs = append(msgs, genMsg{key: flushKey, t: windowBase + 86_400_000, payload: "flush"})
			w := pipelines.Window{Type: pipelines.Tumbling, Size: time.Minute, OutOfOrder: 5 * time.Second, Time: pipelines.TimeEvent}
			want, _ := referenceWindows(w, msgs)
			publishGenerated(b, pub, in, msgs, false)
			var p pipelines.Pipeline
			switch mode {
			case "messages":
				p = windowPipeline(in, out, w, windowConfig{})
			case "incremental":
				w.Mode = pipelines.ModeIncremental
				p = windowPipeline(in, out, w, windowConfig{Incremental: true})
			default:
				h := self(testConfig{Output: out})
				p = pipelines.Pipeline{Name: "windows", Handler: h,
					Source: pipelines.Source{Topics: []string{in}, Subscription: "windows", Type: pipelines.Exclusive, InitialPosition: pipelines.Earliest}}
			}
			p.Handler.BatchSize = 100
			p.Outputs = []string{out}
			if eo {
				exactlyOnceWindows(&p)
				p.CommitInterval = 100 * time.Millisecond // as BenchmarkPipeline's exactly_once
			}
			var outs *collector
			if mode != "none" {
				outs = collect(b, pub, out)
			}
			b.ResetTimer()
			self0 := brokertest.CPUTime()
			start := time.Now()
			rh := runHost(b, nil, streamrun.Options{Logger: testLogger(b, slog.LevelError), Pool: pool.Options{ServiceURL: url}}, p)
			var pids []int
			for _, ih := range rh.health("windows").Instances {
				if ih.Pid != 0 {
					pids = append(pids, ih.Pid)
				}
			}
			plugin0 := brokertest.CPUTime(pids...) - brokertest.CPUTime()
			brokertest.Eventually(b, 10*time.Minute, "every message acknowledged, every window answered", func() bool {
				if s := rh.stats("windows"); s.Acked+s.Dropped < int64(len(msgs)) { // inputs: a window's fire is none
					return false
				}
				// Counted first, then by window: a window read back after a
				// resubscribe may be answered twice (at least once), and a
				// count alone then ends the wait before the last windows.
				return outs == nil || (outs.len() >= len(want) && answersEvery(b, outs, want))
			})
			elapsed := time.Since(start)
			self := brokertest.CPUTime()
			plugin := brokertest.CPUTime(pids...) - self - plugin0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
			perMsg := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
			b.ReportMetric(perMsg(self-self0), "host-cpu-µs/msg")
			b.ReportMetric(perMsg(plugin), "plugin-cpu-µs/msg")
			b.ReportMetric(0, "ns/op")
			if mode == "incremental" {
				if diff := accAgree(accResults(b, outs), accSums(want)); diff != "" {
					b.Fatalf("the incremental windows differ from the reference: %s", diff)
				}
			}
		})
	}
}

// answersEvery says whether c holds an answer for every window of want.
func answersEvery(t testing.TB, c *collector, want map[winID][]string) bool {
	got := make(map[winID]bool, len(want))
	for _, m := range c.all() {
		var r struct {
			Key   string `json:"key"`
			Start int64  `json:"start"`
		}
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			t.Fatalf("output %q: %v", m.Payload, err)
		}
		got[winID{r.Key, r.Start}] = true
	}
	for id := range want {
		if !got[id] {
			return false
		}
	}
	return true
}

// In processing time, a message is placed at the time the host took it
// and the clock is the watermark: every message of a key is in exactly
// one tumbling window of it, whose start and end hold the time it was
// placed at, and nothing is late; the windows close by the clock alone.
func TestProcessingTimeWindowsHoldEveryMessageOnce(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := windowResults{collect(t, cl, out)}
	w := pipelines.Window{Type: pipelines.Tumbling, Size: 200 * time.Millisecond, Time: pipelines.TimeProcessing}
	p := windowPipeline(in, out, w, windowConfig{})
	runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)
	const n, keys = 300, 4
	sent := map[string]string{}
	for i := range n {
		k, pl := fmt.Sprintf("k%d", i%keys), fmt.Sprintf("m-%d", i)
		sent[pl] = k
		publishOne(t, cl, in, pool.Message{Key: k, Payload: []byte(pl)})
		if i%50 == 0 {
			time.Sleep(100 * time.Millisecond) // over a few windows
		}
	}
	var seen map[string]int
	waitFor(t, "every message in a window", func() bool {
		seen = map[string]int{}
		for _, r := range outs.get(t) {
			for _, pl := range r.Payloads {
				seen[pl]++
			}
		}
		return len(seen) >= n
	})
	windows := outs.get(t)
	for id, r := range windows {
		if r.End-r.Start != w.Size.Milliseconds() || r.Start%w.Size.Milliseconds() != 0 {
			t.Errorf("window %v is [%d, %d), not a tumbling window of %s", id, r.Start, r.End, w.Size)
		}
		for i, tm := range r.Times {
			if tm < r.Start || tm >= r.End {
				t.Errorf("window %v [%d, %d) holds %s placed at %d", id, r.Start, r.End, r.Payloads[i], tm)
			}
			if sent[r.Payloads[i]] != r.Key {
				t.Errorf("window of key %s holds %s of key %s", r.Key, r.Payloads[i], sent[r.Payloads[i]])
			}
		}
	}
	for pl, c := range seen {
		if c != 1 {
			t.Errorf("%s is in %d windows", pl, c)
		}
	}
	if len(windows) < 2*keys {
		t.Errorf("%d windows: the messages were sent over several", len(windows))
	}
}
