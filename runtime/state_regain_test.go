package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A host cut off from the broker (its connections closed under it, no
// new one opened) while a second host takes the Exclusive subscription
// and counts on; the second stops, and the first, its connections let
// through again, subscribes again by itself and counts the rest. It must
// count on from what the second host committed, not from the values it
// held in memory: every count comes out once, and every key's count in
// the changelog is the number of its messages (state_regain.go).
func TestKeyedStateCountsOnWhenTheSubscriptionComesBack(t *testing.T) {
	t.Run("at_least_once", func(t *testing.T) {
		testCountsOnWhenTheSubscriptionComesBack(t, brokertest.Target(t).URL, false, false)
	})
	for _, target := range txnTargets {
		t.Run("exactly_once/"+target, func(t *testing.T) {
			testCountsOnWhenTheSubscriptionComesBack(t, txnURL(t, target), true, false)
		})
		// Cut off while counting: its open transaction cannot commit,
		// and the messages in its hands come again to B.
		t.Run("exactly_once/midway/"+target, func(t *testing.T) {
			testCountsOnWhenTheSubscriptionComesBack(t, txnURL(t, target), true, true)
		})
	}
}

// testCountsOnWhenTheSubscriptionComesBack runs the test above on the
// broker at url; midway: A is cut off while it counts, not once idle.
func testCountsOnWhenTheSubscriptionComesBack(t *testing.T, url string, exactly, midway bool) {
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	// Entries of 40 messages at most, as in the other exactly_once tests.
	cl := clientURL(t, url, func(o *pool.Options) { o.Producer.Batching.MaxMessages = 40 })
	outs := collect(t, clientURL(t, url), out)
	const keys = 6
	const first, second, third = 600, 2400, 600 // counted by A, B, then A again
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	payloadFrom := func(at int) func(int) string { return func(i int) string { return fmt.Sprintf("m-%d", at+i) } }
	keyFrom := func(at int) func(int) string { return func(i int) string { return key(at + i) } }
	cfg := testConfig{MarkerDir: t.TempDir()}
	if midway {
		cfg.BatchDelay = 30 * time.Millisecond // A is still counting when cut
	}
	p := counting(in, out, cfg, self)
	logger := testLogger(t, slog.LevelWarn)
	if exactly {
		p = exactlyOnce(p)
		logger = eoLogger(t)
	}

	// A, whose every connection goes through a dialer the test cuts, and
	// which tries to subscribe again often.
	dial := &cuttableDialer{}
	a := runHost(t, nil, streamrun.Options{Logger: logger, Pool: pool.Options{ServiceURL: url, Dial: dial.Dial,
		OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond}}}, p)
	publish(t, cl, in, first, payloadFrom(0), keyFrom(0))
	if midway {
		outs.waitLen(t, first/3)
	} else {
		outs.waitLen(t, first)
		waitFor(t, "A acknowledged its messages", func() bool { return a.stats("counts").Acked >= first })
		time.Sleep(time.Second) // the grouped acknowledgements reach the broker
	}
	dial.cut()
	t.Logf("A cut off from the broker with %d outputs", outs.len())

	// B takes the subscription, reads A's counts back and counts on.
	publish(t, cl, in, second, payloadFrom(first), keyFrom(first))
	b := runHostWaiting(t, streamrun.Options{Logger: logger, Pool: pool.Options{ServiceURL: url}}, p)
	b.waitRunning(t)
	outs.waitLen(t, first+second)
	if !midway {
		waitFor(t, "B acknowledged its messages", func() bool { return b.stats("counts").Acked >= second })
	}
	if exactly {
		// A look at the state while B holds the changelog exclusively
		// writes nothing to it (state_fence.go).
		lctx, cancel := context.WithTimeout(testContext(t), 20*time.Second)
		st, err := streamrun.ReadState(lctx, cl, p.ChangelogTopic())
		cancel()
		if err != nil || len(st) != keys {
			t.Errorf("reading the state while B runs: %d keys, %v; want %d keys", len(st), err, keys)
		}
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("B counted %d messages and stopped", b.stats("counts").Acked)

	// A gets its connections back, subscribes again by itself and counts
	// the rest on from what B committed.
	ackedBefore := a.stats("counts").Acked
	dial.restore()
	publish(t, cl, in, third, payloadFrom(first+second), keyFrom(first+second))
	outs.waitLen(t, first+second+third)
	time.Sleep(500 * time.Millisecond) // for a late duplicate to show
	if got := a.stats("counts").Acked - ackedBefore; got < third {
		t.Errorf("A acknowledged %d messages after it got the subscription back, want %d", got, third)
	}
	checkCounts(t, outs.payloads(), keys, (first+second+third)/keys)
	checkChangelogCounts(t, cl, p.ChangelogTopic(), keys, (first+second+third)/keys, key)
}

// cuttableDialer opens TCP connections until cut, which closes every one
// it opened (the broker sees the client gone at once) and refuses new
// ones until restore.
type cuttableDialer struct {
	mu    sync.Mutex
	off   bool
	conns []net.Conn
}

func (d *cuttableDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.off {
		_ = nc.Close()
		return nil, errors.New("test: cut off from the broker")
	}
	d.conns = append(d.conns, nc)
	return nc, nil
}

func (d *cuttableDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.off = true
	for _, nc := range d.conns {
		_ = nc.Close()
	}
	d.conns = nil
}

func (d *cuttableDialer) restore() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.off = false
}
