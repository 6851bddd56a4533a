package host

import (
	"context"
	"sync"
	"testing"
	"time"
)

// processTwice sends two batches to inst at once and returns what each
// handler call reported: "met" when the other call was inside Process at
// the same time, "alone" when it was not.
func processTwice(t *testing.T, inst *Instance) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i := range got {
		wg.Go(func() {
			res, err := inst.Process(ctx, msgs("x"))
			if err != nil {
				t.Errorf("Process %d: %v", i, err)
				return
			}
			if len(res) != 1 || len(res[0].Outputs) != 1 {
				t.Errorf("Process %d: results %+v", i, res)
				return
			}
			got[i] = string(res[0].Outputs[0].Payload)
		})
	}
	wg.Wait()
	return got
}

func TestProcessCallsOverlapOnlyWhenThePluginAllows(t *testing.T) {
	t.Run("default: one at a time", func(t *testing.T) {
		inst := start(t, selfPlugin(t, "sdk", nil), `{"mode":"meet"}`)
		for i, r := range processTwice(t, inst) {
			if r != "alone" {
				t.Errorf("call %d: %q: calls overlapped in a plugin that did not allow it", i, r)
			}
		}
	})
	t.Run("Concurrency 2: side by side", func(t *testing.T) {
		opts := selfPlugin(t, "sdk", nil)
		opts.Env = append(opts.Env, "STREAMRUN_PLUGIN_TEST_CONCURRENCY=2")
		inst := start(t, opts, `{"mode":"meet"}`)
		for i, r := range processTwice(t, inst) {
			if r != "met" {
				t.Errorf("call %d: %q: the two calls did not run at the same time", i, r)
			}
		}
	})
}
