package runtime_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A window host cut off from the broker without knowing it, while its
// handler is working out a fire: the broker drops its consumer and
// producers (the topics are unloaded) while its connections hold every
// byte back, and a second host takes the Exclusive subscription, reads
// the windows back and fires the same window. The first, let through
// again, gets its fire's answer and tries to commit it: nothing ties a
// fire to an acknowledgement, so only the fence of its changelog
// producer, taken by the second host when it subscribed, can make that
// transaction abort (state_fence.go). No fire may be output twice. Both
// brokers with transactions on.
func TestExactlyOnceWindowFiresOnceWhenACutOffHostWakesUp(t *testing.T) {
	for _, target := range txnTargets {
		t.Run(target, func(t *testing.T) { testWindowFenced(t, target) })
	}
}

func testWindowFenced(t *testing.T, target string) {
	peer := txnPeer(t, target)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, clientURL(t, peer.URL), out)
	w := windowKinds[0].w // tumbling, 20 s, 5 s out of order
	w.Time = pipelines.TimeEvent
	// One window of key k, and a message 40 s on that closes it.
	var msgs []genMsg
	for i := range 10 {
		msgs = append(msgs, genMsg{key: "k", payload: fmt.Sprintf("m-%d", i), t: windowBase + int64(1000+1000*i)})
	}
	msgs = append(msgs, genMsg{key: "k", payload: "closer", t: windowBase + 40000})
	const slowFire = 12 * time.Second
	pipeOf := func(delay time.Duration) pipelines.Pipeline {
		p := windowPipeline(in, out, w, windowConfig{BatchDelay: delay})
		exactlyOnceWindows(&p)
		p.TransactionTimeout = time.Minute // A's transaction must outlive its nap
		return p
	}

	dial := &freezingDialer{}
	a := runHost(t, nil, streamrun.Options{Logger: eoLogger(t), Pool: pool.Options{ServiceURL: peer.URL, Dial: dial.Dial,
		OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond}}}, pipeOf(slowFire))
	publishGenerated(t, cl, in, msgs, false)
	waitFor(t, "A received every message", func() bool { return a.stats("windows").Received >= int64(len(msgs)) })
	time.Sleep(500 * time.Millisecond) // A's handler has the fire
	start := time.Now()

	// A's connections hold every byte back; the broker drops A's
	// consumer and producers.
	dial.freeze()
	for _, topic := range []string{in, in + "-windows", out} {
		peer.AdminDo(t, http.MethodPut, brokertest.AdminPath(topic)+"/unload", "")
	}
	b := runHostWaiting(t, streamrun.Options{Logger: eoLogger(t), Pool: pool.Options{ServiceURL: peer.URL}}, pipeOf(0))
	b.waitRunning(t)
	outs.waitLen(t, 1)
	t.Logf("B fired the window %v after A was cut off", time.Since(start).Round(time.Millisecond))
	if time.Since(start) > slowFire-3*time.Second {
		t.Fatalf("B took too long to fire (%v) for A to wake up before its handler answers", time.Since(start))
	}

	// A wakes up before its handler answers, then commits the fire if
	// nothing stops it.
	dial.thaw()
	time.Sleep(time.Until(start.Add(slowFire + 4*time.Second)))
	checkFiresOnce(t, outs)
	if outs.len() == 0 {
		t.Fatal("no fire in the outputs")
	}
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
}

// txnPeer is the broker with transactions on of target (txnTargets), with
// its admin API.
func txnPeer(t *testing.T, target string) *brokertest.Peer {
	t.Helper()
	if target == "pulsar" {
		url := os.Getenv("STREAMRUN_PULSAR_TXN_URL")
		if url == "" {
			t.Skip("exactly_once on Apache Pulsar needs a standalone with transactions on: " +
				`eval "$(scripts/pulsar start --name txn)" sets STREAMRUN_PULSAR_TXN_URL`)
		}
		admin := os.Getenv("STREAMRUN_PULSAR_TXN_HTTP")
		if admin == "" {
			admin = "http://127.0.0.1:8281"
		}
		return &brokertest.Peer{URL: url, Admin: admin}
	}
	c := cluster(t, func(o *broker.Options) { o.Transactions = true })
	return &brokertest.Peer{URL: c.ServiceURL(), Admin: c.AdminURL(), Cluster: c}
}

// freezingDialer opens TCP connections whose bytes, both ways, it can
// hold back: frozen, a connection looks alive to both ends, and what
// either sent arrives once it thaws (a process paused, a network stalled).
type freezingDialer struct {
	mu     sync.Mutex
	frozen bool
	thawed chan struct{}
}

func (d *freezingDialer) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &freezingConn{Conn: nc, d: d}, nil
}

func (d *freezingDialer) freeze() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.frozen {
		d.frozen, d.thawed = true, make(chan struct{})
	}
}

func (d *freezingDialer) thaw() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen {
		d.frozen = false
		close(d.thawed)
	}
}

// wait returns once the dialer is not frozen.
func (d *freezingDialer) wait() {
	d.mu.Lock()
	frozen, thawed := d.frozen, d.thawed
	d.mu.Unlock()
	if frozen {
		<-thawed
	}
}

type freezingConn struct {
	net.Conn
	d *freezingDialer
}

func (c *freezingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.d.wait() // what came in while frozen is handed over once thawed
	return n, err
}

func (c *freezingConn) Write(b []byte) (int, error) {
	c.d.wait()
	return c.Conn.Write(b)
}
