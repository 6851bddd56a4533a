package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func isCloseConsumer(cid uint64) func(*pb.BaseCommand) bool {
	return func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_CLOSE_CONSUMER && c.GetCloseConsumer().GetConsumerId() == cid
	}
}

func isCloseProducer(pid uint64) func(*pb.BaseCommand) bool {
	return func(c *pb.BaseCommand) bool {
		return c.GetType() == pb.BaseCommand_CLOSE_PRODUCER && c.GetCloseProducer().GetProducerId() == pid
	}
}

// PUT .../unload closes the topic's producers and consumers with
// CLOSE_PRODUCER / CLOSE_CONSUMER, as Apache Pulsar does; the connection
// stays, the clients come back on it, and the cursor kept every ack.
func TestAdminUnloadClosesProducersAndConsumers(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	const topic = "persistent://public/default/unload-me"
	pid := p.producer(topic)
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared, earliest)
	p.flow(cid, 100)
	for i := 0; i < 4; i++ {
		p.publish(pid, uint64(i), msg{payload: fmt.Sprint(i)})
	}
	for i := 0; i < 4; i++ {
		m := p.receive(cid)
		if i < 2 {
			p.ack(cid, m.id)
		}
	}
	brokertest.Eventually(t, waitFor, "two acks", func() bool { return c.Backlog(topic, "s") == 2 })
	if len(c.Consumers(topic, "s")) != 1 || len(c.Producers(topic)) != 1 {
		t.Fatalf("before unload: consumers %v, producers %v", c.Consumers(topic, "s"), c.Producers(topic))
	}

	adminDo(t, "PUT", c.AdminURL()+"/admin/v2/persistent/public/default/unload-me/unload", "", 204)
	p.expect("CLOSE_PRODUCER", isCloseProducer(pid))
	p.expect("CLOSE_CONSUMER", isCloseConsumer(cid))
	if len(c.Consumers(topic, "s")) != 0 || len(c.Producers(topic)) != 0 {
		t.Fatalf("after unload: consumers %v, producers %v", c.Consumers(topic, "s"), c.Producers(topic))
	}
	// A message the client had in flight for the closed producer is
	// ignored, not a reason to drop the connection.
	p.write(sendFrame(pid, 99, msg{payload: "late"}))

	// Back on the same connection: the unacked messages come again.
	cid2 := p.subscribe(topic, "s", pb.CommandSubscribe_Shared)
	p.flow(cid2, 100)
	got := map[string]bool{}
	for i := 0; i < 2; i++ {
		got[p.receive(cid2).payload] = true
	}
	if !got["2"] || !got["3"] {
		t.Fatalf("after the unload got %v, want 2 and 3", got)
	}
	pid2 := p.producer(topic)
	p.publish(pid2, 0, msg{payload: "4"})
	if m := p.receive(cid2); m.payload != "4" {
		t.Fatalf("got %q, want 4", m.payload)
	}
	p.noMessage(cid2, 50*time.Millisecond)
}

func TestAdminUnloadPartitionedAndUnknown(t *testing.T) {
	c := brokertest.Start(t)
	base := c.AdminURL() + "/admin/v2/persistent/public/default/"
	adminDo(t, "PUT", base+"parts/partitions", "3", 204)
	p := dial(t, c.ServiceURL())
	var cids []uint64
	for i := 0; i < 3; i++ {
		cids = append(cids, p.subscribe(fmt.Sprintf("persistent://public/default/parts-partition-%d", i), "s", pb.CommandSubscribe_Failover))
	}
	adminDo(t, "PUT", base+"parts/unload", "", 204)
	for _, cid := range cids {
		p.expect("CLOSE_CONSUMER", isCloseConsumer(cid))
	}
	// A topic that exists but has nothing loaded: nothing to close.
	adminDo(t, "PUT", base+"idle", "", 204)
	adminDo(t, "PUT", base+"idle/unload", "", 204)
	if got := adminDo(t, "PUT", base+"never-created/unload", "", 404); !strings.Contains(got, `"reason"`) {
		t.Errorf("404 body %s, want a reason", got)
	}
}
