package broker_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

const (
	fencedPrefix = "org.apache.pulsar.broker.service.BrokerServiceException$ProducerFencedException: "
	busyPrefix   = "org.apache.pulsar.broker.service.BrokerServiceException$ProducerBusyException: "
)

// openAccess sends a PRODUCER with an access mode and, when epoch is not
// nil, the topic epoch it names; it returns the request and producer ids.
func (p *peer) openAccess(topic string, mode pb.ProducerAccessMode, epoch *uint64) (rid, pid uint64) {
	rid, pid = p.rid(), p.rid()
	p.send(&pb.CommandProducer{Topic: proto.String(topic), ProducerId: proto.Uint64(pid), RequestId: proto.Uint64(rid),
		ProducerAccessMode: mode.Enum(), TopicEpoch: epoch})
	return rid, pid
}

// opened waits for a producer's answer and checks it is a ready
// PRODUCER_SUCCESS with the topic epoch want (-1: none).
func (p *peer) opened(what string, rid uint64, want int64) *pb.CommandProducerSuccess {
	p.t.Helper()
	c := p.response(rid)
	s := c.GetProducerSuccess()
	if s == nil || !s.GetProducerReady() {
		p.t.Fatalf("%s: got %v, want a ready producer", what, c)
	}
	if got := s.TopicEpoch; (want < 0) != (got == nil) || (got != nil && int64(*got) != want) {
		p.t.Fatalf("%s: topic epoch in %v, want %d (-1: none)", what, s, want)
	}
	return s
}

// The access modes as Apache Pulsar 4.0.8 answers them, codes and
// messages: Exclusive refused beside another producer, Shared refused
// beside an exclusive one, WaitForExclusive answered not ready and then
// ready once the topic is free, ExclusiveWithFencing taking the topic
// from every producer (silently: the fenced one's next SEND closes its
// connection) and failing those waiting, and the topic epoch: moved on
// by each exclusive producer naming none, and a producer naming an older
// one fenced whatever its mode. Both brokers.
func TestProducerAccessModes(t *testing.T) {
	peer := brokertest.Target(t)
	topic := brokertest.TopicName(t)
	a, b, c := dial(t, peer.URL), dial(t, peer.URL), dial(t, peer.URL)

	rid, pa := a.openAccess(topic, pb.ProducerAccessMode_Exclusive, nil)
	first := a.opened("first Exclusive", rid, 0).GetProducerName()
	rid, _ = b.openAccess(topic, pb.ProducerAccessMode_Exclusive, nil)
	wantRefusal(t, "second Exclusive", b.response(rid), pb.ServerError_ProducerFenced, fencedPrefix+"Topic has an existing exclusive producer: "+first)
	rid, _ = b.openAccess(topic, pb.ProducerAccessMode_Shared, nil)
	wantRefusal(t, "Shared beside Exclusive", b.response(rid), pb.ServerError_ProducerBusy, busyPrefix+"Topic has an existing exclusive producer: "+first)

	waitRid, _ := b.openAccess(topic, pb.ProducerAccessMode_WaitForExclusive, nil)
	if s := b.response(waitRid).GetProducerSuccess(); s == nil || s.GetProducerReady() || s.TopicEpoch != nil {
		t.Fatalf("WaitForExclusive beside Exclusive: got %v, want a producer not ready, without epoch", s)
	}
	rid, _ = c.openAccess(topic, pb.ProducerAccessMode_Shared, nil)
	wantRefusal(t, "Shared while one waits", c.response(rid), pb.ServerError_ProducerBusy, busyPrefix+"Topic has an existing exclusive producer: "+first)

	rid, pc := c.openAccess(topic, pb.ProducerAccessMode_ExclusiveWithFencing, nil)
	fencer := c.opened("ExclusiveWithFencing", rid, 1).GetProducerName()
	wantRefusal(t, "the waiting producer", b.response(waitRid), pb.ServerError_ProducerFenced, fencedPrefix+"Fenced out")

	// The fenced producer was not told; its SEND closes its connection.
	if f, ok := a.wait(500*time.Millisecond, func(*pb.BaseCommand) bool { return true }); ok {
		t.Fatalf("fenced producer's connection got %v, want nothing", f.Cmd)
	}
	a.write(sendFrame(pa, 0, msg{payload: "late"}))
	if !a.closedByBroker() {
		t.Fatal("a SEND of the fenced producer did not close its connection")
	}
	c.publish(pc, 0, msg{payload: "fencer"})

	// A reconnect naming epoch 0: fenced, in every exclusive mode.
	a = dial(t, peer.URL)
	rid, _ = a.openAccess(topic, pb.ProducerAccessMode_Exclusive, proto.Uint64(0))
	wantRefusal(t, "Exclusive at epoch 0 beside the fencer", a.response(rid), pb.ServerError_ProducerFenced, fencedPrefix+"Topic has an existing exclusive producer: "+fencer)
	rid, _ = a.openAccess(topic, pb.ProducerAccessMode_WaitForExclusive, proto.Uint64(0))
	if s := a.response(rid).GetProducerSuccess(); s == nil || s.GetProducerReady() {
		t.Fatalf("WaitForExclusive at epoch 0 beside the fencer: got %v, want it queued", s)
	}
	rid, _ = a.openAccess(topic, pb.ProducerAccessMode_ExclusiveWithFencing, proto.Uint64(0))
	moved := fencedPrefix + "Topic epoch has already moved. Current epoch: 1, Producer epoch: 0"
	wantRefusal(t, "ExclusiveWithFencing at epoch 0", a.response(rid), pb.ServerError_ProducerFenced, moved)
	// That stale fencing still took the topic from the fencer (as Apache
	// Pulsar does), which gets it back naming its epoch.
	rid, _ = a.openAccess(topic, pb.ProducerAccessMode_WaitForExclusive, proto.Uint64(0))
	wantRefusal(t, "WaitForExclusive at epoch 0 on a free topic", a.response(rid), pb.ServerError_ProducerFenced, moved)
	rid, _ = c.openAccess(topic, pb.ProducerAccessMode_Exclusive, proto.Uint64(1))
	back := c.opened("Exclusive naming the current epoch", rid, 1).GetProducerName()

	// Shared producers: told the epoch; Exclusive refused beside them,
	// WaitForExclusive waits for the last to leave.
	other := topic + "-shared"
	rid, ps := a.openAccess(other, pb.ProducerAccessMode_Shared, nil)
	a.opened("Shared on a fresh topic", rid, -1)
	rid, _ = b.openAccess(other, pb.ProducerAccessMode_Exclusive, nil)
	wantRefusal(t, "Exclusive beside Shared", b.response(rid), pb.ServerError_ProducerFenced, fencedPrefix+"Topic has existing shared producers")
	waitRid, _ = b.openAccess(other, pb.ProducerAccessMode_WaitForExclusive, nil)
	if s := b.response(waitRid).GetProducerSuccess(); s == nil || s.GetProducerReady() {
		t.Fatalf("WaitForExclusive beside Shared: got %v, want it queued", s)
	}
	rid = a.rid()
	wantOK(t, "close Shared", a.request(&pb.CommandCloseProducer{ProducerId: proto.Uint64(ps), RequestId: proto.Uint64(rid)}, rid))
	waiter := b.opened("the waiting producer, its turn come", waitRid, 0).GetProducerName()
	rid, _ = a.openAccess(other, pb.ProducerAccessMode_Shared, nil)
	wantRefusal(t, "Shared beside the promoted one", a.response(rid), pb.ServerError_ProducerBusy, busyPrefix+"Topic has an existing exclusive producer: "+waiter)
	rid, _ = a.openAccess(other, pb.ProducerAccessMode_ExclusiveWithFencing, nil)
	a.opened("ExclusiveWithFencing after a waiter", rid, 1)
	_ = back
}

// The topic epoch outlives a restart of the embedded broker, as Apache
// Pulsar keeps it with the topic: a producer fenced before the restart
// stays fenced after it.
func TestTopicEpochSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *broker.Cluster {
		cl, err := brokertest.StartMain(context.Background(), brokertest.LogWriter(t, "broker"), slog.LevelInfo,
			func(o *broker.Options) { o.Memory, o.DataDir = false, dir })
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := start()
	topic := brokertest.TopicName(t)
	p := dial(t, cl.ServiceURL())
	for i := range 3 {
		rid, pid := p.openAccess(topic, pb.ProducerAccessMode_ExclusiveWithFencing, nil)
		p.opened(fmt.Sprintf("fencing producer %d", i), rid, int64(i))
		rid = p.rid()
		wantOK(t, "close", p.request(&pb.CommandCloseProducer{ProducerId: proto.Uint64(pid), RequestId: proto.Uint64(rid)}, rid))
	}
	p.close()
	cl.Close()
	cl = start()
	p = dial(t, cl.ServiceURL())
	rid, _ := p.openAccess(topic, pb.ProducerAccessMode_ExclusiveWithFencing, proto.Uint64(1))
	wantRefusal(t, "epoch 1 after the restart", p.response(rid), pb.ServerError_ProducerFenced,
		fencedPrefix+"Topic epoch has already moved. Current epoch: 2, Producer epoch: 1")
	rid, _ = p.openAccess(topic, pb.ProducerAccessMode_Exclusive, nil)
	p.opened("Exclusive after the restart", rid, 3)
	p.close()
	if err := cl.Close(); err != nil {
		t.Error(err)
	}
}
