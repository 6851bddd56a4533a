package broker_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// A consumer that refills half its window at a time, with batches bigger
// than a refill (as the Java client and pulsar-perf): an entry goes out
// while any permit is left (they may go negative, as in Apache Pulsar),
// none at zero, and the entries read ahead for the next FLOW never overtake
// the redelivered ones.
func TestBatchesBiggerThanAFlowKeepPermitsAndOrder(t *testing.T) {
	c := brokertest.Start(t)
	topic := "read-ahead"
	p := dial(t, c.ServiceURL())
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Exclusive, earliest)
	pid := p.producer(topic)
	const entries, perEntry = 6, 10
	for i := range uint64(entries) {
		var b []string
		for j := range perEntry {
			b = append(b, fmt.Sprintf("e%d-%d", i, j))
		}
		p.publish(pid, i, msg{batch: b})
	}
	want := func(r received, i int) {
		t.Helper()
		if len(r.batch) != perEntry || r.batch[0] != fmt.Sprintf("e%d-0", i) {
			t.Fatalf("got %v, want entry %d", r.batch, i)
		}
	}
	permits := func(n int64) {
		t.Helper()
		brokertest.Eventually(t, waitFor, fmt.Sprintf("permits %d", n), func() bool {
			ci := c.Consumers(topic, "s")
			return len(ci) == 1 && ci[0].Permits == n
		})
	}
	p.flow(cid, 5)
	want(p.receive(cid), 0)
	permits(-5)
	p.flow(cid, 5) // back to zero: nothing may go
	permits(0)
	p.noMessage(cid, 100e6)
	p.flow(cid, 5) // one permit is enough for a whole entry
	want(p.receive(cid), 1)
	permits(-5)
	p.noMessage(cid, 50e6)

	// Both come back, in order, before entry 2, which the broker has read
	// ahead; then the rest.
	p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: &cid})
	p.flow(cid, 5)
	p.flow(cid, 5)
	for i := range entries {
		want(p.receive(cid), i)
		p.flow(cid, perEntry)
	}
	p.noMessage(cid, 50e6)
}

// A FLOW answered from the read-ahead is written without waiting for the
// socket: a client that stops reading does not stop the broker from
// handling its next commands (the permits of every FLOW count), and it
// gets what they allow once it reads again.
func TestFlowAnswerNeverBlocksTheReadLoop(t *testing.T) {
	c := brokertest.Start(t)
	const n, flows = 40, 30 // entries of 1 MiB, FLOWs of one permit
	p := dial(t, c.ServiceURL())
	pid := p.producer("no-reader")
	big := strings.Repeat("x", 1<<20)
	for i := range uint64(n) {
		p.publish(pid, i, msg{payload: big})
	}
	u := dialUnread(t, c.ServiceURL(), "no-reader", pb.CommandSubscribe_Earliest)
	// One FLOW at a time, each handled before the next: from the second
	// on, each is answered from the read-ahead, until the socket and then
	// the connection's buffer are full.
	for i := range int64(flows) {
		u.send(&pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(1)})
		brokertest.Eventually(t, waitFor, fmt.Sprintf("FLOW %d handled", i+1), func() bool {
			ci := c.Consumers("no-reader", "s")
			return len(ci) == 1 && ci[0].Permits+ci[0].Dispatched == i+1
		})
	}
	u.readMessages(flows) // one entry a permit
}
