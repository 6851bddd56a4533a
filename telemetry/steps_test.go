package telemetry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// A pipeline of steps alone, traced and scraped: each message's
// "process" span has an event per step saying what that step did with
// it (in, out, filtered, dead-lettered, errors), and /metrics counts the
// same per step, by name and kind.
func TestStepEventsAndMetrics(t *testing.T) {
	ctx := testContext(t)
	in, out := topic(t, "in"), topic(t, "out")
	base, opts, _ := serveHost(t)
	p := pipelines.Pipeline{
		Name:   "stepped",
		Source: pipelines.Source{Topics: []string{in}, Subscription: "stepped-sub", InitialPosition: pipelines.Earliest},
		// A batch, so a process span, per message, in the message's trace.
		Handler: pipelines.Handler{BatchSize: 1},
		Outputs: []string{out},
		Steps: []pipelines.Step{
			{Name: "no-drop", Filter: `text != "drop"`},
			{Name: "no-poison", DeadLetterIf: `text == "poison"`, Reason: `"poisoned"`},
			// properties.n is missing on "bare": an error, skipped.
			{Name: "tag", OnError: "skip", Map: &pipelines.MapStep{Properties: map[string]string{"n2": `properties.n + "!"`}}},
			{Name: "to-out", Route: &pipelines.RouteStep{To: `""`, Default: out}},
		},
	}
	rcv, c, flush := tracedHost(t, opts, p)
	cl := client(t, c)

	// One trace per message, written by hand as another client would.
	const parent = "b7ad6b7169203331"
	msgs := []struct{ payload, trace string }{
		{"keep", "3af7651916cd43dd8448eb211c80319c"},
		{"drop", "4af7651916cd43dd8448eb211c80319c"},
		{"poison", "5af7651916cd43dd8448eb211c80319c"},
		{"bare", "6af7651916cd43dd8448eb211c80319c"},
	}
	for _, m := range msgs {
		props := map[string]string{msgtrace.PropertyTraceParent: "00-" + m.trace + "-" + parent + "-01"}
		if m.payload != "bare" {
			props["n"] = "1"
		}
		if _, err := cl.Publish(ctx, in, pool.Message{Payload: []byte(m.payload), Properties: props}); err != nil {
			t.Fatal(err)
		}
	}

	// What each step did with each message: in, out, filtered,
	// dead-lettered, errors, by step, as the event says them.
	type did [5]int
	want := map[string][4]did{
		"keep":   {{1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}},
		"drop":   {{1, 0, 1, 0, 0}, {}, {}, {}},
		"poison": {{1, 1, 0, 0, 0}, {1, 0, 0, 1, 0}, {}, {}},
		"bare":   {{1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}, {1, 1, 0, 0, 1}, {1, 1, 0, 0, 0}},
	}
	kinds := []string{"filter", "dead_letter_if", "map", "route"}
	process := msgtrace.ProcessName(in)
	for _, m := range msgs {
		ps := waitForTrace(ctx, t, rcv, flush, m.trace, process)[process]
		for i, s := range p.Steps {
			e := hasEvent(ps, msgtrace.EventStep, string(msgtrace.KeyStep)+"="+s.Name)
			if e == nil {
				t.Errorf("%s: no %s event for step %s: %v", m.payload, msgtrace.EventStep, s.Name, ps.Events)
				continue
			}
			w := want[m.payload][i]
			got := did{}
			for j, k := range []string{"in", "out", "filtered", "dead_lettered", "errors"} {
				fmt.Sscan(otlptest.AttrOf(e.Attributes, "streamrun.step."+k), &got[j])
			}
			if got != w || otlptest.AttrOf(e.Attributes, string(msgtrace.KeyStepKind)) != kinds[i] {
				t.Errorf("%s, step %s: event %v, want kind %s and in/out/filtered/dead_lettered/errors %v",
					m.payload, s.Name, e.Attributes, kinds[i], w)
			}
		}
	}

	// The same counts on /metrics, summed over the messages.
	pl := "streamrun_pipeline=stepped"
	var s scraped
	for {
		var err error
		if s, err = scrapeMetrics(ctx, base); err != nil {
			t.Fatal(err)
		}
		if s.value("streamrun_messages_settled_total", pl) >= float64(len(msgs)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("messages never all settled: %v", s.names())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for i, st := range p.Steps {
		var sum did
		for _, m := range msgs {
			for j, n := range want[m.payload][i] {
				sum[j] += n
			}
		}
		for j, k := range []string{"in", "out", "filtered", "dead_lettered", "errors"} {
			name := "streamrun_step_" + k + "_total"
			if got := s.value(name, pl, "streamrun_step="+st.Name, "streamrun_step_kind="+kinds[i]); got != float64(sum[j]) {
				t.Errorf("%s{step %s} = %v, want %d", name, st.Name, got, sum[j])
			}
		}
	}
	if got := s.value("streamrun_messages_settled_total", pl, "streamrun_outcome=filtered"); got != 1 {
		t.Errorf("settled as filtered: %v, want 1", got)
	}
}
