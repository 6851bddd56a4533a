package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if build.path != "" {
			os.RemoveAll(filepath.Dir(build.path))
		}
	}))
}

func TestConnectAnswersLowerProtocolVersion(t *testing.T) {
	c := brokertest.Start(t)
	p := dialRaw(t, c.ServiceURL())
	p.send(&pb.CommandConnect{ClientVersion: proto.String("old"), ProtocolVersion: proto.Int32(13)})
	f := p.expect("CONNECTED", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_CONNECTED })
	if v := f.Cmd.GetConnected().GetProtocolVersion(); v != 13 {
		t.Errorf("protocol version %d, want 13", v)
	}
	if n := f.Cmd.GetConnected().GetMaxMessageSize(); n != 5<<20 {
		t.Errorf("max message size %d, want 5 MiB", n)
	}
}

func TestReceiptsComeInOrder(t *testing.T) {
	c := brokertest.Start(t)
	p := dial(t, c.ServiceURL())
	pid := p.producer("orders")
	const n = 200
	for i := uint64(0); i < n; i++ {
		p.write(sendFrame(pid, i, msg{payload: fmt.Sprint(i)}))
	}
	var lastEntry uint64
	for i := uint64(0); i < n; i++ {
		f := p.expect("receipt", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
		r := f.Cmd.GetSendReceipt()
		if r.GetSequenceId() != i {
			t.Fatalf("receipt %d has sequence %d", i, r.GetSequenceId())
		}
		if i > 0 && r.GetMessageId().GetEntryId() != lastEntry+1 {
			t.Fatalf("receipt %d: entry %d after %d", i, r.GetMessageId().GetEntryId(), lastEntry)
		}
		lastEntry = r.GetMessageId().GetEntryId()
	}
}

func TestDurableSubscriptionKeepsWhatWasPublishedWhileAway(t *testing.T) {
	c := brokertest.Start(t)
	topic := "persistent://public/default/durable"
	cons := dial(t, c.ServiceURL())
	cid := cons.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
	cons.closeConsumer(cid)

	prod := dial(t, c.ServiceURL())
	pid := prod.producer(topic)
	for i := uint64(0); i < 5; i++ {
		prod.publish(pid, i, msg{payload: fmt.Sprint("m", i)})
	}
	if b := c.Backlog(topic, "s"); b != 5 {
		t.Errorf("backlog %d, want 5", b)
	}
	cid = cons.subscribe(topic, "s", pb.CommandSubscribe_Exclusive)
	cons.flow(cid, 100)
	for i := 0; i < 5; i++ {
		m := cons.receive(cid)
		if want := fmt.Sprint("m", i); m.payload != want {
			t.Fatalf("message %d: %q, want %q", i, m.payload, want)
		}
		cons.ack(cid, m.id)
	}
	brokertest.Eventually(t, waitFor, "backlog 0", func() bool { return c.Backlog(topic, "s") == 0 })
}

func TestBrokerNeverExceedsPermits(t *testing.T) {
	c := brokertest.Start(t)
	topic := "permits"
	p := dial(t, c.ServiceURL())
	cid := p.subscribe(topic, "s", pb.CommandSubscribe_Shared, earliest)
	pid := p.producer(topic)
	for i := uint64(0); i < 50; i++ {
		p.publish(pid, i, msg{payload: fmt.Sprint(i)})
	}
	p.noMessage(cid, 50e6) // no permits yet: nothing comes
	p.flow(cid, 7)
	for i := 0; i < 7; i++ {
		p.receive(cid)
	}
	p.noMessage(cid, 100e6)
	ci := c.Consumers(topic, "s")
	if len(ci) != 1 || ci[0].Permits != 0 || ci[0].Dispatched != 7 || ci[0].Unacked != 7 {
		t.Fatalf("consumer as the broker sees it: %+v", ci)
	}
	p.flow(cid, 43)
	for i := 0; i < 43; i++ {
		p.receive(cid)
	}
}
