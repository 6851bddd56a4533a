package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// TestTheMessageHookTellsEachMessagesOutcomeAndReason: Hooks.Message
// names every message with its outcome and reason: the handler's for a
// retry, a dead letter and a drop, the host's past max_retries, a filter
// step's name.
func TestTheMessageHookTellsEachMessagesOutcomeAndReason(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	payloads := []string{"ack", "dead", "drop", "retry", "skip"}
	publish(t, cl, in, len(payloads), func(i int) string { return payloads[i] }, nil)

	var mu sync.Mutex
	got := map[string][]string{} // "outcome: reason" by payload
	hooks := streamrun.Hooks{Message: func(p string, m *subscribe.Message, o streamrun.Outcome, reason string) {
		mu.Lock()
		defer mu.Unlock()
		got[string(m.Payload)] = append(got[string(m.Payload)], fmt.Sprintf("%s: %s", o, reason))
	}}
	runHost(t, c, streamrun.Options{
		Hooks: hooks,
		LocalHandlers: map[string]func() plugin.Handler{"outcomes": func() plugin.Handler {
			return plugin.HandlerFunc(func(_ context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
				for _, m := range batch {
					switch string(m.Payload) {
					case "dead":
						w.DeadLetter(m, "no good")
					case "drop":
						w.Drop(m, "not wanted")
					case "retry":
						w.Retry(m, 50*time.Millisecond, "later")
					default:
						w.Output(m, plugin.Output{Topic: out, Payload: m.Payload})
					}
				}
				return nil
			})
		}},
	}, pipelines.Pipeline{
		Name:        "outcomes",
		Source:      pipelines.Source{Topics: []string{in}, Subscription: "outcomes", InitialPosition: pipelines.Earliest},
		Handler:     pipelines.Handler{Plugin: "unused: a local handler"},
		Steps:       []pipelines.Step{{Name: "no-skips", Filter: `text != "skip"`}, {Handler: true}},
		Outputs:     []string{out},
		ErrorPolicy: pipelines.ErrorPolicy{MaxRetries: 1, DeadLetterTopic: in + "-dlq"},
	})
	waitFor(t, "every message settled for good", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["retry"]) == 2 && len(got) == len(payloads)
	})
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{
		"ack":   "acked: ",
		"dead":  "dead-lettered: no good",
		"drop":  "dropped: not wanted",
		"retry": "retried: later | dead-lettered: retried 1 times; last reason: later",
		"skip":  "filtered: filtered by step no-skips",
	}
	for p, w := range want {
		if g := strings.Join(got[p], " | "); g != w {
			t.Errorf("%s: hook told %s, want %s", p, g, w)
		}
	}
}

// TestAnInterceptorStandsInForTheCall: Options.Intercept sees each call
// with the plugin's pid and the batch's messages; killing the process
// there is a crash (the batch retried on a fresh process), an error it
// returns is the call's failure, and nothing is lost either way.
func TestAnInterceptorStandsInForTheCall(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	const n = 20
	publish(t, cl, in, n, func(i int) string { return fmt.Sprint("m-", i) }, nil)
	outs := collect(t, cl, out)

	var mu sync.Mutex
	fired := map[string]bool{}
	var pids []int
	intercept := func(ctx context.Context, call streamrun.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
		mu.Lock()
		var fault string
		for _, m := range call.Messages {
			switch p := string(m.Payload); {
			case p == "m-5" && !fired["kill"]:
				fault = "kill"
			case p == "m-12" && !fired["garbage"]:
				fault = "garbage"
			}
		}
		if fault != "" {
			fired[fault] = true
		}
		if call.Pipeline != "shout" || call.Pid == 0 {
			t.Errorf("call %+v: want pipeline shout and a plugin's pid", call)
		}
		pids = append(pids, call.Pid)
		mu.Unlock()
		switch fault {
		case "kill":
			if err := syscall.Kill(call.Pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill %d: %v", call.Pid, err)
			}
		case "garbage":
			if _, err := next(ctx); err != nil {
				return nil, err
			}
			return nil, &host.ResponseError{Plugin: "shout", Index: -1, Problem: "garbage"}
		}
		return next(ctx)
	}
	restarts := make(chan error, 10)
	r := runHost(t, c, streamrun.Options{
		Intercept: intercept,
		Hooks:     streamrun.Hooks{Restarted: func(_ string, _ int, cause error) { restarts <- cause }},
	}, pipelines.Pipeline{
		Name:    "shout",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "shout", InitialPosition: pipelines.Earliest, Type: pipelines.Failover},
		Handler: pipelines.Handler{Plugin: example("uppercase"), Config: map[string]any{"output": out}, BatchSize: 4},
		Outputs: []string{out},
	})
	outs.waitLen(t, n)
	waitFor(t, "every input acknowledged", func() bool { return r.stats("shout").Acked == n })
	var causes []string
	for range 2 {
		causes = append(causes, fmt.Sprint(<-restarts))
	}
	got := strings.Join(causes, "\n")
	if !strings.Contains(got, "garbage") {
		t.Errorf("restart causes %q: want the interceptor's wrong answer among them", got)
	}
	if ps := outs.payloads(); len(ps) != n {
		t.Errorf("%d outputs, want %d once each: %v", len(ps), n, ps)
	}
	mu.Lock()
	defer mu.Unlock()
	if !fired["kill"] || !fired["garbage"] {
		t.Errorf("faults fired: %v", fired)
	}
	distinct := map[int]bool{}
	for _, p := range pids {
		distinct[p] = true
	}
	if len(distinct) < 3 {
		t.Errorf("calls went to plugin processes %v: want a fresh one after each fault", distinct)
	}
}
