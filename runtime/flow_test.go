package runtime_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// Messages go from the source topic through the uppercase example plugin
// to its output topic, and every input is acknowledged.
func TestMessagesFlowThroughAPlugin(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	const n = 2000
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("hello-%d", i) }, func(i int) string { return fmt.Sprintf("k%d", i%10) })
	got := collect(t, cl, out)

	r := runHost(t, c, streamrun.Options{}, pipelines.Pipeline{
		Name:    "shout",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "shout", InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: example("uppercase"), Config: map[string]any{"output": out}, Instances: 2},
		Outputs: []string{out},
	})
	msgs := got.waitLen(t, n)
	want := map[string]string{}
	for i := range n {
		want[fmt.Sprintf("HELLO-%d", i)] = fmt.Sprintf("k%d", i%10)
	}
	checkOutputs(t, msgs, want)
	waitFor(t, "every input acknowledged", func() bool { return r.stats("shout").Acked == n })
	waitFor(t, "an empty backlog", func() bool { return c.Backlog(in, "shout") == 0 })
	s := r.stats("shout")
	if s.Received != n || s.Processed != n || s.InFlight != 0 {
		t.Errorf("stats %+v, want %d received, processed and acked, none in flight", s, n)
	}
	if h := r.health("shout"); h.State != streamrun.StateHealthy || len(h.Instances) != 2 || !h.Instances[0].Up || h.Instances[0].Pid == 0 {
		t.Errorf("health %+v", h)
	}
}

// The handler's per-message answers are carried out: a retry comes back
// after its delay, a dead letter goes to the dead-letter topic with its
// reason, a drop is acknowledged without output, and a message retried
// MaxRetries times is dead-lettered.
func TestOutcomes(t *testing.T) {
	for _, mode := range []string{"plugin", "local"} {
		t.Run(mode, func(t *testing.T) {
			c := cluster(t)
			cl := client(t, c, unbatched)
			in, out, dlq := topic(t, "in"), topic(t, "out"), topic(t, "dlq")
			payloads := []string{"plain-1", "retry:2:twice-2", "dead:poison-3", "drop:filtered-4", "retryall:forever-5", "plain-6"}
			publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)
			outs, dead := collect(t, cl, out), collect(t, cl, dlq)

			p := pipelines.Pipeline{
				Name:    "outcomes",
				Source:  pipelines.Source{Topics: []string{in}, Subscription: "outcomes", InitialPosition: pipelines.Earliest},
				Handler: self(testConfig{Output: out}),
				ErrorPolicy: pipelines.ErrorPolicy{
					MaxRetries:      3,
					Backoff:         pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond},
					DeadLetterTopic: dlq,
				},
			}
			opts := streamrun.Options{}
			if mode == "local" {
				opts.LocalHandlers = map[string]func() plugin.Handler{"outcomes": func() plugin.Handler { return plugin.Configure(newTestHandler) }}
			}
			r := runHost(t, c, opts, p)

			outs.waitLen(t, 3)
			dead.waitLen(t, 2)
			waitFor(t, "everything settled", func() bool {
				s := r.stats("outcomes")
				return s.Acked == 3 && s.DeadLettered == 2 && s.Dropped == 1 && c.Backlog(in, "outcomes") == 0
			})
			got := outs.payloads()
			slices.Sort(got)
			if want := []string{"plain-1", "plain-6", "retry:2:twice-2"}; !slices.Equal(got, want) {
				t.Errorf("outputs %q, want %q", got, want)
			}
			reasons := map[string]*subscribe.Message{}
			for _, m := range dead.all() {
				reasons[string(m.Payload)] = m
			}
			if m := reasons["dead:poison-3"]; m == nil || m.Properties[streamrun.PropertyDeadLetterReason] != "asked to" ||
				m.Properties[streamrun.PropertyRealTopic] != in || m.Properties[streamrun.PropertyOriginMessageID] == "" {
				t.Errorf("dead letter of dead:poison-3: %+v", m)
			}
			if m := reasons["retryall:forever-5"]; m == nil || !strings.Contains(m.Properties[streamrun.PropertyDeadLetterReason], "retried 3 times") {
				t.Errorf("dead letter of retryall:forever-5: %+v", m)
			}
			// twice: 2 retries; forever: 3 retries, then dead-lettered.
			if s := r.stats("outcomes"); s.Retried != 5 {
				t.Errorf("%d retries, want 5 (%+v)", s.Retried, s)
			}
		})
	}
}

// Under KeyShared and Failover each key's messages reach the output in
// the order they were published, with several instances of a handler
// that takes a random time per batch.
func TestOrderPerKey(t *testing.T) {
	for _, typ := range []pipelines.SubscriptionType{pipelines.KeyShared, pipelines.Failover, pipelines.Exclusive} {
		t.Run(string(typ), func(t *testing.T) {
			c := cluster(t)
			cl := client(t, c)
			in, out := topic(t, "in"), topic(t, "out")
			const n, keys = 6000, 37
			key := func(i int) string { return fmt.Sprintf("key-%d", i%keys) }
			publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("%s-%d", key(i), i) }, key)
			got := collect(t, cl, out)
			runHost(t, c, streamrun.Options{}, pipelines.Pipeline{
				Name:   "ordered",
				Source: pipelines.Source{Topics: []string{in}, Subscription: "ordered", Type: typ, InitialPosition: pipelines.Earliest},
				Handler: func() pipelines.Handler {
					h := self(testConfig{Output: out, Jitter: 3 * time.Millisecond})
					h.Instances = 4
					h.BatchSize = 20
					return h
				}(),
			})
			msgs := got.waitLen(t, n)
			last := map[string]int{}
			for _, m := range msgs {
				seq := seqOf(t, string(m.Payload))
				if prev, ok := last[m.Key]; ok && seq <= prev {
					t.Fatalf("key %s: %d after %d", m.Key, seq, prev)
				}
				last[m.Key] = seq
			}
			if len(last) != keys {
				t.Errorf("%d keys, want %d", len(last), keys)
			}
		})
	}
}

// An output that cannot be published turns its message into a retry,
// and after MaxRetries into a dead letter; the hooks see it all.
func TestAnOutputThatCannotBePublished(t *testing.T) {
	c := cluster(t)
	cl := client(t, c, unbatched)
	in, dlq := topic(t, "in"), topic(t, "dlq")
	publish(t, cl, in, 3, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
	dead := collect(t, cl, dlq)
	var received, handled, settled, batches atomic.Int64
	r := runHost(t, c, streamrun.Options{
		Logger: testLogger(t, slog.LevelError),
		Hooks: streamrun.Hooks{
			Received:  func(_ string, n int) { received.Add(int64(n)) },
			Handled:   func(_ string, _, n int, _ time.Duration, err error) { handled.Add(int64(n)) },
			Settled:   func(string, streamrun.Outcome) { settled.Add(1) },
			BatchDone: func(string, int, time.Duration) { batches.Add(1) },
		},
	}, pipelines.Pipeline{
		Name:   "nowhere",
		Source: pipelines.Source{Topics: []string{in}, Subscription: "nowhere", InitialPosition: pipelines.Earliest},
		// A tenant name with a space is no topic at all.
		Handler: self(testConfig{Output: "persistent://no such/tenant/topic"}),
		ErrorPolicy: pipelines.ErrorPolicy{
			MaxRetries: 2, DeadLetterTopic: dlq,
			Backoff: pipelines.Backoff{Initial: 10 * time.Millisecond, Max: 10 * time.Millisecond},
		},
	})
	for _, m := range dead.waitLen(t, 3) {
		if reason := m.Properties[streamrun.PropertyDeadLetterReason]; !strings.Contains(reason, "publishing an output failed") {
			t.Errorf("reason %q", reason)
		}
	}
	waitFor(t, "settled", func() bool { return r.stats("nowhere").DeadLettered == 3 })
	s := r.stats("nowhere")
	// 3 messages, each delivered 3 times: twice retried, then dead-lettered.
	if s.Received != 9 || s.Retried != 6 || received.Load() != 9 || handled.Load() != 9 || settled.Load() != 9 || batches.Load() == 0 {
		t.Errorf("stats %+v; hooks: %d received, %d handled, %d settled, %d batches",
			s, received.Load(), handled.Load(), settled.Load(), batches.Load())
	}
}

// A pipeline that holds fewer messages than its output producer's batch
// takes (MaxInFlight 100 against 1000) runs out of credits with its
// outputs in an open batch: it sends that batch at once rather than
// waiting out the producer's batching delay, here an hour, so round
// after round gets through. Only the last round may wait (a pipeline with
// credits to spare leaves a batch open for MaxDelay, as asked), until the
// host's stop, once every input is received, flushes it; nothing is lost.
func TestStarvedPipelineSendsItsOpenOutputBatches(t *testing.T) {
	for _, mode := range []string{"plugin", "local"} {
		t.Run(mode, func(t *testing.T) {
			c := cluster(t)
			cl := client(t, c)
			in, out := topic(t, "in"), topic(t, "out")
			const n, held = 1000, 100
			publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
			got := collect(t, cl, out)

			h := self(testConfig{Output: out})
			h.BatchSize, h.MaxInFlight = 10, held
			opts := streamrun.Options{}
			opts.Pool.Producer.Batching.MaxDelay = time.Hour
			if mode == "local" {
				opts.LocalHandlers = map[string]func() plugin.Handler{"starved": func() plugin.Handler { return plugin.Configure(newTestHandler) }}
			}
			r := runHost(t, c, opts, pipelines.Pipeline{
				Name:    "starved",
				Source:  pipelines.Source{Topics: []string{in}, Subscription: "starved", InitialPosition: pipelines.Earliest},
				Handler: h,
				Outputs: []string{out},
			})
			got.waitLen(t, n-held)
			// Rounds get through without the stop; the stop comes once
			// every input is in the host, so that it is what sends the
			// last open batch. Stopped earlier, the inputs not yet
			// received stay in the backlog, and their outputs never come.
			waitFor(t, "every input received", func() bool { return r.stats("starved").Received >= n })
			if err := r.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			got.waitLen(t, n)
			waitFor(t, "an empty backlog", func() bool { return c.Backlog(in, "starved") == 0 })
		})
	}
}
