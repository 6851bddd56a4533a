package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// callPeak counts the calls inside a handler and the most at once.
type callPeak struct {
	inside, peak, calls atomic.Int32
}

func (c *callPeak) enter() int32 {
	k := c.inside.Add(1)
	c.calls.Add(1)
	for {
		p := c.peak.Load()
		if k <= p || c.peak.CompareAndSwap(p, k) {
			return k
		}
	}
}

// runDeep runs an in-process handler h on a Shared subscription with
// depth batches in flight (0: the default) and the given timeout over n
// messages,
// and waits until every input is acknowledged.
func runDeep(t *testing.T, name string, n, depth int, timeout time.Duration, h func(out string) plugin.Handler) *running {
	t.Helper()
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
	got := collect(t, cl, out)
	handler := h(out)
	r := runHost(t, c, streamrun.Options{
		LocalHandlers: map[string]func() plugin.Handler{name: func() plugin.Handler { return handler }},
	}, pipelines.Pipeline{
		Name:   name,
		Source: pipelines.Source{Topics: []string{in}, Subscription: name, Type: pipelines.Shared, InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: "unused", BatchSize: 10, BatchWait: time.Millisecond,
			Instances: 1, Timeout: timeout, MaxBatchesInFlight: depth},
		Outputs: []string{out},
	})
	got.waitLen(t, n)
	waitFor(t, "every input acknowledged", func() bool { return r.stats(name).Acked == int64(n) })
	if s := r.stats(name); s.Retried != 0 || s.Crashes != 0 {
		t.Errorf("stats %+v: want no retry, no crash", s)
	}
	return r
}

// A handler that answers fast gets more than two batches at once (up to
// its 8, the default for a plugin on Shared): after its first answers, a
// handler that waits (10 s at most, once) for a third call inside it
// sees one.
func TestAFastHandlerGetsMoreThanTwoBatchesAtOnce(t *testing.T) {
	var cp callPeak
	three, gaveUp := make(chan struct{}), make(chan struct{})
	var once, giveUp sync.Once
	runDeep(t, "deep", 400, pipelines.DefaultSharedBatchesInFlight, time.Minute, func(out string) plugin.Handler {
		return plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
			k := cp.enter()
			defer cp.inside.Add(-1)
			if k >= 3 {
				once.Do(func() { close(three) })
			}
			if cp.calls.Load() > 4 { // the first answers fast, then wait for company
				select {
				case <-three:
				case <-gaveUp:
				case <-time.After(10 * time.Second):
					giveUp.Do(func() { close(gaveUp) }) // the peak tells; the rest flows
				}
			}
			for _, m := range batch {
				w.Output(m, plugin.Output{Topic: out, Payload: m.Payload})
			}
			return nil
		})
	})
	if p := cp.peak.Load(); p < 3 || p > pipelines.DefaultSharedBatchesInFlight {
		t.Errorf("at most %d batches inside the handler at once, want 3 to %d", p, pipelines.DefaultSharedBatchesInFlight)
	}
}

// A handler slower than a quarter of its timeout a batch gets two
// batches at once, not the 8 it may have: each
// batch's timeout runs from its send, so eight queued for it would wait
// past the timeout and the instance be taken for hung.
func TestASlowHandlerGetsTwoBatchesAtOnce(t *testing.T) {
	var cp callPeak
	const timeout = 2 * time.Second
	runDeep(t, "slow", 60, pipelines.DefaultSharedBatchesInFlight, timeout, func(out string) plugin.Handler {
		return plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
			cp.enter()
			defer cp.inside.Add(-1)
			time.Sleep(timeout/4 + 100*time.Millisecond)
			for _, m := range batch {
				w.Output(m, plugin.Output{Topic: out, Payload: m.Payload})
			}
			return nil
		})
	})
	if p := cp.peak.Load(); p != 2 {
		t.Errorf("at most %d batches inside the handler at once, want 2", p)
	}
}

// An in-process handler on Shared gets 2 batches at once by default, not
// a plugin's 8: there is no round trip to hide. A fast handler that
// waits (a second at most, once) for a third call inside it never sees
// one.
func TestAnInProcessHandlerGetsTwoBatchesByDefault(t *testing.T) {
	var cp callPeak
	gaveUp := make(chan struct{})
	var giveUp sync.Once
	runDeep(t, "local", 200, 0, time.Minute, func(out string) plugin.Handler {
		return plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
			k := cp.enter()
			defer cp.inside.Add(-1)
			if k < 3 && cp.calls.Load() > 4 {
				select {
				case <-gaveUp:
				case <-time.After(time.Second):
					giveUp.Do(func() { close(gaveUp) })
				}
			}
			for _, m := range batch {
				w.Output(m, plugin.Output{Topic: out, Payload: m.Payload})
			}
			return nil
		})
	})
	if p := cp.peak.Load(); p > pipelines.DefaultLocalBatchesInFlight {
		t.Errorf("%d batches inside the handler at once, want at most %d", p, pipelines.DefaultLocalBatchesInFlight)
	}
}
