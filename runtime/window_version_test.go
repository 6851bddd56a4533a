package runtime_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// callGate holds the calls to the plugin processes it is told to, until
// it lets them go.
type callGate struct {
	mu      sync.Mutex
	held    map[int]chan struct{} // by pid
	waiting atomic.Int32
}

func (g *callGate) hold(pids ...int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, pid := range pids {
		if g.held[pid] == nil {
			g.held[pid] = make(chan struct{})
		}
	}
}

func (g *callGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pid, ch := range g.held {
		close(ch)
		delete(g.held, pid)
	}
}

func (g *callGate) intercept(ctx context.Context, c streamrun.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
	g.mu.Lock()
	ch := g.held[c.Pid]
	g.mu.Unlock()
	if ch != nil {
		g.waiting.Add(1)
		select {
		case <-ch:
		case <-ctx.Done():
		}
		g.waiting.Add(-1)
	}
	return next(ctx)
}

// An add and fire in one (contract version 5) made for an instance that
// turns out to speak version 4 is handed back and made again as an add,
// then a fire. Two instance slots are rolled between a handler of
// version 5 and the same binary capped at 4 while windows are due:
// from 5 to 4 with add-and-fires queued behind held calls (they meet the
// new instance of version 4), and from 4 to 5 held half-way, one slot
// of each version (the windows then make add-and-fires, which the slot
// still of version 4 is handed, while more windows come due). Every
// window fires once with every message counted once, as the reference
// says; none is dead-lettered though max_retries is 1 and the handler
// asks once to retry the add of each window handed back (the host's
// hand-back is not the handler's retry: counted as one, that retry, or
// a second hand-back, dead-lettered the window's messages), and no
// window is
// handed back twice (it is made again as an add, then a fire, not as an
// add and fire for the slot of version 4 to hand back again).
func TestIncrementalWindowsEqualTheReferenceThroughContractVersionSwaps(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	w := pipelines.Window{Type: pipelines.Tumbling, Size: 10 * time.Second, OutOfOrder: 5 * time.Second, Time: pipelines.TimeEvent,
		Mode: pipelines.ModeIncremental}
	msgs := generate(uint64(len(base))+11, 800, 8)
	ref, late := referenceWindows(w, msgs)
	want := accSums(ref)
	for id := range want {
		if id.key == flushKey {
			delete(want, id) // open still
		}
	}
	t.Logf("%d messages, %d late; %d windows in the reference", len(msgs), late, len(want))
	outs := collect(t, cl, out)

	version := func(v string) pipelines.Pipeline {
		p := windowPipeline(in, out, w, windowConfig{Incremental: true})
		p.Handler.Instances = 2
		p.Handler.Env = maps.Clone(p.Handler.Env)
		p.Handler.Env["STREAMRUN_PLUGIN_MAX_CONTRACT_VERSION"] = v
		p.ErrorPolicy.MaxRetries = 1
		return p
	}
	v5, v4 := version("5"), version("4")
	g := &callGate{held: map[int]chan struct{}{}}
	var mu sync.Mutex
	bounced := map[string]int{} // add-and-fires handed back, by window
	// Windows' calls dead-lettered: a window pipeline's Stats count its
	// inputs only, so the hook is where a window's outcome shows.
	var deadWindows atomic.Int64
	hooks := streamrun.Hooks{Message: func(_ string, m *subscribe.Message, o streamrun.Outcome, _ string) {
		_, add := m.Properties[streamrun.PropertyWindowAdd]
		_, fire := m.Properties[streamrun.PropertyWindowFire]
		if add && fire && o == streamrun.Retried {
			mu.Lock()
			bounced[m.Key]++
			mu.Unlock()
		}
		if o == streamrun.DeadLettered {
			deadWindows.Add(1)
		}
	}}
	handedBack := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range bounced {
			n += b
		}
		return n
	}
	// The handler (as the interceptor answers for it) asks once to retry
	// the first add of each window handed back: with max_retries 1 that
	// is a retry it may still ask for.
	retriedAdd := map[string]bool{}
	intercept := func(ctx context.Context, c streamrun.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
		res, err := g.intercept(ctx, c, next)
		if err != nil {
			return res, err
		}
		mu.Lock()
		defer mu.Unlock()
		for i, m := range c.Messages {
			_, fire := m.Properties[streamrun.PropertyWindowFire]
			if _, add := m.Properties[streamrun.PropertyWindowAdd]; add && !fire && bounced[m.Key] > 0 && !retriedAdd[m.Key] {
				retriedAdd[m.Key] = true
				res[i] = plugin.Result{Outcome: plugin.OutcomeRetry, RetryDelay: time.Millisecond, Reason: "the test's retry of an add"}
			}
		}
		return res, nil
	}
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Intercept: intercept, Hooks: hooks}, v5)
	ctx := testContext(t)
	reload := func(p pipelines.Pipeline) <-chan error {
		done := make(chan error, 1)
		go func() { done <- r.host.Reload(ctx, p) }()
		return done
	}
	slot0 := func() int {
		if ps := pids(r, "windows"); len(ps) == 2 {
			return ps[0]
		}
		return 0
	}
	parts := [][]genMsg{msgs[:200], msgs[200:400], msgs[400:600], msgs[600:]}

	// From 5 to 4: both instances' calls held while the first part's
	// windows come due (add-and-fires, queued); released once slot 0
	// runs version 4.
	g.hold(pids(r, "windows")...)
	publishGenerated(t, cl, in, parts[0], false)
	waitFor(t, "a call held", func() bool { return g.waiting.Load() > 0 })
	time.Sleep(500 * time.Millisecond) // the due windows are made and queued
	old := slot0()
	done := reload(v4)
	waitFor(t, "slot 0 on version 4", func() bool { s := slot0(); return s != 0 && s != old })
	g.release()
	if err := <-done; err != nil {
		t.Fatalf("reload to version 4: %v", err)
	}
	first := handedBack()
	t.Logf("from 5 to 4: %d add-and-fires handed back", first)

	// From 4 to 5, held half-way: slot 0's old instance (version 4)
	// keeps a call, so the roll waits with slot 0 on version 5 and slot 1
	// on 4, while the next parts' windows come due.
	old = slot0()
	g.hold(old)
	publishGenerated(t, cl, in, parts[1], false)
	waitFor(t, "a call of slot 0 held", func() bool { return g.waiting.Load() > 0 })
	done = reload(v5)
	waitFor(t, "slot 0 on version 5", func() bool { s := slot0(); return s != 0 && s != old })
	publishGenerated(t, cl, in, parts[2], false)
	time.Sleep(time.Second) // windows come due and go to slot 1
	g.release()
	if err := <-done; err != nil {
		t.Fatalf("reload to version 5: %v", err)
	}
	t.Logf("from 4 to 5: %d add-and-fires handed back", handedBack()-first)

	publishGenerated(t, cl, in, parts[3], false)
	deadline := time.Now().Add(testTimeout)
	for {
		diff := accAgree(accResults(t, outs), want)
		if diff == "" {
			break
		}
		if st := r.stats("windows"); deadWindows.Load() > 0 || st.DeadLettered > 0 || st.Crashes > 0 || time.Now().After(deadline) {
			t.Fatalf("the incremental windows differ from the reference: %s (stats %+v)", diff, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a window fired twice would be by now
	fires := map[winID]int{}
	for _, m := range outs.all() {
		var res windowResult
		if err := json.Unmarshal(m.Payload, &res); err != nil {
			t.Fatal(err)
		}
		fires[winID{res.Key, res.Start}]++
	}
	var twice []winID
	for id, n := range fires {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	if len(twice) > 0 {
		slices.SortFunc(twice, func(a, b winID) int { return int(a.start - b.start) })
		t.Errorf("%d windows fired more than once, e.g. %v", len(twice), twice[0])
	}
	st := r.stats("windows")
	t.Logf("%d windows; stats %+v", len(want), st)
	if st.Crashes != 0 {
		t.Errorf("%d crashes: an add and fire in one reached an instance of version 4", st.Crashes)
	}
	if n := deadWindows.Load() + st.DeadLettered; n != 0 {
		t.Errorf("%d dead-lettered: a hand-back for the contract version counted as the handler's retry", n)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d windows handed back; %d of their adds retried", len(bounced), len(retriedAdd))
	if len(bounced) == 0 {
		t.Errorf("no add-and-fire was handed back: the swaps did not meet due windows, and the test did not drive the path")
	}
	for win, n := range bounced {
		if n > 1 {
			t.Errorf("window %s was handed back as an add and fire %d times, want once, then an add and a fire", win, n)
			break
		}
	}
}
