package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// A window pipeline's stats count its inputs, the messages of its
// subscription: once it has drained, every input is acknowledged
// (Acked) or dropped as late (Dropped), and InFlight is 0, though the
// handler asked to retry the first call (add or fire) of each window of
// one key and dead-lettered a window. A window's calls are the host's,
// not inputs: the handler's answers to them count in Processed, their
// outcomes under no input's, and a dead-lettered window only in the
// dead letters' reasons (docs/runtime.md). Counted as inputs' outcomes,
// they took InFlight below 0 and Acked past the inputs.
func TestAWindowPipelinesStatsCountItsInputs(t *testing.T) {
	for _, incr := range []bool{false, true} {
		name := "messages"
		if incr {
			name = "incremental"
		}
		t.Run(name, func(t *testing.T) {
			peer := brokertest.Target(t)
			base := brokertest.TopicName(t)
			in, out, dlq := base+"-in", base+"-out", base+"-dlq"
			cl := clientURL(t, peer.URL)
			w := pipelines.Window{Type: pipelines.Tumbling, Size: 10 * time.Second, OutOfOrder: 5 * time.Second, Time: pipelines.TimeEvent}
			if incr {
				w.Mode = pipelines.ModeIncremental
			}
			msgs := generate(uint64(len(base))+3, 300, 5)
			ref, late := referenceWindows(w, msgs)
			for id := range ref {
				if id.key == flushKey {
					delete(ref, id) // open still
				}
			}
			t.Logf("%d messages, %d late; %d windows in the reference", len(msgs), late, len(ref))
			outs, dead := collect(t, cl, out), collect(t, cl, dlq)

			const reason = "the test dead-letters a window"
			var mu sync.Mutex
			var answered, retried int64 // window calls' messages answered; calls retried
			var deadWindow winID
			firstCall := map[winID]bool{}
			intercept := func(ctx context.Context, c streamrun.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
				res, err := next(ctx)
				if err != nil {
					return res, err
				}
				mu.Lock()
				defer mu.Unlock()
				answered += int64(len(c.Messages))
				for i, m := range c.Messages {
					id, ok := windowOf(m)
					if !ok {
						t.Errorf("a call of a window pipeline with a message of no window: %v", m.Properties)
						continue
					}
					_, fire := m.Properties[streamrun.PropertyWindowFire]
					switch {
					case id.key == "k0" && !firstCall[id]:
						firstCall[id] = true
						res[i] = plugin.Result{Outcome: plugin.OutcomeRetry, RetryDelay: time.Millisecond, Reason: "the test's retry"}
						retried++
					case id.key == "k1" && fire && deadWindow == winID{}:
						deadWindow = id
						res[i] = plugin.Result{Outcome: plugin.OutcomeDeadLetter, Reason: reason}
					}
				}
				return res, nil
			}
			publishGenerated(t, cl, in, msgs, false)
			p := windowPipeline(in, out, w, windowConfig{Incremental: incr})
			p.ErrorPolicy.MaxRetries, p.ErrorPolicy.DeadLetterTopic = 3, dlq
			r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Intercept: intercept}, p)

			// Drained: every window of the reference answered, or
			// dead-lettered.
			waitFor(t, "every window answered", func() bool {
				got := map[winID]bool{}
				for _, m := range outs.all() {
					var res windowResult
					if err := json.Unmarshal(m.Payload, &res); err != nil {
						t.Fatalf("output %q: %v", m.Payload, err)
					}
					got[winID{res.Key, res.Start}] = true
				}
				for _, m := range dead.all() {
					id, _ := windowOf(m)
					got[id] = true
				}
				for id := range ref {
					if !got[id] {
						return false
					}
				}
				return true
			})
			mu.Lock()
			t.Logf("%d window calls retried; window %v dead-lettered", retried, deadWindow)
			if retried == 0 || deadWindow == (winID{}) {
				t.Errorf("%d calls retried, dead-lettered window %v: the test did not drive the outcomes it is about", retried, deadWindow)
			}
			mu.Unlock()

			want := func() streamrun.Stats {
				mu.Lock()
				defer mu.Unlock()
				return streamrun.Stats{Pipeline: "windows", Received: int64(len(msgs)), Processed: answered,
					Acked: int64(len(msgs) - late), Dropped: int64(late)}
			}
			counts := func(s streamrun.Stats) string {
				return fmt.Sprintf("received %d, processed %d, acked %d, retried %d, dead-lettered %d, dropped %d, filtered %d, handed back %d, in flight %d",
					s.Received, s.Processed, s.Acked, s.Retried, s.DeadLettered, s.Dropped, s.Filtered, s.HandedBack, s.InFlight)
			}
			// The last answers' settling may trail their outputs a moment.
			var got streamrun.Stats
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				got = r.stats("windows")
				if counts(got) == counts(want()) || time.Now().After(deadline) {
					break
				}
			}
			if counts(got) != counts(want()) {
				t.Errorf("the stats of the drained window pipeline:\n got %s\nwant %s", counts(got), counts(want()))
			}
			found := false
			for _, d := range got.DeadLetterReasons {
				if d.Reason == reason && d.Count == 1 {
					found = true
				}
			}
			if !found {
				t.Errorf("the dead-lettered window is not in the dead letters' reasons once: %+v", got.DeadLetterReasons)
			}
		})
	}
}

// windowOf is the window of a window's call: its key (an incremental
// add's message has start|key) and start.
func windowOf(m *subscribe.Message) (winID, bool) {
	start, err := strconv.ParseInt(m.Properties[streamrun.PropertyWindowStart], 10, 64)
	if err != nil {
		return winID{}, false
	}
	key := m.Key
	if _, add := m.Properties[streamrun.PropertyWindowAdd]; add {
		key = strings.TrimPrefix(key, strconv.FormatInt(start, 10)+"|")
	}
	return winID{key, start}, true
}
