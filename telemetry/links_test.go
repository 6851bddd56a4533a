package telemetry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// A batch of more traced messages than the SDK's link limit (128 by
// default) links to the first 128; the SDK drops the rest and counts
// them, and the span still says how many messages the batch had.
func TestProcessSpanLinkLimit(t *testing.T) {
	ctx := testContext(t)
	const n = 200
	in := topic(t, "in")
	p := pipelines.Pipeline{
		Name:    "wide",
		Source:  pipelines.Source{Topics: []string{in}, Subscription: "wide-sub", InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: "local", BatchSize: n, BatchWait: 2 * time.Second, MaxInFlight: 2 * n},
	}
	opts := streamrun.Options{LocalHandlers: map[string]func() plugin.Handler{"wide": func() plugin.Handler {
		return plugin.HandlerFunc(func(context.Context, plugin.ResultWriter, []*plugin.Message) error { return nil })
	}}}
	rcv, c, flush := tracedHost(t, opts, p)
	cl := client(t, c)
	for i := range n {
		tp := fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)
		cl.PublishAsync(ctx, in, pool.Message{Payload: []byte("x"), Properties: map[string]string{msgtrace.PropertyTraceParent: tp}},
			func(_ pulsarwire.MessageID, err error) {
				if err != nil {
					t.Errorf("publish: %v", err)
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		flush()
		for _, s := range rcv.Spans() {
			if s.Name != msgtrace.ProcessName(in) {
				continue
			}
			if s.Attr("messaging.batch.message_count") != fmt.Sprint(n) {
				t.Fatalf("the messages came in more than one batch (%s): %v", s.Attr("messaging.batch.message_count"), s)
			}
			if len(s.Links) != 128 || s.DroppedLinksCount != n-128 {
				t.Errorf("%d links, %d dropped; want 128 and %d", len(s.Links), s.DroppedLinksCount, n-128)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no process span")
		case <-rcv.Changed():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
