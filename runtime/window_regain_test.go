package runtime_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A window host cut off from the broker (its connections closed under
// it, no new one opened) while a second host takes the Exclusive
// subscription, places the next messages in the windows and fires
// those the watermark passes; the second stops, and the first, its
// connections let through again, subscribes again by itself and takes
// the rest. It must go on from the windows the second left in the
// changelog, not from those it held in memory: every window's result
// equals the reference (window_regain.go). Tumbling, sliding and
// session windows keep their messages; incremental ones their accumulators, which the
// first host would otherwise write over the second's.
func TestWindowsEqualTheReferenceWhenTheSubscriptionComesBack(t *testing.T) {
	for _, c := range []struct {
		name string
		w    pipelines.Window
	}{
		{"tumbling", windowKinds[0].w},
		{"sliding", windowKinds[1].w},
		{"session", windowKinds[2].w},
		{"incremental", func() pipelines.Window { w := windowKinds[0].w; w.Mode = pipelines.ModeIncremental; return w }()},
	} {
		t.Run(c.name, func(t *testing.T) { testWindowsWhenTheSubscriptionComesBack(t, c.w) })
	}
}

func testWindowsWhenTheSubscriptionComesBack(t *testing.T, w pipelines.Window) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	msgs := generate(uint64(len(base))+3, 600, 5)
	w.Time = pipelines.TimeEvent
	incr := w.Incremental()
	ref, late := referenceWindows(w, msgs)
	t.Logf("%d messages, %d late; %d windows in the reference", len(msgs), late, len(ref))
	outs := collect(t, cl, out)
	diff := func() string {
		if incr {
			return accAgree(accResults(t, outs), accSums(ref))
		}
		return agree(windowResults{outs}.get(t), ref)
	}
	p := windowPipeline(in, out, w, windowConfig{Incremental: incr})
	// Taken by A, then B, then A again; the flush message, last, closes
	// every window.
	first, second, third := msgs[:200], msgs[200:400], msgs[400:]
	settled := func(who string) {
		t.Helper()
		waitFor(t, who+" acknowledged every message published", func() bool { return subBacklog(t, peer, in, "windows") == 0 })
	}

	// A, whose every connection goes through a dialer the test cuts, and
	// which tries to subscribe again often.
	dial := &cuttableDialer{}
	a := runHost(t, nil, streamrun.Options{Logger: testLogger(t, slog.LevelWarn), Pool: pool.Options{ServiceURL: peer.URL, Dial: dial.Dial,
		OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond}}}, p)
	publishGenerated(t, cl, in, first, false)
	settled("A")
	dial.cut()
	t.Logf("A cut off from the broker with %d outputs", outs.len())

	// B takes the subscription, reads A's windows back and goes on.
	publishGenerated(t, cl, in, second, false)
	b := runHostWaiting(t, streamrun.Options{Logger: testLogger(t, slog.LevelWarn), Pool: pool.Options{ServiceURL: peer.URL}}, p)
	b.waitRunning(t)
	settled("B")
	time.Sleep(500 * time.Millisecond) // B's last changelog records are written
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("B stopped with %d outputs", outs.len())

	// A gets its connections back, subscribes again by itself and takes
	// the rest on from the windows B left.
	receivedBefore := a.stats("windows").Received
	dial.restore()
	publishGenerated(t, cl, in, third, false)
	deadline := time.Now().Add(testTimeout)
	for d := diff(); d != ""; d = diff() {
		if time.Now().After(deadline) {
			t.Fatalf("the windows differ from the reference: %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := a.stats("windows").Received - receivedBefore; got < int64(len(third)) {
		t.Errorf("A received %d messages after it got the subscription back, want %d at least", got, len(third))
	}
}

// subBacklog is how many messages of topic the subscription has not
// acknowledged, on either broker.
func subBacklog(t *testing.T, peer *brokertest.Peer, topic, sub string) int64 {
	t.Helper()
	if peer.Cluster != nil {
		return peer.Cluster.Backlog(topic, sub)
	}
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	if err := json.Unmarshal(peer.AdminDo(t, http.MethodGet, brokertest.AdminPath(topic)+"/stats", ""), &st); err != nil {
		t.Fatalf("topic stats of %s: %v", topic, err)
	}
	s, ok := st.Subscriptions[sub]
	if !ok {
		return -1
	}
	return s.MsgBacklog
}
