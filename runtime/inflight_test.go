package runtime_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// With MaxBatchesInFlight 2 on a Shared subscription, one instance
// really has two batches at once: a handler that waits (up to a
// deadline) until a second call is inside it sees one. The outputs still
// come out in the order the batches were sent, though the batches end
// out of order, and never more than 2 are inside.
func TestTwoBatchesInFlightOnOneInstance(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	const n = 2000
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
	got := collect(t, cl, out)

	var inside, peak atomic.Int32
	two := make(chan struct{})
	var twoOnce sync.Once
	var calls atomic.Int64
	h := plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
		k := inside.Add(1)
		defer inside.Add(-1)
		calls.Add(1)
		for {
			p := peak.Load()
			if k <= p || peak.CompareAndSwap(p, k) {
				break
			}
		}
		if k >= 2 {
			twoOnce.Do(func() { close(two) })
		}
		select {
		case <-two:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("no second batch came in 10s")
		}
		// End out of order now and then.
		time.Sleep(rand.N(2 * time.Millisecond))
		for _, m := range batch {
			w.Output(m, plugin.Output{Topic: out, Payload: m.Payload})
		}
		return nil
	})
	r := runHost(t, c, streamrun.Options{
		LocalHandlers: map[string]func() plugin.Handler{"twice": func() plugin.Handler { return h }},
	}, pipelines.Pipeline{
		Name:   "twice",
		Source: pipelines.Source{Topics: []string{in}, Subscription: "twice", Type: pipelines.Shared, InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: "unused", BatchSize: 50, BatchWait: time.Millisecond,
			Instances: 1, MaxBatchesInFlight: 2},
		Outputs: []string{out},
	})
	select {
	case <-two:
	case <-time.After(10 * time.Second):
		t.Fatal("the instance never had two batches at once")
	}
	msgs := got.waitLen(t, n)
	waitFor(t, "every input acknowledged", func() bool { return r.stats("twice").Acked == n })
	if p := peak.Load(); p != 2 {
		t.Errorf("at most %d batches inside the handler at once, want 2", p)
	}
	// One instance, one consumer: the outputs come in the input's order.
	for i, m := range msgs {
		if want := fmt.Sprintf("m-%d", i); string(m.Payload) != want {
			t.Fatalf("output %d is %q, want %q: not in batch order", i, m.Payload, want)
		}
	}
	if s := r.stats("twice"); s.Retried != 0 || s.Crashes != 0 {
		t.Errorf("stats %+v: want no retry, no crash", s)
	}
	t.Logf("%d calls", calls.Load())
}
