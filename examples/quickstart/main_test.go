package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The quickstart runs its KeyShared pipeline through streamrun.Start, the
// entry point of `streamrun run`, and so gets what the command gets: its
// publishes and the host's outputs batched by key. Every output arrives,
// each key's in the order published, and the entries of quickstart-out
// hold several messages each, never two keys.
func TestQuickstartBatchesByKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the uppercase plugin and runs it")
	}
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out strings.Builder
	const n = 5000
	seen, err := run(ctx, &out, n, "../plugins/uppercase", false)
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	if got := seen.distinct(); got != n {
		t.Errorf("%d distinct outputs, want %d", got, n)
	}
	if err := seen.check(); err != nil {
		t.Errorf("outputs: %v", err)
	}
	// With one message an entry, no entry could mix keys: the check above
	// means something only when the outputs were batched.
	if e := seen.entries(); e >= n/2 {
		t.Errorf("%d outputs came in %d entries: hardly batched", n, e)
	}
	for _, want := range []string{"embedded broker started in this process", "each key's outputs in order", "ok\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("%d outputs in %d entries", n, seen.entries())
}
