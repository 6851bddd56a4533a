package broker_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// refusedOverLimit reports whether a connection was answered with the
// over-limit ERROR and closed.
func refusedOverLimit(t *testing.T, p *peer) {
	t.Helper()
	f := p.expect("the over-limit ERROR", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_ERROR })
	e := f.Cmd.GetError()
	if e.GetError() != pb.ServerError_NotAllowedError || !strings.Contains(e.GetMessage(), "Reached the maximum number of connections") {
		t.Fatalf("refusal: %v %q", e.GetError(), e.GetMessage())
	}
	if !p.closedByBroker() {
		t.Fatal("the refused connection was not closed")
	}
}

// bystanderRoundTrip publishes one message on p and receives it.
func bystanderRoundTrip(t *testing.T, p *peer, pid, cid uint64, seq *uint64, what string) {
	t.Helper()
	payload := fmt.Sprintf("%s %d", what, *seq)
	p.publish(pid, *seq, msg{payload: payload})
	*seq++
	m := p.receive(cid)
	if m.payload != payload {
		t.Fatalf("bystander %s: got %q, want %q", what, m.payload, payload)
	}
	// Acknowledged and a permit given back, so it can go on for ever.
	p.ack(cid, m.id)
	p.flow(cid, 1)
}

func TestConnectionLimitPerIP(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.MaxConnectionsPerIP = 3 })
	var open []*peer
	for range 3 {
		open = append(open, dial(t, c.ServiceURL()))
	}
	refusedOverLimit(t, dialRaw(t, c.ServiceURL()))
	// The ones served go on being served.
	cid := open[0].subscribe("limit-ip", "s", pb.CommandSubscribe_Exclusive)
	open[0].flow(cid, 10)
	var seq uint64
	bystanderRoundTrip(t, open[0], open[0].producer("limit-ip"), cid, &seq, "at the limit")
	// A connection that ends frees its place.
	open[2].close()
	brokertest.Eventually(t, waitFor, "a place freed by a closed connection", func() bool {
		p := dialRaw(t, c.ServiceURL())
		defer p.close()
		p.send(fuzzConnect)
		_, ok := p.wait(waitFor, func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_CONNECTED })
		return ok
	})
}

func TestConnectionLimitTotal(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.MaxConnections = 2 })
	a := dial(t, c.ServiceURL())
	dialRaw(t, c.ServiceURL()) // counts before it sends anything
	refusedOverLimit(t, dialRaw(t, c.ServiceURL()))
	if got := a.lookup("limit-total"); got.GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("served connection after a refusal: lookup %v", got)
	}
}

// A connection that never sends CONNECT is closed after HandshakeTimeout;
// one that did is not, however long it stays quiet.
func TestHandshakeTimeoutClosesSilentConnections(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.HandshakeTimeout = 300 * time.Millisecond })
	talker := dial(t, c.ServiceURL())
	silent := dialRaw(t, c.ServiceURL())
	if !silent.closedByBroker() {
		t.Fatal("a connection that never sent CONNECT is still open")
	}
	// The silent one was opened after the talker, so the talker's
	// handshake deadline has passed too: it must still be served.
	if got := talker.lookup("handshake"); got.GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("connected client after the handshake timeout: lookup %v", got)
	}
	// Half a frame and then silence is no better than nothing.
	half := dialRaw(t, c.ServiceURL())
	half.write([]byte{0, 0, 0, 20, 0})
	if !half.closedByBroker() {
		t.Fatal("a connection that sent half a frame and stopped is still open")
	}
}

// A flood of connections, some silent, some sending garbage, some
// connecting and leaving, some over the per-IP limit: a client connected
// before keeps publishing and receiving every message, and once the flood
// is over new clients connect as before.
func TestConnectionFloodKeepsServingOthers(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) {
		o.MaxConnectionsPerIP = 24 // fewer than the flood's 32 at once
		o.HandshakeTimeout = 300 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(brokertest.LogWriter(t, "broker"), &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	addr := serviceAddr(c.ServiceURL())
	by := dial(t, c.ServiceURL())
	cid := by.subscribe("flood", "s", pb.CommandSubscribe_Exclusive)
	by.flow(cid, 10)
	pid := by.producer("flood")
	var seq uint64
	bystanderRoundTrip(t, by, pid, cid, &seq, "before the flood")

	const floods = 2000
	var wg sync.WaitGroup
	var connected, refused atomic.Int64
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				switch floodOne(addr, i) {
				case pb.BaseCommand_CONNECTED:
					connected.Add(1)
				case pb.BaseCommand_ERROR:
					refused.Add(1)
				}
			}
		}()
	}
	go func() {
		for i := range floods {
			work <- i
		}
		close(work)
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for flooding := true; flooding; {
		select {
		case <-done:
			flooding = false
		default:
			bystanderRoundTrip(t, by, pid, cid, &seq, "during the flood")
		}
	}
	t.Logf("flood of %d connections: %d connected, %d refused over the limit; the bystander sent and received %d messages meanwhile", floods, connected.Load(), refused.Load(), seq)
	if connected.Load() == 0 || refused.Load() == 0 {
		t.Fatal("the flood was not both served and refused over the limit")
	}
	bystanderRoundTrip(t, by, pid, cid, &seq, "after the flood")
	brokertest.Eventually(t, 3*waitFor, "new clients served after the flood", func() bool {
		return floodOne(addr, 0) == pb.BaseCommand_CONNECTED
	})
}

// floodOne is one flood connection, by kind (i mod 4): connect and leave,
// send garbage, stay silent until the handshake timeout, or connect and
// hang up without reading. It returns what the broker answered first.
func floodOne(addr string, i int) pb.BaseCommand_Type {
	nc, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		return -1
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(waitFor))
	switch i % 4 {
	case 1:
		nc.Write([]byte{0, 0, 0, 12, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		io.Copy(io.Discard, nc)
		return -1
	case 2:
		io.Copy(io.Discard, nc) // until the broker gives up on us
		return -1
	case 3:
		nc.Write(connectFrame)
		return -1
	}
	nc.Write(connectFrame)
	p := &rawPeer{nc: nc}
	return p.first()
}

// TestIdleConnections holds STREAMRUN_IDLE_CONNS connected, idle client
// connections (default 1000; CI runs 10000) open against one broker, from
// a child process so neither side runs out of file descriptors: the broker
// serves a newcomer and a client publishing and consuming as before, and
// the test logs the broker's heap per idle connection.
func TestIdleConnections(t *testing.T) {
	n := 1000
	if s := os.Getenv("STREAMRUN_IDLE_CONNS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("STREAMRUN_IDLE_CONNS=%q: want a positive count", s)
		}
	}
	c := brokertest.Start(t, func(o *broker.Options) { o.Logger = discard() })
	heap0 := heapInUse()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldConnections$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STREAMRUN_HOLD_ADDR="+serviceAddr(c.ServiceURL()), "STREAMRUN_HOLD_N="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = brokertest.LogWriter(t, "holder")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the holder's end: it closes everything and exits
		if err := cmd.Wait(); err != nil {
			t.Errorf("holder: %v", err)
		}
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "holding ") {
				ready <- sc.Text()
				break
			}
		}
		io.Copy(io.Discard, stdout)
		close(ready)
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(10 * time.Minute):
		t.Fatal("the holder did not open its connections within 10 minutes")
	}
	if line != fmt.Sprintf("holding %d", n) {
		t.Fatalf("holder: %q, want holding %d", line, n)
	}
	heap1 := heapInUse()
	t.Logf("%d idle connections: broker heap in use %d -> %d MiB (%.1f KiB per connection), %d goroutines",
		n, heap0>>20, heap1>>20, float64(heap1-heap0)/1024/float64(n), runtime.NumGoroutine())
	by := dial(t, c.ServiceURL())
	cid := by.subscribe("idle", "s", pb.CommandSubscribe_Exclusive)
	by.flow(cid, 10)
	pid := by.producer("idle")
	var seq uint64
	for range 100 {
		bystanderRoundTrip(t, by, pid, cid, &seq, fmt.Sprintf("beside %d idle connections", n))
	}
}

func heapInUse() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestHelperHoldConnections is TestIdleConnections' child: it opens
// STREAMRUN_HOLD_N connections to STREAMRUN_HOLD_ADDR, each CONNECTed,
// prints "holding N" and keeps them until its stdin closes.
func TestHelperHoldConnections(t *testing.T) {
	addr := os.Getenv("STREAMRUN_HOLD_ADDR")
	if addr == "" {
		t.Skip("the child of TestIdleConnections")
	}
	n, _ := strconv.Atoi(os.Getenv("STREAMRUN_HOLD_N"))
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := range n {
		nc, err := net.DialTimeout("tcp", addr, waitFor)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, nc)
		nc.Write(frameOf(t, fuzzConnect))
	}
	// Every one must have been answered CONNECTED.
	for i, nc := range conns {
		nc.SetReadDeadline(time.Now().Add(waitFor))
		if got := (&rawPeer{nc: nc}).first(); got != pb.BaseCommand_CONNECTED {
			t.Fatalf("connection %d: first answer %v, want CONNECTED", i, got)
		}
		nc.SetReadDeadline(time.Time{})
	}
	fmt.Printf("holding %d\n", n)
	io.Copy(io.Discard, os.Stdin)
}
