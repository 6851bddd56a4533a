package broker_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func priority(n int32) subOpt {
	return func(m *pb.CommandSubscribe) { m.PriorityLevel = proto.Int32(n) }
}

// As Apache Pulsar (activeConsumerFailoverDelayTimeMillis), a Failover
// subscription's new active consumer takes over only FailoverDelay after
// the change: it is told and sent messages then, an ack the old one sends
// meanwhile still counts, and ACTIVE_CONSUMER_CHANGE goes only to the
// consumers whose state changed.
func TestFailoverHandOverWaitsAndTellsOnlyTheChanged(t *testing.T) {
	const delay = 300 * time.Millisecond
	c := brokertest.Start(t, func(o *broker.Options) { o.FailoverDelay = delay })
	const topic = "handover"
	p := dial(t, c.ServiceURL())
	publishN(t, p, topic, 3, nil)
	activeChange := func(cid uint64, want bool, since time.Time) {
		t.Helper()
		f := p.expect(fmt.Sprintf("ACTIVE_CONSUMER_CHANGE for %d", cid), isActiveChange(cid))
		if got := f.Cmd.GetActiveConsumerChange().GetIsActive(); got != want {
			t.Fatalf("consumer %d told active=%v, want %v", cid, got, want)
		}
		if !since.IsZero() && time.Since(since) < delay {
			t.Fatalf("consumer %d told active=%v %v after the change, before the %v delay", cid, want, time.Since(since), delay)
		}
	}
	receiveAfter := func(cid uint64, want string, since time.Time) received {
		t.Helper()
		m := p.receive(cid)
		if m.payload != want {
			t.Fatalf("consumer %d got %q, want %q", cid, m.payload, want)
		}
		if !since.IsZero() && time.Since(since) < delay {
			t.Fatalf("consumer %d got a message %v after the change, before the %v delay", cid, time.Since(since), delay)
		}
		return m
	}
	noActiveChange := func(cid uint64) {
		t.Helper()
		if f, ok := p.wait(2*activeNotify, isActiveChange(cid)); ok {
			t.Fatalf("consumer %d told active=%v, but its state did not change", cid, f.Cmd.GetActiveConsumerChange().GetIsActive())
		}
	}

	// The first consumer too waits before it is active.
	start := time.Now()
	a := p.subscribe(topic, "s", pb.CommandSubscribe_Failover, named("a"), priority(1), earliest)
	p.flow(a, 100)
	activeChange(a, true, start)
	m0 := receiveAfter(a, "0", start)
	m1 := receiveAfter(a, "1", time.Time{})
	receiveAfter(a, "2", time.Time{})

	// A standby newcomer: only it is told, and at once.
	b := p.subscribe(topic, "s", pb.CommandSubscribe_Failover, named("b"), priority(2))
	p.flow(b, 100)
	activeChange(b, false, time.Time{})
	noActiveChange(a)

	// A consumer of a better priority level takes over after the delay;
	// the old one's ack sent meanwhile counts.
	p.ack(a, m0.id)
	change := time.Now()
	z := p.subscribe(topic, "s", pb.CommandSubscribe_Failover, named("z"), priority(0))
	p.flow(z, 100)
	p.ack(a, m1.id)
	activeChange(z, true, change)
	activeChange(a, false, change)
	receiveAfter(z, "2", change)
	p.noMessage(z, 100*time.Millisecond)
	noActiveChange(b)
	for _, ci := range c.Consumers(topic, "s") {
		if ci.Active != (ci.ID == z) {
			t.Fatalf("after the hand-over: %+v", ci)
		}
	}

	// The active one leaves: the next takes over after the delay.
	change = time.Now()
	p.closeConsumer(z)
	activeChange(a, true, change)
	receiveAfter(a, "2", change)
	noActiveChange(b)
}

// activeNotify bounds how long a newcomer waits to be told (the broker's
// 100 ms, with room).
const activeNotify = 150 * time.Millisecond

// FailoverDelay < 0 turns the wait off: the first consumer is sent
// messages at once.
func TestFailoverWithoutDelay(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.FailoverDelay = -1 })
	p := dial(t, c.ServiceURL())
	publishN(t, p, "nodelay", 1, nil)
	start := time.Now()
	a := p.subscribe("nodelay", "s", pb.CommandSubscribe_Failover, earliest)
	p.flow(a, 10)
	p.receive(a)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("first message after %v", d)
	}
	if f := p.expect("ACTIVE_CONSUMER_CHANGE", isActiveChange(a)); !f.Cmd.GetActiveConsumerChange().GetIsActive() {
		t.Fatal("told standby")
	}
}
