package runtime_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// TestStatsAreReadWhileAPipelineStartsAndReloads: Host.Stats, called
// from another goroutine from before Run on (as a status line or a
// metrics scrape does), sees each step by the name the pipeline runs
// now, while the host starts the pipeline and while a reload replaces
// its step. Under the race detector it also checks that reading the
// steps is safe while they are set.
func TestStatsAreReadWhileAPipelineStartsAndReloads(t *testing.T) {
	url, fresh := stepsPeer(t)
	in, out := fresh("in"), fresh("out")
	pipe := func(step string) pipelines.Pipeline {
		return pipelines.Pipeline{
			Name:    "counted",
			Source:  pipelines.Source{Topics: []string{in}, Subscription: "counted"},
			Outputs: []string{out},
			Steps:   []pipelines.Step{{Name: step, Filter: "true"}},
		}
	}
	ctx := testContext(t)
	h, err := streamrun.New(ctx, streamrun.Options{Pool: poolOptsURL(url), Logger: testLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatalf("runtime.New: %v", err)
	}

	// The reader syncs with nothing but Stats itself until it is told to
	// stop, as an unrelated goroutine of the host's user would.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
				h.Stats()
			}
		}
	}()
	defer func() { close(stop); <-stopped }()

	rctx, rcancel := context.WithCancel(context.Background())
	r := &running{host: h, cancel: rcancel, done: make(chan error, 1)}
	go func() { r.done <- h.Run(rctx, pipe("first")) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	stepNames := func() []string {
		var names []string
		for _, s := range r.stats("counted").Steps {
			names = append(names, s.Name)
		}
		return names
	}
	waitFor(t, "the first step in the stats", func() bool { return slices.Equal(stepNames(), []string{"first"}) })
	r.waitRunning(t)
	if err := h.Reload(ctx, pipe("second")); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	waitFor(t, "the reloaded step in the stats", func() bool { return slices.Equal(stepNames(), []string{"second"}) })
}
