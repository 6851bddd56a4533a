package runtime_test

import (
	"path"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A reload that changes a window pipeline's subscription changes its
// default window changelog (named after the subscription) too: the
// windows must then be those of the new changelog, as a restart with the
// new file would read them, and what the new subscription places must go
// there. The new subscription reads the topic from its start into
// windows of its own; after it, the host stops and a new one with the
// new file goes on: every window's result equals the reference
// (reload.go, rewindow).
func TestWindowsFollowAReloadThatChangesTheSubscription(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	msgs := generate(uint64(len(base))+5, 450, 5)
	w := windowKinds[0].w
	w.Time = pipelines.TimeEvent
	ref, late := referenceWindows(w, msgs)
	t.Logf("%d messages, %d late; %d windows in the reference", len(msgs), late, len(ref))
	outs := windowResults{collect(t, cl, out)}
	p := windowPipeline(in, out, w, windowConfig{})
	// The default changelog, named after the subscription in the topic's
	// namespace: subscriptions of this run's own, so that no other run's
	// changelog is read.
	p.Window.Changelog = ""
	sub1 := path.Base(in)
	p.Source.Subscription = sub1
	first, second, third := msgs[:150], msgs[150:300], msgs[300:]
	settled := func(sub string) {
		t.Helper()
		waitFor(t, "every message published acknowledged on "+sub, func() bool { return subBacklog(t, peer, in, sub) == 0 })
	}

	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)
	publishGenerated(t, cl, in, first, false)
	settled(sub1)
	q := p
	q.Source.Subscription = sub1 + "-2"
	ctx := testContext(t)
	if err := r.host.Reload(ctx, q); err != nil {
		t.Fatal(err)
	}
	publishGenerated(t, cl, in, second, false)
	settled(q.Source.Subscription)
	time.Sleep(500 * time.Millisecond) // the last changelog records are written
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped after the reload with %d windows answered; a new host goes on", len(outs.get(t)))

	runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, q)
	publishGenerated(t, cl, in, third, false)
	waitAgree(t, outs, ref)
}
