package runtime_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// Two fired sessions of a key, then messages within the allowed
// lateness: one between them merges them (the session fires again from
// the first's start, its fire count going on, naming the second as
// taken in), one before the first's start moves it (it fires from the
// new start, naming the old one). Nothing fires twice as a first fire.
func TestALateMessageMergesFiredSessions(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, cl, out)
	w := pipelines.Window{Type: pipelines.Session, Gap: 10 * time.Second, AllowedLateness: time.Minute, Time: pipelines.TimeEvent}
	runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, windowPipeline(in, out, w, windowConfig{}))
	at := func(key string, s int64) {
		publishOne(t, cl, in, pool.Message{Key: key, Payload: fmt.Appendf(nil, "%s@%d", key, s), EventTime: time.UnixMilli(windowBase + s*1000)})
	}
	results := func() []windowResult {
		var rs []windowResult
		for _, m := range outs.all() {
			var r windowResult
			if err := json.Unmarshal(m.Payload, &r); err != nil {
				t.Fatal(err)
			}
			if r.Key == "a" {
				r.Start = (r.Start - windowBase) / 1000
				for i := range r.Replaces {
					r.Replaces[i] = (r.Replaces[i] - windowBase) / 1000
				}
				slices.Sort(r.Payloads)
				rs = append(rs, r)
			}
		}
		return rs
	}
	waitResults := func(n int) []windowResult {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d results of key a", n), func() bool { return len(results()) >= n })
		rs := results()
		if len(rs) != n {
			t.Fatalf("%d results, want %d: %+v", len(rs), n, rs)
		}
		return rs
	}
	at("a", 100)
	at("a", 115)
	at("b", 150) // the watermark: both of a's sessions fire
	rs := waitResults(2)
	slices.SortFunc(rs, func(x, y windowResult) int { return int(x.Start - y.Start) })
	if rs[0].Start != 100 || rs[1].Start != 115 || rs[0].Fire != 1 || rs[1].Fire != 1 {
		t.Fatalf("first fires: %+v", rs)
	}

	at("a", 108) // within gap of both
	r := waitResults(3)[2]
	if r.Start != 100 || r.Fire != 2 || !slices.Equal(r.Replaces, []int64{115}) ||
		!slices.Equal(r.Payloads, []string{"a@100", "a@108", "a@115"}) {
		t.Errorf("the merged session: %+v; want start 100, fire 2, replaces [115], three messages", r)
	}

	at("a", 95) // before the start
	r = waitResults(4)[3]
	if r.Start != 95 || r.Fire != 3 || !slices.Equal(r.Replaces, []int64{100}) || len(r.Payloads) != 4 {
		t.Errorf("the session moved back: %+v; want start 95, fire 3, replaces [100], four messages", r)
	}
}

// A message that comes after a fired session's horizon, at a time
// inside that session, starts a session of its own (the fired one is
// past joining); the two overlap. Each fires once, with its own
// message, as the reference has them: the earlier does not fire again
// in the later's place (naming it as taken in) for spanning its start.
func TestASessionStartedInsideAFiredOneIsNotTakenIn(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, cl, out)
	w := pipelines.Window{Type: pipelines.Session, Gap: 10 * time.Second, AllowedLateness: 40 * time.Second, Time: pipelines.TimeEvent}
	// Slow answers: a's first session is still being answered (so not
	// forgotten) when the message inside it is placed.
	runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}},
		windowPipeline(in, out, w, windowConfig{BatchDelay: 300 * time.Millisecond}))
	at := func(key string, s int64) {
		publishOne(t, cl, in, pool.Message{Key: key, Payload: fmt.Appendf(nil, "%s@%d", key, s), EventTime: time.UnixMilli(windowBase + s*1000)})
	}
	results := func(key string) []windowResult {
		var rs []windowResult
		for _, m := range outs.all() {
			var r windowResult
			if err := json.Unmarshal(m.Payload, &r); err != nil {
				t.Fatal(err)
			}
			if r.Key == key {
				r.Start = (r.Start - windowBase) / 1000
				for i := range r.Replaces {
					r.Replaces[i] = (r.Replaces[i] - windowBase) / 1000
				}
				rs = append(rs, r)
			}
		}
		slices.SortFunc(rs, func(x, y windowResult) int { return int(x.Start - y.Start) })
		return rs
	}
	at("a", 100)
	at("b", 150) // the watermark 150: a's session [100, 110) fires; the horizon 110
	at("a", 105) // after the horizon: [105, 115) of its own
	// Then c's session fires after both of a's and their answers.
	waitFor(t, "both of a's sessions", func() bool { return len(results("a")) >= 2 })
	at("c", 200)
	at("d", 300)
	waitFor(t, "c's session", func() bool { return len(results("c")) >= 1 })
	want := []string{"[100 fire 1 [a@100] replaces []]", "[105 fire 1 [a@105] replaces []]"}
	var got []string
	for _, r := range results("a") {
		got = append(got, fmt.Sprintf("[%d fire %d %v replaces %v]", r.Start, r.Fire, r.Payloads, r.Replaces))
	}
	if !slices.Equal(got, want) {
		t.Errorf("a's results: %v\nwant %v", got, want)
	}
}

// Messages of a key that come with nothing newer between them share a
// horizon, and are taken in the order they came: one whose own session
// is past its horizon joins the session a message before it, later in
// time, made reachable. The session fires whole, as the reference has
// it; none of them is late.
func TestASessionKeepsAMessageThatJoinedItThroughALaterOne(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := windowResults{collect(t, cl, out)}
	w := pipelines.Window{Type: pipelines.Session, Gap: 7 * time.Second, OutOfOrder: 5 * time.Second, Time: pipelines.TimeEvent}
	at := func(s int64) genMsg { return genMsg{key: "a", t: windowBase + s*1000, payload: fmt.Sprintf("a@%d", s)} }
	msgs := []genMsg{
		at(200), // [200, 207); the watermark 195, the horizon of what follows
		at(194), // [194, 201) is past the horizon, and joins [200, 207)
		at(188), // [188, 195) is not, but it joins [194, 207)
		{key: flushKey, t: windowBase + 86_400_000, payload: "flush"},
	}
	want, late := referenceWindows(w, msgs)
	if ps := want[winID{"a", windowBase + 188_000}]; len(want) != 1 || len(ps) != 3 || late != 0 {
		t.Fatalf("the reference has %v, %d late; want one session of a from 188 holding all three", want, late)
	}
	publishGenerated(t, cl, in, msgs, false)
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, windowPipeline(in, out, w, windowConfig{}))
	waitAgree(t, outs, want)
	if s := r.stats("windows"); s.Dropped != 0 {
		t.Errorf("%d dropped, want none", s.Dropped)
	}
}
