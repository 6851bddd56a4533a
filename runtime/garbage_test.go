package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A handler binary that answers garbage instead of the plugin handshake
// fails its pipeline at start with an error naming the pipeline, the
// instance and the plugin; nothing is consumed, so a working handler then gets
// every message.
func TestAHandlerAnsweringGarbageFailsAtStartAndLosesNothing(t *testing.T) {
	c := cluster(t)
	cl := client(t, c, unbatched)
	in, out := topic(t, "in"), topic(t, "out")
	const n = 20
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, nil)
	outs := collect(t, cl, out)
	script := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho '\\001\\377 not a handshake |||'\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := pipelines.Pipeline{
		Name:    "garbage",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "garbage", InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: script, Config: map[string]any{"output": out}},
		Outputs: []string{out},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := streamrun.New(ctx, streamrun.Options{Pool: pool.Options{ServiceURL: c.ServiceURL()}, Logger: testLogger(t, slog.LevelError+4)})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Run(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "pipeline garbage: start instance 0: plugin garbage/0: start:") {
		t.Fatalf("Run with a garbage handler: %v", err)
	}
	t.Logf("Run: %.200s", err)
	// The same subscription with a handler that works: every message.
	p.Handler = self(testConfig{Output: out})
	r := runHost(t, c, streamrun.Options{}, p)
	outs.waitLen(t, n)
	waitFor(t, "every input acknowledged", func() bool { return r.stats("garbage").Acked == n })
}
