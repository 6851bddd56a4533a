package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// TestOutputHook: Hooks.Output is told of every output at its receipt,
// by topic, before the input it came from is acknowledged.
func TestOutputHook(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	in, out1, out2 := topic(t, "in"), topic(t, "out1"), topic(t, "out2")
	const n = 500
	publish(t, cl, in, n, func(i int) string { return fmt.Sprint("m-", i) }, func(i int) string { return fmt.Sprint("k", i%7) })

	var (
		mu      sync.Mutex
		outputs = map[string]int{}
		early   int // acknowledgements seen before both outputs of as many inputs
	)
	hooks := streamrun.Hooks{
		Output: func(p, topic string, err error) {
			if err != nil {
				t.Errorf("output to %s failed: %v", topic, err)
			}
			mu.Lock()
			outputs[topic]++
			mu.Unlock()
		},
	}
	acked := 0
	hooks.Settled = func(p string, o streamrun.Outcome) {
		if o != streamrun.Acked {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		acked++
		if outputs[out1] < acked || outputs[out2] < acked {
			early++
		}
	}
	r := runHost(t, c, streamrun.Options{
		Hooks: hooks,
		LocalHandlers: map[string]func() plugin.Handler{"two": func() plugin.Handler {
			return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
				return []plugin.Output{{Topic: out1, Payload: m.Payload}, {Topic: out2, Payload: m.Payload}}, nil
			})
		}},
	}, pipelines.Pipeline{
		Name:    "two",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "two", InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: "unused: a local handler", Instances: 2},
	})
	waitFor(t, "every input acknowledged", func() bool { return r.stats("two").Acked == n })
	mu.Lock()
	defer mu.Unlock()
	if outputs[out1] != n || outputs[out2] != n || len(outputs) != 2 {
		t.Errorf("Output hook counts %v, want %d on each of %s and %s", outputs, n, out1, out2)
	}
	if early > 0 {
		t.Errorf("%d acknowledgements came before their outputs' Output calls", early)
	}
}
