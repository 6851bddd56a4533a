package interop

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// inProcessOnly skips a test that needs the in-process embedded broker's
// fault injection.
func inProcessOnly(t *testing.T) *broker.Cluster {
	t.Helper()
	if cluster == nil {
		t.Skipf("needs the in-process embedded broker's fault injection; target is %s", tgt.name)
	}
	return cluster
}

// streamer publishes 0, 1, 2, ... with SendAsync, at most 200 awaiting
// receipts, until stopped, and remembers which ones got a receipt.
type streamer struct {
	mu        sync.Mutex
	receipted map[int]bool
	failed    int
	published int
	pending   sync.WaitGroup
	stop      chan struct{}
	done      chan struct{}
}

func startStreamer(ctx context.Context, p pulsar.Producer, limit int) *streamer {
	s := &streamer{receipted: map[int]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	inflight := make(chan struct{}, 200)
	go func() {
		defer close(s.done)
		for i := 0; i < limit; i++ {
			select {
			case inflight <- struct{}{}:
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
			s.pending.Add(1)
			s.mu.Lock()
			s.published++
			s.mu.Unlock()
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(i))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				s.mu.Lock()
				if err == nil {
					s.receipted[i] = true
				} else {
					s.failed++
				}
				s.mu.Unlock()
				<-inflight
				s.pending.Done()
			})
		}
	}()
	return s
}

// finish waits until the streamer has published everything and every send
// is answered, and returns the receipted sequence numbers.
func (s *streamer) finish(ctx context.Context, t *testing.T) map[int]bool {
	t.Helper()
	select {
	case <-s.done:
	case <-ctx.Done():
		t.Fatalf("publishing did not finish: %v", ctx.Err())
	}
	waitGroup(ctx, t, &s.pending, "every send to be answered")
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.receipted
}

// Connections dropped under a producer and a consumer in mid-stream, and
// the owning broker restarted: the official client reconnects both, the
// producer's pending messages are resent, and the consumer reads every
// receipted message, in publish order (repeats after a reconnect are
// allowed, as Apache Pulsar's at-least-once).
func TestReconnectAfterDroppedConnectionsAndRestart(t *testing.T) {
	c := inProcessOnly(t)
	const n = 6000
	ctx := testContext(t)
	topic := brokertest.TopicName(t)
	owner := c.OwnerOf(topic)
	accepted := c.AcceptedConnections(owner)
	cl := newClient(t)
	cons := subscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "reconnect", Type: pulsar.Exclusive})
	p := newProducer(t, cl, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 50, BatchingMaxPublishDelay: time.Millisecond})
	s := startStreamer(ctx, p, n)

	seen := map[int]bool{}
	last, repeats := -1, 0
	take := func() {
		m := receive(ctx, t, cons)
		seq, err := strconv.Atoi(string(m.Payload()))
		if err != nil {
			t.Fatalf("bad payload %q", m.Payload())
		}
		if seen[seq] {
			repeats++
		} else {
			if seq < last {
				t.Fatalf("got %d for the first time after %d: publish order broken", seq, last)
			}
			seen[seq], last = true, seq
		}
		cons.Ack(m)
	}
	for len(seen) < 1000 {
		take()
	}
	c.DropConnections(owner)
	for len(seen) < 3000 {
		take()
	}
	if err := c.RestartBroker(owner); err != nil {
		t.Fatalf("restart broker %d: %v", owner, err)
	}
	receipted := s.finish(ctx, t)
	missing := func() int {
		k := 0
		for seq := range receipted {
			if !seen[seq] {
				k++
			}
		}
		return k
	}
	for missing() > 0 {
		take()
	}
	if got := c.AcceptedConnections(owner) - accepted; got < 3 {
		t.Fatalf("broker %d accepted %d connections; the client should have reconnected twice", owner, got)
	}
	t.Logf("%d receipted of %d published (%d failed), all read back; %d repeats", len(receipted), s.published, s.failed, repeats)
}

// A consumer whose connection drops and whose re-subscribe the broker
// refuses twice with ServiceNotReady retries until it is back, and then
// gets what was published meanwhile.
func TestResubscribeRetriesServiceNotReady(t *testing.T) {
	c := inProcessOnly(t)
	ctx := testContext(t)
	topic := brokertest.TopicName(t)
	owner := c.OwnerOf(topic)
	cl := newClient(t)
	cons := subscribe(t, cl, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "retry", Type: pulsar.Exclusive})
	p := newProducer(t, cl, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 5, 0)
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 0)
	// The client groups acks for up to 100 ms; let them land first, so
	// the drop below cannot bring 0..4 back.
	eventually(ctx, t, "the acks to reach the broker", func() bool { return c.Backlog(topic, "retry") == 0 })

	fault := brokertest.Faults(t, c).Add(faults.Fault{
		Broker:  owner,
		Command: pb.BaseCommand_SUBSCRIBE,
		Topic:   topic,
		Err:     pb.ServerError_ServiceNotReady,
		Message: "not now (injected)",
		Count:   2,
	})
	defer fault.Remove()
	c.DropConnections(owner)
	sendPlain(ctx, t, p, 5, 5)
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 5)
	if fault.Fired() != 2 {
		t.Fatalf("the refusal fired %d times, want 2", fault.Fired())
	}
}

// A SEND the broker fails with a transient error (PersistenceError) makes
// the official Go client drop the connection, reconnect and resend: the
// message arrives exactly once, in order, and the caller sees success.
func TestSendErrorIsRetriedOverANewConnection(t *testing.T) {
	c := inProcessOnly(t)
	ctx := testContext(t)
	topic := brokertest.TopicName(t)
	owner := c.OwnerOf(topic)
	// The consumer has a client (so a connection) of its own: only the
	// producer's connection is dropped.
	cons := subscribe(t, newClient(t), pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s", Type: pulsar.Exclusive})
	p := newProducer(t, newClient(t), pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 1, 0)

	accepted := c.AcceptedConnections(owner)
	fault := brokertest.Faults(t, c).Add(faults.Fault{Broker: owner, Command: pb.BaseCommand_SEND, Topic: topic, Err: pb.ServerError_PersistenceError, Count: 1})
	defer fault.Remove()
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: payload(1)}); err != nil {
		t.Fatalf("send under one injected PersistenceError: %v", err)
	}
	if fault.Fired() != 1 {
		t.Fatalf("fault fired %d times, want 1", fault.Fired())
	}
	if c.AcceptedConnections(owner) == accepted {
		t.Fatalf("the client did not reconnect after the send error")
	}
	sendPlain(ctx, t, p, 1, 2)
	checkSequence(t, receiveN(ctx, t, cons, 3, true), 0)
	expectNothing(ctx, t, cons, 300*time.Millisecond)
}
