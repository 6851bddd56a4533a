package runtime_test

import (
	"fmt"
	"testing"
	"time"

	streamrun "github.com/streamrun/streamrun/runtime"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
)

// Many incremental windows fire at once while the host's producers have
// little room: the accumulator records their answers make are written
// by the receive goroutine, not in the outputs' receipt callbacks, where
// a publish waiting for room held the connection's read loop, and with
// it every receipt that would have made room, until the connection's
// keepalive gave up on it (30 s, then a resubscribe and a read-back).
// The keepalive here is longer than the test's wait, so that such a
// stall fails the test rather than being mended by a reconnect.
func TestIncrementalWindowsFireManyAtOnceWithLittleProducerRoom(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	w := pipelines.Window{Type: pipelines.Tumbling, Size: time.Minute, Time: pipelines.TimeEvent, Mode: pipelines.ModeIncremental}
	const keys = 3000
	var msgs []genMsg
	for i := range keys {
		msgs = append(msgs, genMsg{key: fmt.Sprintf("k%04d", i), t: windowBase + int64(i), payload: fmt.Sprintf("m-%d", i)})
	}
	msgs = append(msgs, genMsg{key: flushKey, t: windowBase + 86_400_000, payload: "flush"})
	ref, _ := referenceWindows(w, msgs)
	want := accSums(ref)
	delete(want, winID{flushKey, (windowBase + 86_400_000) / 60_000 * 60_000}) // open still
	outs := collect(t, cl, out)
	publishGenerated(t, cl, in, msgs, false)
	p := windowPipeline(in, out, w, windowConfig{Incremental: true})
	runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL, KeepAliveInterval: time.Hour,
		Producer: pool.ProducerOptions{MaxPendingMessages: 8}}}, p)
	waitFor(t, "the windows equal the reference", func() bool { return accAgree(accResults(t, outs), want) == "" })
}
