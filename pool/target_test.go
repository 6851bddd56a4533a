package pool

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// target is the broker a test talks to (brokertest.Target): the embedded
// broker started for the test, or the Apache Pulsar that
// STREAMRUN_PULSAR_URL names.
type target struct {
	*brokertest.Peer
	cluster *broker.Cluster // the embedded broker; nil against Apache Pulsar
}

// newTarget returns the broker for a test that runs against either.
func newTarget(t *testing.T, opts ...func(*broker.Options)) *target {
	t.Helper()
	p := brokertest.Target(t, opts...)
	return &target{Peer: p, cluster: p.Cluster}
}

// embeddedTarget is for tests that need the embedded broker: fault
// injection, several brokers, TLS, tokens. They are skipped against
// Apache Pulsar.
func embeddedTarget(t *testing.T, opts ...func(*broker.Options)) *target {
	t.Helper()
	p := brokertest.Embedded(t, "fault injection, several brokers, TLS or tokens", opts...)
	return &target{Peer: p, cluster: p.Cluster}
}

// brokers sets the embedded broker's number of brokers.
func brokers(n int) func(*broker.Options) { return func(o *broker.Options) { o.Brokers = n } }

// newClient opens a client on tg, closed when the test ends.
func newClient(t *testing.T, tg *target, o Options) *Client {
	t.Helper()
	if o.ServiceURL == "" {
		o.ServiceURL = tg.URL
	}
	c, err := New(brokertest.Context(t, 30*time.Second), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// The client tells which broker it talks to: the version its service URL's
// broker gave at connect, as `streamrun bench` reports it.
func TestServerVersion(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	v, err := c.ServerVersion(brokertest.Context(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := "streamrun"
	if tg.cluster == nil {
		want = "Pulsar"
	}
	if !strings.Contains(v, want) {
		t.Errorf("server version %q, want one naming %s", v, want)
	}
}
