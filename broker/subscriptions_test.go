package broker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func publishN(t *testing.T, p *peer, topic string, n int, key func(int) string) {
	t.Helper()
	pid := p.producer(topic)
	for i := 0; i < n; i++ {
		m := msg{payload: fmt.Sprint(i)}
		if key != nil {
			m.key = key(i)
		}
		p.publish(pid, uint64(i), m)
	}
}

func TestSecondExclusiveConsumerIsBusyUntilTheFirstLeaves(t *testing.T) {
	c := brokertest.Start(t)
	a := dial(t, c.ServiceURL())
	b := dial(t, c.ServiceURL())
	first := a.subscribe("excl", "s", pb.CommandSubscribe_Exclusive)
	_, err := b.trySubscribe("excl", "s", pb.CommandSubscribe_Exclusive)
	if !errors.Is(err, pulsarwire.ErrConsumerBusy) {
		t.Fatalf("second exclusive consumer: %v, want ConsumerBusy", err)
	}
	if !pulsarwire.Retryable(err) {
		t.Errorf("ConsumerBusy should be retryable")
	}
	a.closeConsumer(first)
	b.subscribe("excl", "s", pb.CommandSubscribe_Exclusive)
}

func TestSubscriptionOfAnotherTypeIsBusy(t *testing.T) {
	c := brokertest.Start(t)
	a := dial(t, c.ServiceURL())
	a.subscribe("typed", "s", pb.CommandSubscribe_Shared)
	if _, err := a.trySubscribe("typed", "s", pb.CommandSubscribe_Failover); !errors.Is(err, pulsarwire.ErrConsumerBusy) {
		t.Fatalf("failover consumer on a shared subscription: %v, want ConsumerBusy", err)
	}
}

func isActiveChange(cid uint64) func(*pb.BaseCommand) bool {
	return func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_ACTIVE_CONSUMER_CHANGE && c.GetActiveConsumerChange().GetConsumerId() == cid
	}
}

func TestFailoverTellsWhoIsActiveAndHandsOverOnClose(t *testing.T) {
	c := brokertest.Start(t)
	topic := "failover"
	p := dial(t, c.ServiceURL())
	x := p.subscribe(topic, "s", pb.CommandSubscribe_Failover, named("a"), earliest)
	y := p.subscribe(topic, "s", pb.CommandSubscribe_Failover, named("b"))
	xActive := p.expect("a's ACTIVE_CONSUMER_CHANGE", isActiveChange(x)).Cmd.GetActiveConsumerChange().GetIsActive()
	yActive := p.expect("b's ACTIVE_CONSUMER_CHANGE", isActiveChange(y)).Cmd.GetActiveConsumerChange().GetIsActive()
	if xActive == yActive {
		t.Fatalf("both told active=%v", xActive)
	}
	a, b := x, y // a: the active one
	if yActive {
		a, b = y, x
	}
	for _, ci := range c.Consumers(topic, "s") {
		if ci.Active != (ci.ID == a) {
			t.Fatalf("the broker's view disagrees with what it told: %+v", ci)
		}
	}
	publishN(t, p, topic, 10, nil)
	p.flow(a, 100)
	p.flow(b, 100)
	for i := 0; i < 10; i++ {
		m := p.receive(a)
		if m.payload != fmt.Sprint(i) {
			t.Fatalf("a got %q, want %d", m.payload, i)
		}
		if i < 4 {
			p.ack(a, m.id)
		}
	}
	p.noMessage(b, 50*time.Millisecond)
	p.closeConsumer(a)
	if f := p.expect("b becomes active", isActiveChange(b)); !f.Cmd.GetActiveConsumerChange().GetIsActive() {
		t.Errorf("b should now be active")
	}
	for i := 4; i < 10; i++ {
		if m := p.receive(b); m.payload != fmt.Sprint(i) {
			t.Fatalf("after the handover b got %q, want %d", m.payload, i)
		}
	}
}

func TestSharedSpreadsAcrossConsumers(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cs := []uint64{
		p.subscribe("shared", "s", pb.CommandSubscribe_Shared),
		p.subscribe("shared", "s", pb.CommandSubscribe_Shared),
		p.subscribe("shared", "s", pb.CommandSubscribe_Shared),
	}
	for _, cid := range cs {
		p.flow(cid, 1000)
	}
	publishN(t, p, "shared", 30, nil)
	per := map[uint64]int{}
	seen := map[string]bool{}
	for len(seen) < 30 {
		f := p.expect("a message", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_MESSAGE })
		seen[string(f.Payload)] = true
		per[f.Cmd.GetMessage().GetConsumerId()]++
	}
	for _, cid := range cs {
		if per[cid] < 5 {
			t.Errorf("consumer %d got %d of 30: %v", cid, per[cid], per)
		}
	}
}

func TestCumulativeAckIsRefusedOnShared(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("cumul", "s", pb.CommandSubscribe_Shared)
	rid := p.rid()
	resp := p.request(&pb.CommandAck{ConsumerId: proto.Uint64(cid), AckType: pb.CommandAck_Cumulative.Enum(),
		MessageId: []*pb.MessageIdData{{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(0)}}, RequestId: proto.Uint64(rid)}, rid)
	if err := errOf(resp); !errors.Is(err, pulsarwire.ErrNotAllowed) {
		t.Fatalf("cumulative ack on Shared: %v, want NotAllowedError", err)
	}
}

func TestRedeliveryCountGrows(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("redeliver", "s", pb.CommandSubscribe_Shared)
	p.flow(cid, 100)
	publishN(t, p, "redeliver", 1, nil)
	for want := uint32(0); want < 4; want++ {
		m := p.receive(cid)
		if m.redelivery != want {
			t.Fatalf("delivery %d has redelivery_count %d", want, m.redelivery)
		}
		p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(cid), MessageIds: []*pb.MessageIdData{m.id}})
	}
}

// Apache Pulsar's single-active dispatcher keeps no redelivery tracker:
// on Exclusive and Failover a redelivered message (named, or all of the
// consumer's) comes back with redelivery_count 0, every time.
func TestNoRedeliveryCountOnExclusiveAndFailover(t *testing.T) {
	for _, typ := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover} {
		t.Run(typ.String(), func(t *testing.T) {
			c := brokertest.Start(t)
			p := dial(t, c.ServiceURL())
			cid := p.subscribe("nocount", "s", typ)
			p.flow(cid, 100)
			publishN(t, p, "nocount", 1, nil)
			for i := 0; i < 4; i++ {
				m := p.receive(cid)
				if m.redelivery != 0 {
					t.Fatalf("delivery %d has redelivery_count %d, want 0", i, m.redelivery)
				}
				r := &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(cid)}
				if i%2 == 0 {
					r.MessageIds = []*pb.MessageIdData{m.id}
				}
				p.send(r)
			}
		})
	}
}

// On Exclusive and Failover Apache Pulsar keeps order by rewinding the
// cursor: a REDELIVER naming one message brings back every unacknowledged
// one, in order.
func TestRedeliverOnExclusiveBringsBackEverythingUnacked(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("rewind", "s", pb.CommandSubscribe_Exclusive)
	p.flow(cid, 100)
	publishN(t, p, "rewind", 4, nil)
	var ms []received
	for i := 0; i < 4; i++ {
		ms = append(ms, p.receive(cid))
	}
	p.ack(cid, ms[0].id)
	p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(cid), MessageIds: []*pb.MessageIdData{ms[2].id}})
	for i := 1; i < 4; i++ {
		if m := p.receive(cid); m.payload != fmt.Sprint(i) {
			t.Fatalf("redelivered %q, want %d", m.payload, i)
		}
	}
	p.noMessage(cid, 50*time.Millisecond)
}

func TestUnackedMessagesOfALeavingConsumerAreRedelivered(t *testing.T) {
	c := brokertest.Start(t)
	a := dial(t, c.ServiceURL())
	b := dial(t, c.ServiceURL())
	ca := a.subscribe("leave", "s", pb.CommandSubscribe_Shared)
	a.flow(ca, 100)
	publishN(t, a, "leave", 5, nil)
	for i := 0; i < 5; i++ {
		a.receive(ca)
	}
	a.close() // disconnects with 5 unacked
	cb := b.subscribe("leave", "s", pb.CommandSubscribe_Shared)
	b.flow(cb, 100)
	got := map[string]bool{}
	for i := 0; i < 5; i++ {
		got[b.receive(cb).payload] = true
	}
	if len(got) != 5 {
		t.Fatalf("redelivered %v", got)
	}
}

func TestKeySharedNeverSplitsAKeyAndKeepsOrderWhenAConsumerJoins(t *testing.T) {
	c := brokertest.Start(t)
	topic := "keyshared"
	p := dial(t, c.ServiceURL())
	first := p.subscribe(topic, "s", pb.CommandSubscribe_Key_Shared, named("first"))
	p.flow(first, 1000)
	const keys, per = 20, 10
	pid := p.producer(topic)
	seq := uint64(0)
	publish := func(round int) {
		for k := 0; k < keys; k++ {
			p.publish(pid, seq, msg{key: fmt.Sprint("k", k), payload: fmt.Sprintf("k%d-%d", k, round)})
			seq++
		}
	}
	next := map[string]int{}     // key -> next round expected
	owner := map[string]uint64{} // key -> consumer since the join
	check := func(m received, cid uint64) {
		var k, r int
		fmt.Sscanf(m.payload, "k%d-%d", &k, &r)
		key := fmt.Sprint("k", k)
		if r != next[key] {
			t.Fatalf("key %s: got round %d at consumer %d, want %d", key, r, cid, next[key])
		}
		next[key]++
	}
	// Half the rounds go to the first consumer, unacked.
	var held []received
	for r := 0; r < per/2; r++ {
		publish(r)
	}
	for i := 0; i < keys*per/2; i++ {
		m := p.receive(first)
		check(m, first)
		held = append(held, m)
	}
	second := p.subscribe(topic, "s", pb.CommandSubscribe_Key_Shared, named("second"))
	p.flow(second, 1000)
	for r := per / 2; r < per; r++ {
		publish(r)
	}
	// Keys moving to the second consumer wait until the first acks.
	for _, m := range held {
		p.ack(first, m.id)
	}
	for i := 0; i < keys*per/2; i++ {
		f := p.expect("a message", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_MESSAGE })
		m := decode(f)
		cid := f.Cmd.GetMessage().GetConsumerId()
		check(m, cid)
		key := m.key
		if o, ok := owner[key]; ok && o != cid {
			t.Fatalf("key %s split between consumers %d and %d after the join", key, o, cid)
		}
		owner[key] = cid
		p.ack(cid, m.id)
	}
	moved := 0
	for _, o := range owner {
		if o == second {
			moved++
		}
	}
	if moved == 0 || moved == keys {
		t.Errorf("%d of %d keys moved to the new consumer", moved, keys)
	}
}

func TestKeySharedStickyRangesMustNotOverlap(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	sticky := func(lo, hi int32) subOpt {
		return func(m *pb.CommandSubscribe) {
			m.KeySharedMeta = &pb.KeySharedMeta{KeySharedMode: pb.KeySharedMode_STICKY.Enum(),
				HashRanges: []*pb.IntRange{{Start: proto.Int32(lo), End: proto.Int32(hi)}}}
		}
	}
	p.subscribe("sticky", "s", pb.CommandSubscribe_Key_Shared, sticky(0, 32767))
	if _, err := p.trySubscribe("sticky", "s", pb.CommandSubscribe_Key_Shared, sticky(30000, 65535)); !errors.Is(err, &pulsarwire.ServerError{Code: pb.ServerError_ConsumerAssignError}) {
		t.Fatalf("overlapping range: %v, want ConsumerAssignError", err)
	}
	p.subscribe("sticky", "s", pb.CommandSubscribe_Key_Shared, sticky(32768, 65535))
}

func TestSeekByIDAndByTime(t *testing.T) {
	c := brokertest.Start(t)
	topic := "seek"
	p := dial(t, c.ServiceURL())
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
	pid := p.producer(topic)
	var ids []*pb.MessageIdData
	for i := 0; i < 5; i++ {
		ids = append(ids, p.publish(pid, uint64(i), msg{payload: fmt.Sprint(i)}).GetMessageId())
	}
	time.Sleep(5 * time.Millisecond) // publish times are in milliseconds
	mid := time.Now().UnixMilli()
	time.Sleep(5 * time.Millisecond)
	for i := 5; i < 10; i++ {
		p.publish(pid, uint64(i), msg{payload: fmt.Sprint(i)})
	}
	p.flow(cid, 100)
	for i := 0; i < 10; i++ {
		m := p.receive(cid)
		p.ack(cid, m.id)
	}
	brokertest.Eventually(t, waitFor, "backlog 0", func() bool { return c.Backlog(topic, "s") == 0 })

	seek := func(m *pb.CommandSeek) {
		t.Helper()
		rid := p.rid()
		m.ConsumerId, m.RequestId = proto.Uint64(cid), proto.Uint64(rid)
		p.send(m)
		// As Apache Pulsar: the consumer is closed first, then the seek
		// is answered; the client subscribes again.
		p.expect("CLOSE_CONSUMER", func(c *pb.BaseCommand) bool {
			return c.GetType() == pb.BaseCommand_CLOSE_CONSUMER && c.GetCloseConsumer().GetConsumerId() == cid
		})
		if err := errOf(p.response(rid)); err != nil {
			t.Fatalf("seek: %v", err)
		}
		cid = p.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
		p.flow(cid, 100)
	}
	seek(&pb.CommandSeek{MessageId: ids[2]})
	for i := 2; i < 10; i++ {
		if m := p.receive(cid); m.payload != fmt.Sprint(i) {
			t.Fatalf("after seek to id 2: %q, want %d", m.payload, i)
		}
	}
	seek(&pb.CommandSeek{MessagePublishTime: proto.Uint64(uint64(mid))})
	for i := 5; i < 10; i++ {
		if m := p.receive(cid); m.payload != fmt.Sprint(i) {
			t.Fatalf("after seek by time: %q, want %d", m.payload, i)
		}
	}
}

func TestNonDurableSubscriptionStartsAtTheGivenMessage(t *testing.T) {
	c := brokertest.Start(t)
	topic := "reader"
	p := dial(t, c.ServiceURL())
	pid := p.producer(topic)
	var ids []*pb.MessageIdData
	for i := 0; i < 5; i++ {
		ids = append(ids, p.publish(pid, uint64(i), msg{payload: fmt.Sprint(i)}).GetMessageId())
	}
	cid := p.subscribe(topic, "reader-1", pb.CommandSubscribe_Exclusive, func(m *pb.CommandSubscribe) {
		m.Durable = proto.Bool(false)
		m.StartMessageId = ids[3]
	})
	p.flow(cid, 10)
	for i := 3; i < 5; i++ {
		if m := p.receive(cid); m.payload != fmt.Sprint(i) {
			t.Fatalf("reader got %q, want %d", m.payload, i)
		}
	}
	p.closeConsumer(cid)
	brokertest.Eventually(t, waitFor, "the non-durable subscription to go", func() bool { return len(c.Subscriptions(topic)) == 0 })
}

func TestGetLastMessageIDGivesTheLastBatchIndex(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("last", "s", pb.CommandSubscribe_Exclusive)
	last := func() *pb.MessageIdData {
		rid := p.rid()
		return p.request(&pb.CommandGetLastMessageId{ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid)}, rid).GetGetLastMessageIdResponse().GetLastMessageId()
	}
	if id := last(); int64(id.GetEntryId()) != -1 {
		t.Errorf("empty topic: last entry %d, want -1", int64(id.GetEntryId()))
	}
	pid := p.producer("last")
	p.publish(pid, 0, msg{payload: "single"})
	r := p.publish(pid, 1, msg{batch: []string{"a", "b", "c"}})
	id := last()
	if id.GetEntryId() != r.GetMessageId().GetEntryId() || id.GetBatchIndex() != 2 {
		t.Errorf("last id %v, want entry %d batch index 2", id, r.GetMessageId().GetEntryId())
	}
}

func TestUnsubscribeDeletesTheSubscription(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("unsub", "s", pb.CommandSubscribe_Shared)
	other := p.subscribe("unsub", "s", pb.CommandSubscribe_Shared)
	rid := p.rid()
	if err := errOf(p.request(&pb.CommandUnsubscribe{ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid)}, rid)); !errors.Is(err, pulsarwire.ErrConsumerBusy) {
		t.Fatalf("unsubscribe with another consumer: %v, want ConsumerBusy", err)
	}
	p.closeConsumer(other)
	rid = p.rid()
	if err := errOf(p.request(&pb.CommandUnsubscribe{ConsumerId: proto.Uint64(cid), RequestId: proto.Uint64(rid)}, rid)); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	if subs := c.Subscriptions("unsub"); len(subs) != 0 {
		t.Fatalf("subscriptions left: %v", subs)
	}
}

func TestBatchIndexAcks(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("batchack", "s", pb.CommandSubscribe_Shared)
	p.flow(cid, 100)
	pid := p.producer("batchack")
	p.publish(pid, 0, msg{batch: []string{"a", "b", "c"}})
	m := p.receive(cid)
	// Ack messages 0 and 2: bit 1 stays set (unacked).
	part := proto.Clone(m.id).(*pb.MessageIdData)
	part.AckSet = []int64{0b010}
	p.ack(cid, part)
	p.send(&pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: proto.Uint64(cid)})
	f := p.expect("redelivery", isMessageFor(cid))
	if got := f.Cmd.GetMessage().GetAckSet(); len(got) != 1 || got[0] != 0b010 {
		t.Fatalf("redelivered with ack_set %v, want [2]", got)
	}
	part.AckSet = []int64{0}
	p.ack(cid, part)
	brokertest.Eventually(t, waitFor, "backlog 0", func() bool { return c.Backlog("batchack", "s") == 0 })
}

func TestExclusiveHolderThatStopsAnsweringIsReplaced(t *testing.T) {
	// Long enough that a loaded CI machine answers pings in time: a shorter
	// keep-alive closed the live holder too and the test failed on load.
	c := brokertest.Start(t, func(o *broker.Options) { o.KeepAlive = 2 * time.Second })
	a := dial(t, c.ServiceURL())
	a.subscribe("vanished", "s", pb.CommandSubscribe_Exclusive)
	b := dial(t, c.ServiceURL())
	// A live holder answers the liveness PING: the newcomer is refused.
	if _, err := b.trySubscribe("vanished", "s", pb.CommandSubscribe_Exclusive); !errors.Is(err, pulsarwire.ErrConsumerBusy) {
		t.Fatalf("while the holder lives: %v", err)
	}
	a.silent.Store(true) // as a client gone without closing its socket
	start := time.Now()
	b.subscribe("vanished", "s", pb.CommandSubscribe_Exclusive)
	if !a.closedByBroker() {
		t.Fatal("the silent holder's connection stays open")
	}
	t.Logf("taken over after %v", time.Since(start).Round(time.Millisecond))
}

func TestDelayedDeliveryOnShared(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("delayed", "s", pb.CommandSubscribe_Shared)
	p.flow(cid, 10)
	pid := p.producer("delayed")
	at := time.Now().Add(300 * time.Millisecond).UnixMilli()
	p.publish(pid, 0, msg{payload: "later", deliverAt: at})
	p.publish(pid, 1, msg{payload: "now"})
	if m := p.receive(cid); m.payload != "now" {
		t.Fatalf("first delivery %q, want the undelayed message", m.payload)
	}
	m := p.receive(cid)
	if m.payload != "later" || time.Now().UnixMilli() < at {
		t.Fatalf("delayed message %q arrived %d ms early", m.payload, at-time.Now().UnixMilli())
	}
}

func TestSharedConsumerBlockedAt50000Unacked(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("unacked", "s", pb.CommandSubscribe_Shared)
	pid := p.producer("unacked")
	batch := make([]string, 100)
	for i := range batch {
		batch[i] = "x"
	}
	for i := 0; i < 510; i++ {
		p.write(sendFrame(pid, uint64(i), msg{batch: batch}))
	}
	for i := 0; i < 510; i++ {
		p.expect("receipt", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
	}
	p.flow(cid, 1_000_000)
	var first received
	for i := 0; i < 500; i++ {
		m := p.receive(cid)
		if i == 0 {
			first = m
		}
	}
	p.noMessage(cid, 100*time.Millisecond)
	if ci := c.Consumers("unacked", "s"); len(ci) != 1 || ci[0].Unacked != 50000 {
		t.Fatalf("consumer %+v", ci)
	}
	p.ack(cid, first.id)
	p.receive(cid) // room for one more entry
}

// A consumer whose client stops reading is sent no more than the socket
// and a bounded buffer hold, whatever its permits; it gets the rest once
// it reads again.
func TestSlowReaderBoundsTheBrokersBuffer(t *testing.T) {
	c := brokertest.Start(t)
	u := dialUnread(t, c.ServiceURL(), "slow", pb.CommandSubscribe_Latest)
	u.send(&pb.CommandFlow{ConsumerId: proto.Uint64(1), MessagePermits: proto.Uint32(1 << 30)})

	const n = 100 // of 1 MiB each
	p := dial(t, c.ServiceURL())
	pid := p.producer("slow")
	big := strings.Repeat("x", 1<<20)
	for i := 0; i < n; i++ {
		p.publish(pid, uint64(i), msg{payload: big})
	}
	dispatched := func() int64 { return c.Consumers("slow", "s")[0].Dispatched }
	if d := dispatched(); d >= n/2 {
		t.Fatalf("%d of %d MiB dispatched to a client that reads nothing", d, n)
	}
	u.readMessages(n)
}
