package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// A pipeline whose Exclusive subscription another consumer holds waits
// for it; the host's other pipelines run meanwhile. Before, the host
// opened its pipelines one by one and ran none until the last had
// subscribed: one sorted before the waiting one had subscribed, so the
// broker sent ahead to it, and those messages sat in its queue until the
// other host went away (the campaign's second host, with its waiting
// "exclusive" pipeline, held the exactly_once pipelines' messages so).
func TestWaitingExclusiveHoldsNoOtherPipeline(t *testing.T) {
	c := cluster(t)
	cl := clientURL(t, c.ServiceURL())
	inA, outA, inB, outB := topic(t, "a-in"), topic(t, "a-out"), topic(t, "b-in"), topic(t, "b-out")
	holder, err := subscribe.New(testContext(t), cl, subscribe.Options{Topics: []string{inB}, Subscription: "b", Type: subscribe.Exclusive})
	if err != nil {
		t.Fatal(err)
	}
	// "a" sorts before "b": the host opens it first.
	gotA, gotB := collect(t, clientURL(t, c.ServiceURL()), outA), collect(t, clientURL(t, c.ServiceURL()), outB)
	pipe := func(name, in, out string, typ pipelines.SubscriptionType) pipelines.Pipeline {
		return pipelines.Pipeline{
			Name:    name,
			Source:  pipelines.Source{Topics: []string{in}, Subscription: name, Type: typ, InitialPosition: pipelines.Earliest},
			Handler: self(testConfig{Output: out}),
			Outputs: []string{out},
		}
	}
	// Not runHost: that waits for every pipeline to run.
	h, err := streamrun.New(testContext(t), streamrun.Options{Logger: testLogger(t, slog.LevelWarn),
		Pool: pool.Options{ServiceURL: c.ServiceURL(), OperationRetries: pool.OperationRetries{Delay: 200 * time.Millisecond}}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	r := &running{host: h, cancel: rcancel, done: make(chan error, 1)}
	go func() {
		r.done <- h.Run(rctx, pipe("a", inA, outA, pipelines.Shared), pipe("b", inB, outB, pipelines.Exclusive))
	}()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
	publish(t, cl, inA, 100, payload, nil)
	// Well within the test timeout: it runs at once, or never while the
	// holder holds.
	brokertest.Eventually(t, 30*time.Second, "pipeline a's 100 outputs while b waits", func() bool { return gotA.len() >= 100 })
	if err := holder.Close(testContext(t)); err != nil {
		t.Fatal(err)
	}
	publish(t, cl, inB, 100, payload, nil)
	waitFor(t, "pipeline b's 100 outputs once the holder let go", func() bool { return gotB.len() >= 100 })
}
