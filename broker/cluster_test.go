package broker_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func TestLookupsRedirectToTheOwnerWithThreeBrokers(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.Brokers = 3 })
	urls := c.BrokerURLs()
	if len(urls) != 3 {
		t.Fatalf("broker urls %v", urls)
	}
	p := dial(t, c.ServiceURL())
	owners := map[int]bool{}
	for i := 0; i < 30; i++ {
		topic := fmt.Sprintf("persistent://public/default/spread-%d", i)
		owner := c.OwnerOf(topic)
		owners[owner] = true
		r := p.lookup(topic)
		if r.GetBrokerServiceUrl() != urls[owner] || !r.GetAuthoritative() {
			t.Fatalf("lookup %s: %v, want %s", topic, r, urls[owner])
		}
		want := pb.CommandLookupTopicResponse_Redirect
		if owner == 0 {
			want = pb.CommandLookupTopicResponse_Connect
		}
		if r.GetResponse() != want {
			t.Fatalf("lookup %s on broker 0: %v, want %v", topic, r.GetResponse(), want)
		}
		if owner != 0 {
			// The wrong broker refuses producers with a retryable error,
			// the owner takes them.
			if _, err := p.createProducer(topic, ""); !errors.Is(err, pulsarwire.ErrServiceNotReady) {
				t.Fatalf("producer on a broker that does not own %s: %v", topic, err)
			}
			q := dial(t, urls[owner])
			if r := q.lookup(topic); r.GetResponse() != pb.CommandLookupTopicResponse_Connect {
				t.Fatalf("lookup at the owner: %v", r)
			}
			q.producer(topic)
		}
	}
	if len(owners) != 3 {
		t.Errorf("30 topics spread over brokers %v", owners)
	}
}

func TestFaultsFireAndSpendTheirBudget(t *testing.T) {
	c := brokertest.Start(t)
	h := brokertest.Faults(t, c).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_LOOKUP, Topic: "faulty", Err: pb.ServerError_ServiceNotReady, Count: 3})
	p := dial(t, c.ServiceURL())
	if r := p.lookup("other"); r.GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("lookup of another topic: %v", r)
	}
	for i := 0; i < 3; i++ {
		r := p.lookup("persistent://public/default/faulty")
		if r.GetResponse() != pb.CommandLookupTopicResponse_Failed || r.GetError() != pb.ServerError_ServiceNotReady {
			t.Fatalf("lookup %d: %v, want ServiceNotReady", i, r)
		}
	}
	if r := p.lookup("faulty"); r.GetResponse() != pb.CommandLookupTopicResponse_Connect {
		t.Fatalf("lookup after the budget: %v", r)
	}
	if h.Fired() != 3 {
		t.Errorf("fired %d, want 3", h.Fired())
	}

	drop := brokertest.Faults(t, c).Add(faults.Fault{Command: pb.BaseCommand_PRODUCER, Drop: true})
	q := dial(t, c.ServiceURL())
	q.send(&pb.CommandProducer{Topic: proto.String("x"), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1)})
	if !q.closedByBroker() {
		t.Fatal("a Drop fault should close the connection")
	}
	drop.Remove()
	dial(t, c.ServiceURL()).producer("x")

	slow := brokertest.Faults(t, c).Add(faults.Fault{Command: pb.BaseCommand_PARTITIONED_METADATA, Delay: 100 * time.Millisecond, Count: 1})
	start := time.Now()
	rid := p.rid()
	resp := p.request(&pb.CommandPartitionedTopicMetadata{Topic: proto.String("slow"), RequestId: proto.Uint64(rid)}, rid)
	if err := errOf(resp); err != nil || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("delayed request: %v after %v", err, time.Since(start))
	}
	if slow.Fired() != 1 {
		t.Errorf("delay fault fired %d", slow.Fired())
	}

	brokertest.Faults(t, c).Add(faults.Fault{Command: pb.BaseCommand_SEND, Err: pb.ServerError_PersistenceError, Count: 1})
	pid := p.producer("sendfault")
	p.write(sendFrame(pid, 7, msg{payload: "x"}))
	f := p.expect("SEND_ERROR", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_ERROR })
	if f.Cmd.GetSendError().GetError() != pb.ServerError_PersistenceError || f.Cmd.GetSendError().GetSequenceId() != 7 {
		t.Fatalf("send error %v", f.Cmd)
	}
}

func TestDropConnectionsAndRestartBroker(t *testing.T) {
	dir := t.TempDir()
	c := brokertest.Start(t, func(o *broker.Options) { o.Memory = false; o.DataDir = dir; o.Brokers = 2 })
	topic := "persistent://public/default/restart"
	owner := c.OwnerOf(topic)
	url := c.BrokerURLs()[owner]
	p := dial(t, url)
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
	publishN(t, p, topic, 10, nil)
	p.flow(cid, 100)
	for i := 0; i < 4; i++ {
		p.ack(cid, p.receive(cid).id)
	}
	brokertest.Eventually(t, waitFor, "backlog 6", func() bool { return c.Backlog(topic, "s") == 6 })
	if n := len(c.Connections(owner)); n != 1 {
		t.Fatalf("%d connections", n)
	}
	c.DropConnections(owner)
	if !p.closedByBroker() {
		t.Fatal("connection not dropped")
	}
	brokertest.Eventually(t, waitFor, "no live connections", func() bool { return len(c.Connections(owner)) == 0 })

	if err := c.RestartBroker(owner); err != nil {
		t.Fatal(err)
	}
	q := dial(t, url)
	cid = q.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
	q.flow(cid, 100)
	for i := 4; i < 10; i++ {
		if m := q.receive(cid); m.payload != fmt.Sprint(i) {
			t.Fatalf("after restart: %q, want %d", m.payload, i)
		}
	}
	if c.AcceptedConnections(owner) < 2 {
		t.Errorf("accepted %d", c.AcceptedConnections(owner))
	}
}

// The data directory is made, with its parents, when missing (the
// commands rely on it), and what it holds survives a close.
func TestDataSurvivesClose(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	start := func() *broker.Cluster {
		return brokertest.Start(t, func(o *broker.Options) { o.Memory = false; o.DataDir = dir })
	}
	c := start()
	p := dial(t, c.ServiceURL())
	cid := p.subscribe("kept", "s", pb.CommandSubscribe_Shared)
	publishN(t, p, "kept", 5, nil)
	p.flow(cid, 2)
	p.ack(cid, p.receive(cid).id)
	p.receive(cid) // unacked: comes again
	brokertest.Eventually(t, waitFor, "backlog 4", func() bool { return c.Backlog("kept", "s") == 4 })
	p.close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = start()
	if b := c.Backlog("kept", "s"); b != 4 {
		t.Fatalf("backlog after reopening: %d, want 4", b)
	}
	q := dial(t, c.ServiceURL())
	cid = q.subscribe("kept", "s", pb.CommandSubscribe_Shared)
	q.flow(cid, 10)
	for i := 1; i < 5; i++ {
		if m := q.receive(cid); m.payload != fmt.Sprint(i) {
			t.Fatalf("after reopening: %q, want %d", m.payload, i)
		}
	}
}

func TestTopicsOfNamespaceListPartitions(t *testing.T) {
	c := brokertest.Start(t)
	adminDo(t, "PUT", c.AdminURL()+"/admin/v2/persistent/public/default/parted/partitions", "3", 204)
	p := dial(t, c.ServiceURL())
	p.producer("plain")
	rid := p.rid()
	r := p.request(&pb.CommandGetTopicsOfNamespace{RequestId: proto.Uint64(rid), Namespace: proto.String("public/default")}, rid)
	got := strings.Join(r.GetGetTopicsOfNamespaceResponse().GetTopics(), " ")
	want := "persistent://public/default/parted-partition-0 persistent://public/default/parted-partition-1 persistent://public/default/parted-partition-2 persistent://public/default/plain"
	if got != want {
		t.Fatalf("topics %q\nwant   %q", got, want)
	}
	rid = p.rid()
	pm := p.request(&pb.CommandPartitionedTopicMetadata{Topic: proto.String("parted"), RequestId: proto.Uint64(rid)}, rid)
	if n := pm.GetPartitionMetadataResponse().GetPartitions(); n != 3 {
		t.Fatalf("partitions %d", n)
	}
}

func TestAutoCreationOff(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.DisableTopicAutoCreation = true })
	p := dial(t, c.ServiceURL())
	if _, err := p.createProducer("nope", ""); !errors.Is(err, pulsarwire.ErrTopicNotFound) {
		t.Fatalf("producer on a missing topic: %v", err)
	}
	adminDo(t, "PUT", c.AdminURL()+"/admin/v2/persistent/public/default/made", "", 204)
	p.producer("made")
}

func TestProducerNames(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	if _, err := p.createProducer("names", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.createProducer("names", "alice"); !errors.Is(err, pulsarwire.ErrProducerBusy) {
		t.Fatalf("duplicate name: %v, want ProducerBusy", err)
	}
	rid := p.rid()
	p.send(&pb.CommandProducer{Topic: proto.String("names"), ProducerId: proto.Uint64(99), RequestId: proto.Uint64(rid)})
	r := p.response(rid).GetProducerSuccess()
	if r.GetProducerName() == "" || r.SchemaVersion == nil {
		t.Fatalf("generated producer: %v", r)
	}
	if ps := c.Producers("names"); len(ps) != 2 {
		t.Fatalf("producers %v", ps)
	}
}

func TestSchemas(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	rid, pid := p.rid(), p.rid()
	p.send(&pb.CommandProducer{Topic: proto.String("typed"), ProducerId: proto.Uint64(pid), RequestId: proto.Uint64(rid),
		Schema: &pb.Schema{Name: proto.String("typed"), SchemaData: []byte{}, Type: pb.Schema_String.Enum()}})
	ps := p.response(rid).GetProducerSuccess()
	if binary.BigEndian.Uint64(ps.GetSchemaVersion()) != 0 {
		t.Fatalf("schema version %x", ps.GetSchemaVersion())
	}
	rid = p.rid()
	gs := p.request(&pb.CommandGetSchema{RequestId: proto.Uint64(rid), Topic: proto.String("typed")}, rid).GetGetSchemaResponse()
	if gs.GetSchema().GetType() != pb.Schema_String {
		t.Fatalf("get schema: %v", gs)
	}
	rid = p.rid()
	gs = p.request(&pb.CommandGetSchema{RequestId: proto.Uint64(rid), Topic: proto.String("untyped")}, rid).GetGetSchemaResponse()
	if gs.GetErrorCode() != pb.ServerError_TopicNotFound {
		t.Fatalf("schema of a topic without one: %v", gs)
	}
}

func TestIdleConnectionsArePingedAndDeadOnesClosed(t *testing.T) {
	c := brokertest.Start(t, func(o *broker.Options) { o.KeepAlive = 50 * time.Millisecond })
	alive := dial(t, c.ServiceURL())
	dead := dial(t, c.ServiceURL())
	dead.silent.Store(true)
	if !dead.closedByBroker() {
		t.Fatal("a connection that answers no PING stays open")
	}
	brokertest.Eventually(t, waitFor, "three pings answered", func() bool { return alive.pings.Load() >= 3 })
	alive.lookup("still-here")
}
