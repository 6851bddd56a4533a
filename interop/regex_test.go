package interop

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// A pattern subscription reads every matching topic as one stream, and a
// matching topic created after it started joins at the next discovery.
func TestRegexSubscriptionDiscoversNewTopic(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	prefix := brokertest.TopicName(t)
	before, later := prefix+"-before", prefix+"-later"
	unrelated := prefix + "x-unrelated" // same namespace, does not match

	send := func(topic string, i int) {
		p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
		sendPlain(ctx, t, p, 1, i)
		p.Close()
	}
	send(before, 0)

	pattern := regexp.QuoteMeta(prefix) + "-.*"
	cons := subscribe(t, c, pulsar.ConsumerOptions{
		TopicsPattern:               pattern,
		AutoDiscoveryPeriod:         time.Second,
		SubscriptionName:            "regex",
		Type:                        pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	m := receive(ctx, t, cons)
	if string(m.Payload()) != string(payload(0)) || m.Topic() != before {
		t.Fatalf("got %q from %s, want %q from %s", m.Payload(), m.Topic(), payload(0), before)
	}
	cons.Ack(m)

	send(unrelated, 1)
	send(later, 2)
	start := time.Now()
	m = receive(ctx, t, cons)
	if string(m.Payload()) != string(payload(2)) || m.Topic() != later {
		t.Fatalf("got %q from %s, want %q from the new topic %s", m.Payload(), m.Topic(), payload(2), later)
	}
	cons.Ack(m)
	t.Logf("the new topic's message arrived %v after it was published", time.Since(start).Round(time.Millisecond))

	// Both topics stay in the stream.
	send(before, 3)
	send(later, 4)
	seen := map[string]string{}
	for len(seen) < 2 {
		m := receive(ctx, t, cons)
		seen[string(m.Payload())] = m.Topic()
		cons.Ack(m)
	}
	if seen[string(payload(3))] != before || seen[string(payload(4))] != later {
		t.Fatalf("got %v", seen)
	}
	expectNothing(ctx, t, cons, 300*time.Millisecond)
	if !strings.HasPrefix(cons.Subscription(), "regex") {
		t.Fatalf("subscription %q", cons.Subscription())
	}
}
