package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin/host"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// fastRestarts keeps crash tests quick: restarts 10 ms apart, at most
// 50 ms.
var fastRestarts = streamrun.RestartPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}

// A handler that does not answer within the timeout is killed; its batch
// is retried on a fresh instance and every message comes through.
func TestAHungHandlerIsKilledAndItsBatchRetried(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	payloads := []string{"a-1", "hang:b-2", "c-3", "d-4"}
	publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)
	got := collect(t, cl, out)
	h := self(testConfig{Output: out, MarkerDir: t.TempDir()})
	h.Timeout = 300 * time.Millisecond
	r := runHost(t, c, streamrun.Options{Restart: fastRestarts, Logger: testLogger(t, slog.LevelError+4)}, pipelines.Pipeline{
		Name:    "hang",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "hang", InitialPosition: pipelines.Earliest},
		Handler: h,
	})
	got.waitLen(t, len(payloads))
	p := got.payloads()
	slices.Sort(p)
	if slices.Sort(payloads); !slices.Equal(p, payloads) {
		t.Errorf("outputs %q, want %q", p, payloads)
	}
	s := r.stats("hang")
	ih := r.health("hang").Instances[0]
	if s.Crashes != 1 || s.Restarts != 1 || !strings.Contains(ih.LastError, "did not answer") {
		t.Errorf("stats %+v, instance %+v: want one hang, one restart", s, ih)
	}
}

// A message the handler panics on every time is dead-lettered after
// MaxCrashes crashes, the first included though other batches could have
// been in flight beside it: the crashes the pipeline counts are those the
// reason gives. One that makes the plugin exit (no message named) is
// found by splitting its batch, then dead-lettered; the messages around
// it go through.
func TestAPoisonMessageIsDeadLettered(t *testing.T) {
	for _, kind := range []string{"panic", "exit"} {
		t.Run(kind, func(t *testing.T) {
			c := cluster(t)
			cl := client(t, c)
			in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
			var payloads []string
			for i := range 16 {
				payloads = append(payloads, fmt.Sprintf("fine-%d", i))
			}
			// The panicky example panics on its configured payload, and
			// names the message (it is a MessageFunc).
			h := pipelines.Handler{Plugin: example("panicky"), Config: map[string]any{"payload": "poison", "output": out}}
			payloads[11] = "poison"
			want := "crashed 3 times"
			if kind == "exit" {
				h = self(testConfig{Output: out})
				payloads[11] = "exit:poison"
				want = "failed 3 times on it alone"
			}
			h.BatchWait = 200 * time.Millisecond // one batch of 16
			publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)
			outs, dead := collect(t, cl, out), collect(t, cl, dlq)
			r := runHost(t, c, streamrun.Options{Restart: fastRestarts, Logger: testLogger(t, slog.LevelError+4)}, pipelines.Pipeline{
				Name:        "poison",
				Source:      pipelines.Source{Topics: []string{in}, Subscription: "poison", InitialPosition: pipelines.Earliest},
				Handler:     h,
				ErrorPolicy: pipelines.ErrorPolicy{DeadLetterTopic: dlq},
			})
			outs.waitLen(t, 15)
			d := dead.waitLen(t, 1)
			if string(d[0].Payload) != payloads[11] {
				t.Fatalf("dead letter %q", d[0].Payload)
			}
			reason := d[0].Properties[streamrun.PropertyDeadLetterReason]
			if !strings.Contains(reason, want) {
				t.Errorf("reason %q, want it to say %q", reason, want)
			}
			waitFor(t, "everything settled", func() bool { s := r.stats("poison"); return s.Acked+s.DeadLettered == 16 })
			s := r.stats("poison")
			t.Logf("reason: %s; stats %+v", reason, s)
			if kind == "panic" && (s.Crashes != 3 || s.Restarts != 3) {
				t.Errorf("%d crashes and %d restarts for a reason saying %q: want 3 of each", s.Crashes, s.Restarts, reason)
			}
		})
	}
}

// A handler that keeps crashing makes its pipeline degraded in Health,
// while another pipeline of the same host runs on.
func TestAHandlerThatKeepsCrashingIsReportedWhileTheRestRunsOn(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	badIn, goodIn, out := topic(t, "bad"), topic(t, "good"), topic(t, "out")
	publish(t, cl, badIn, 10, func(i int) string { return fmt.Sprintf("exit:%d", i) }, nil)
	got := collect(t, cl, out)
	r := runHost(t, c, streamrun.Options{Restart: fastRestarts, ShutdownTimeout: time.Second, Logger: testLogger(t, slog.LevelError+4)},
		pipelines.Pipeline{
			Name:        "bad",
			Source:      pipelines.Source{Topics: []string{badIn}, Subscription: "bad", InitialPosition: pipelines.Earliest},
			Handler:     self(testConfig{Output: out}),
			ErrorPolicy: pipelines.ErrorPolicy{MaxCrashes: 1000},
		},
		pipelines.Pipeline{
			Name:    "good",
			Source:  pipelines.Source{Topics: []string{goodIn}, Subscription: "good", InitialPosition: pipelines.Earliest},
			Handler: pipelines.Handler{Plugin: example("uppercase"), Config: map[string]any{"output": out}},
		})
	waitFor(t, "bad degraded", func() bool { return r.health("bad").State == streamrun.StateDegraded })
	publish(t, cl, goodIn, 100, func(i int) string { return fmt.Sprintf("good-%d", i) }, nil)
	got.waitLen(t, 100)
	bad, good := r.health("bad"), r.health("good")
	if !strings.Contains(bad.Reason, "crashed") || bad.Instances[0].CrashesInARow < 3 {
		t.Errorf("bad: %+v", bad)
	}
	if !good.Healthy() || good.Instances[0].Restarts != 0 {
		t.Errorf("good: %+v", good)
	}
	t.Logf("bad: %s", bad.Reason)
}

// A slow handler slows consumption: the host holds at most MaxInFlight
// messages, and the broker sends no more than the permits allow, so the
// backlog waits at the broker.
func TestASlowHandlerSlowsConsumption(t *testing.T) {
	c := cluster(t)
	// Unbatched: the broker counts permits in messages but sends whole
	// entries, so a batch of 1000 would go out on 30 permits.
	cl := client(t, c, unbatched)
	in, out := topic(t, "in"), topic(t, "out")
	const n, inFlight, queue = 2000, 20, 30
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
	h := self(testConfig{Output: out, BatchDelay: 20 * time.Millisecond})
	h.BatchSize, h.MaxInFlight = 10, inFlight
	h.MaxBatchesInFlight = 1 // one 20 ms batch at a time: 500 messages a second
	r := runHost(t, c, streamrun.Options{}, pipelines.Pipeline{
		Name:    "slow",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "slow", InitialPosition: pipelines.Earliest, ReceiverQueue: queue},
		Handler: h,
	})
	deadline := time.Now().Add(time.Second)
	samples := 0
	for time.Now().Before(deadline) {
		// The broker's count first, the host's after: what the host has
		// received only grows, so reading it later can only loosen the
		// bound, never break it by a sample taken in between.
		consumers := c.Consumers(in, "slow")
		s := r.stats("slow")
		if s.InFlight > inFlight {
			t.Fatalf("%d messages in flight, more than %d", s.InFlight, inFlight)
		}
		for _, ci := range consumers {
			// The broker sends only what the permits allow: what the host
			// took, plus one receiver queue.
			if ci.Dispatched > s.Received+queue+1 {
				t.Fatalf("the broker dispatched %d, the host received %d", ci.Dispatched, s.Received)
			}
		}
		samples++
		time.Sleep(10 * time.Millisecond)
	}
	s := r.stats("slow")
	// 10 messages each 20 ms is at most 500 a second (and less: the
	// handler's own round trip counts).
	if s.Received > 500+inFlight+queue {
		t.Errorf("%d messages received in a second from a handler that takes 500 a second", s.Received)
	}
	if s.Acked == 0 {
		t.Error("nothing acknowledged")
	}
	t.Logf("after 1s: %+v (%d samples)", s, samples)
}

// On ctx's end the host stops receiving, finishes the batches in flight,
// publishes their outputs, acknowledges them and stops its plugins, well
// within the shutdown timeout; the next host on the subscription takes
// the rest, so every message reaches the output.
func TestGracefulStop(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	const n = 3000
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
	got := collect(t, cl, out)
	p := pipelines.Pipeline{
		Name:   "drain",
		Source: pipelines.Source{Topics: []string{in}, Subscription: "drain", InitialPosition: pipelines.Earliest},
		Handler: func() pipelines.Handler {
			h := self(testConfig{Output: out, BatchDelay: 30 * time.Millisecond})
			h.Instances = 2
			return h
		}(),
	}
	first := runHost(t, c, streamrun.Options{ShutdownTimeout: 10 * time.Second}, p)
	got.waitLen(t, 200)
	var pids []int
	for _, ih := range first.health("drain").Instances {
		pids = append(pids, ih.Pid)
	}
	t0 := time.Now()
	if err := first.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	took := time.Since(t0)
	s := first.stats("drain")
	t.Logf("stopped in %v: %+v", took, s)
	if took > 5*time.Second {
		t.Errorf("the stop took %v", took)
	}
	if s.InFlight != 0 || s.HandedBack != 0 || s.Acked != s.Received || s.Acked == n {
		t.Errorf("after the stop: %+v; want everything received acknowledged, nothing handed back, not all %d", s, n)
	}
	if h := first.health("drain"); h.State != streamrun.StateStopped {
		t.Errorf("state %s", h.State)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("plugin %d still runs after Run returned", pid)
		}
	}
	// What the first host acknowledged reached the output.
	waitFor(t, "the first host's outputs", func() bool { return got.len() >= int(s.Acked) })

	p.Handler.Config = testConfig{Output: out}.asMap()
	runHost(t, c, streamrun.Options{}, p)
	seen := make([]int, n)
	waitFor(t, "every message at the output", func() bool { return got.len() >= n && distinct(t, got, seen) == n })
}

// A host does not start what it cannot run: an invalid pipeline, a
// plugin that does not exist or refuses its config, and a pipeline given
// as a Go package is built and run.
func TestStart(t *testing.T) {
	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	src := pipelines.Source{Topics: []string{in}, Subscription: "start", InitialPosition: pipelines.Earliest}
	run := func(p pipelines.Pipeline) error {
		ctx := testContext(t)
		h, err := streamrun.New(ctx, streamrun.Options{Pool: poolOpts(c), Logger: testLogger(t, slog.LevelError+4)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return h.Run(ctx, p)
	}
	t.Run("invalid", func(t *testing.T) {
		err := run(pipelines.Pipeline{Name: "x", Source: pipelines.Source{Topics: []string{in}}, Handler: pipelines.Handler{Plugin: example("uppercase")}})
		var fe *pipelines.FieldError
		if !errors.As(err, &fe) || fe.Path != "pipelines[0].source.subscription" {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("no such plugin", func(t *testing.T) {
		err := run(pipelines.Pipeline{Name: "x", Source: src, Handler: pipelines.Handler{Plugin: example("nonesuch")}})
		if err == nil || !strings.Contains(err.Error(), "nonesuch") {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("config refused", func(t *testing.T) {
		err := run(pipelines.Pipeline{Name: "x", Source: src, Handler: pipelines.Handler{Plugin: example("uppercase"), Config: map[string]any{"outptu": out}}})
		if !errors.Is(err, host.ErrInit) || !strings.Contains(err.Error(), "outptu") {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("package", func(t *testing.T) {
		cl := client(t, c)
		publish(t, cl, in, 10, func(i int) string { return fmt.Sprintf("pkg-%d", i) }, nil)
		got := collect(t, cl, out)
		runHost(t, c, streamrun.Options{}, pipelines.Pipeline{
			Name: "pkg", Source: src,
			Handler: pipelines.Handler{Package: "github.com/streamrun/streamrun/examples/plugins/uppercase", Config: map[string]any{"output": out}},
		})
		got.waitLen(t, 10)
		if p := got.payloads(); !strings.HasPrefix(p[0], "PKG-") {
			t.Errorf("outputs %q", p)
		}
	})
}

// A plugin that dies while it has nothing to do is restarted at once, not
// when the next batch comes; the pipeline stays healthy.
func TestAnIdleInstanceThatDiesIsRestarted(t *testing.T) {
	c := cluster(t)
	in, out := topic(t, "in"), topic(t, "out")
	r := runHost(t, c, streamrun.Options{Logger: testLogger(t, slog.LevelError)}, pipelines.Pipeline{
		Name:    "idle",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "idle"},
		Handler: pipelines.Handler{Plugin: example("uppercase"), Config: map[string]any{"output": out}},
	})
	pid := r.health("idle").Instances[0].Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new plugin process", func() bool {
		ih := r.health("idle").Instances[0]
		return ih.Up && ih.Pid != pid && ih.Restarts == 1
	})
	h := r.health("idle")
	if !h.Healthy() || !strings.Contains(h.Instances[0].LastError, "exited between batches") {
		t.Errorf("health %+v", h)
	}
	cl := client(t, c)
	got := collect(t, cl, out)
	publish(t, cl, in, 5, func(i int) string { return fmt.Sprintf("after-%d", i) }, nil)
	got.waitLen(t, 5)
}
