package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// windowCalls watches a window pipeline's calls to its instances: which
// windows (key and start) each slot has in calls at the moment, how
// often a call began while another was out on its slot, and every call
// that began while another one out there held one of its windows.
type windowCalls struct {
	mu         sync.Mutex
	busy       map[int]map[winID]int // by slot, then window: calls out holding it
	out        map[int]int           // calls out, by slot
	overlapped int
	clashes    []string
}

func (w *windowCalls) intercept(ctx context.Context, c streamrun.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
	// A call holds a window's messages (messages mode) or its add or
	// fire (incremental), each naming it: an add and a fire of one window
	// are one window here.
	wins := map[winID]bool{}
	for _, m := range c.Messages {
		if id, ok := windowOf(m); ok {
			wins[id] = true
		}
	}
	w.mu.Lock()
	busy := w.busy[c.Instance]
	if busy == nil {
		busy = map[winID]int{}
		w.busy[c.Instance] = busy
	}
	if w.out[c.Instance] > 0 {
		w.overlapped++
	}
	for id := range wins {
		if busy[id] > 0 && len(w.clashes) < 10 {
			w.clashes = append(w.clashes, fmt.Sprintf("instance %d: a call of window %s@%d began while another of it was out", c.Instance, id.key, id.start))
		}
		busy[id]++
	}
	w.out[c.Instance]++
	w.mu.Unlock()

	res, err := next(ctx)

	w.mu.Lock()
	for id := range wins {
		busy[id]--
	}
	w.out[c.Instance]--
	w.mu.Unlock()
	return res, err
}

// A window pipeline at least once gives an instance its next batch of
// window calls while the last is still out (docs/runtime.md, "Batches in
// flight"): at a window's end every key's window is due at once. The
// calls overlap, but never two of one window, whose calls must keep
// their order (an add before its fire), and every window's answer still
// equals the reference. Fails on the code before the overlap: a slot's
// calls never overlapped.
func TestWindowCallsOverlapButNeverShareAWindow(t *testing.T) {
	for _, mode := range []pipelines.WindowMode{pipelines.ModeIncremental, pipelines.ModeMessages} {
		t.Run("mode="+string(mode), func(t *testing.T) {
			peer := brokertest.Target(t)
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, peer.URL)
			w := pipelines.Window{Type: pipelines.Tumbling, Size: time.Minute, OutOfOrder: 5 * time.Second, Time: pipelines.TimeEvent, Mode: mode}
			// A minute's 60 messages over 200 keys: some 50 windows
			// close at each minute's end, a dozen batches of four.
			msgs := generate(uint64(len(base)), 1200, 200)
			ref, late := referenceWindows(w, msgs)
			t.Logf("%d messages, %d late; %d windows in the reference", len(msgs), late, len(ref))
			raw := collect(t, cl, out)
			publishGenerated(t, cl, in, msgs, false)
			incr := mode == pipelines.ModeIncremental
			p := windowPipeline(in, out, w, windowConfig{Incremental: incr, BatchDelay: 3 * time.Millisecond})
			calls := &windowCalls{busy: map[int]map[winID]int{}, out: map[int]int{}}
			runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Intercept: calls.intercept}, p)
			if incr {
				want := accSums(ref)
				waitFor(t, "the windows equal the reference", func() bool { return accAgree(accResults(t, raw), want) == "" })
			} else {
				waitAgree(t, windowResults{raw}, ref)
			}
			calls.mu.Lock()
			defer calls.mu.Unlock()
			for _, c := range calls.clashes {
				t.Error(c)
			}
			if calls.overlapped == 0 {
				t.Error("no call began while another was out on its instance: the batches never overlapped")
			}
			t.Logf("%d calls began while another was out on their instance", calls.overlapped)
		})
	}
}
