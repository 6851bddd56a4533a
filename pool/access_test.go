package pool

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	"google.golang.org/protobuf/proto"
)

// countRetries counts the client's retries of creating a producer.
func countRetries(n *atomic.Int64) func(RetryEvent) {
	return func(e RetryEvent) {
		if strings.HasPrefix(e.Op, "create producer") || strings.HasPrefix(e.Op, "re-create producer") {
			n.Add(1)
		}
	}
}

// A producer opened with AccessExclusiveWithFencing takes the topic from
// the one that had it: that one's next message fails ProducerFenced, so
// does every later one at once, without the client trying to re-create
// it, until its owner opens it again, which fences the other in turn.
// Both brokers.
func TestFencingProducerFencesTheOneBefore(t *testing.T) {
	tg := newTarget(t)
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	var retries atomic.Int64
	a := newClient(t, tg, Options{OnRetry: countRetries(&retries)})
	b := newClient(t, tg, Options{})
	if _, err := a.OpenProducer(ctx, topic, AccessExclusiveWithFencing); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Publish(ctx, topic, Message{Payload: []byte("a1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenProducer(ctx, topic, AccessExclusiveWithFencing); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("b1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Publish(ctx, topic, Message{Payload: []byte("a2")}); !errors.Is(err, pulsarwire.ErrProducerFenced) {
		t.Fatalf("publishing from the fenced client: %v, want ProducerFenced", err)
	}
	if _, err := a.Publish(ctx, topic, Message{Payload: []byte("a3")}); !errors.Is(err, pulsarwire.ErrProducerFenced) {
		t.Fatalf("publishing again from the fenced client: %v, want ProducerFenced", err)
	}
	if n := retries.Load(); n != 0 {
		t.Errorf("the fenced client retried creating its producer %d times, want none", n)
	}
	// Its owner takes the topic back.
	if _, err := a.OpenProducer(ctx, topic, AccessExclusiveWithFencing); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Publish(ctx, topic, Message{Payload: []byte("a4")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("b2")}); !errors.Is(err, pulsarwire.ErrProducerFenced) {
		t.Fatalf("publishing from the client fenced in turn: %v, want ProducerFenced", err)
	}
	// A Shared producer is refused beside the exclusive one.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// (Retried until the context ends: the last error names it.)
	if _, err := newClient(t, tg, Options{}).Publish(short, topic, Message{Payload: []byte("s")}); err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("a Shared producer beside the exclusive one: %v, want ProducerBusy", err)
	}
}

// An exclusive producer names the topic epoch it was given when it
// reconnects: when another exclusive producer held the topic while it
// was away, even one gone again, it is fenced instead of writing on.
// Both brokers.
func TestExclusiveProducerReconnectNamesItsEpoch(t *testing.T) {
	tg := newTarget(t)
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	px := newProxies(t)
	a := newClient(t, tg, Options{Dial: px.Dial, Producer: ProducerOptions{AccessMode: AccessExclusive}})
	if _, err := a.Publish(ctx, topic, Message{Payload: []byte("a1")}); err != nil {
		t.Fatal(err)
	}
	// Its connection drops and stays away while another takes the topic
	// and leaves it.
	px.Freeze()
	px.Cut()
	b, err := New(ctx, Options{ServiceURL: tg.URL})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 20*time.Second, "the other exclusive producer", func() bool {
		_, err := b.OpenProducer(ctx, topic, AccessExclusive)
		return err == nil // refused while the broker still holds a's
	})
	if _, err := b.Publish(ctx, topic, Message{Payload: []byte("b1")}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	px.Thaw()
	if _, err := a.Publish(ctx, topic, Message{Payload: []byte("a2")}); !errors.Is(err, pulsarwire.ErrProducerFenced) ||
		!strings.Contains(err.Error(), "Topic epoch has already moved") {
		t.Fatalf("publishing after the reconnect: %v, want ProducerFenced for a moved epoch", err)
	}
}

// A producer that reconnects while the broker still holds a producer
// under its name (its previous connection, not yet seen gone) is refused
// as if another held the topic, under its own name: that is retried
// until the broker lets the old one go, not taken for a fence. Here a
// raw connection stands for the old one: same name, same epoch. Both
// brokers.
func TestExclusiveProducerOutwaitsItsOwnOldRegistration(t *testing.T) {
	tg := newTarget(t)
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	var retries atomic.Int64
	a := newClient(t, tg, Options{OnRetry: countRetries(&retries)})
	p, err := a.OpenProducer(ctx, topic, AccessExclusiveWithFencing)
	if err != nil {
		t.Fatal(err)
	}
	pp := p.partList()[0]
	pp.mu.Lock()
	name, epoch := pp.name, *pp.topicEpoch
	pp.mu.Unlock()

	nc, err := net.DialTimeout("tcp", strings.TrimPrefix(tg.URL, "pulsar://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := pulsarwire.NewReader(bufio.NewReader(nc), pulsarwire.MaxFrameSize(pulsarwire.DefaultMaxMessageSize))
	ask := func(m proto.Message, want pb.BaseCommand_Type) {
		t.Helper()
		b, err := pulsarwire.AppendCommand(nil, pulsarwire.Wrap(m))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(b); err != nil {
			t.Fatal(err)
		}
		for {
			f, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if f.Cmd.GetType() == want {
				return
			}
			if f.Cmd.GetType() == pb.BaseCommand_ERROR {
				t.Fatalf("raw connection: %v", f.Cmd)
			}
		}
	}
	ask(&pb.CommandConnect{ClientVersion: proto.String("test"), ProtocolVersion: proto.Int32(20)}, pb.BaseCommand_CONNECTED)
	ask(&pb.CommandProducer{Topic: proto.String(pp.topic), ProducerId: proto.Uint64(1), RequestId: proto.Uint64(1),
		ProducerName: proto.String(name), TopicEpoch: proto.Uint64(epoch),
		ProducerAccessMode: pb.ProducerAccessMode_ExclusiveWithFencing.Enum()}, pb.BaseCommand_PRODUCER_SUCCESS)

	done := make(chan error, 1)
	go func() {
		// Its SEND closes the connection (the broker forgot the producer);
		// the reconnect meets the raw one.
		_, err := a.Publish(ctx, topic, Message{Payload: []byte("a2")})
		done <- err
	}()
	brokertest.Eventually(t, 30*time.Second, "a refused re-creation", func() bool { return retries.Load() > 0 })
	ask(&pb.CommandCloseProducer{ProducerId: proto.Uint64(1), RequestId: proto.Uint64(2)}, pb.BaseCommand_SUCCESS)
	if err := <-done; err != nil {
		t.Fatalf("publishing once the old registration went: %v", err)
	}
}
