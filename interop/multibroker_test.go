package interop

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// counterValue reads a counter the Go client registered in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
		}
	}
	return sum
}

// `streamrun broker --brokers 3`: topics are spread over three brokers, the
// client's lookups through broker 0 are redirected to each topic's owner,
// and messages flow on every topic, non-partitioned and partitioned. The
// process exits 0 on SIGTERM.
func TestThreeBrokerProcess(t *testing.T) {
	embeddedOnly(t, "starts `streamrun broker --brokers 3`")
	const topics, perTopic, partitions = 24, 50, 6
	listen, http, err := freeBrokerAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, brokerArgs{listen: listen, http: http, data: t.TempDir(), brokers: 3})
	if want := "pulsar://" + listen; b.serviceURL != want {
		t.Logf("ready line names %s (listen %s)", b.serviceURL, want)
	}
	ctx := testContext(t)
	reg := prometheus.NewRegistry()
	c := newClientURL(t, b.serviceURL, func(o *pulsar.ClientOptions) { o.MetricsRegisterer = reg })

	prefix := "persistent://public/default/" + brokertest.Name(t)
	var wg sync.WaitGroup
	errs := make(chan error, topics)
	for i := 0; i < topics; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := roundTrip(ctx, c, fmt.Sprintf("%s-%d", prefix, i), perTopic); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// A partitioned topic made through broker 0's admin API has its
	// partitions owned all over; one consumer reads them all.
	ptopic := prefix + "-partitioned"
	(&brokertest.Peer{Admin: b.adminURL}).AdminDo(t, "PUT", topicPath(ptopic)+"/partitions", strconv.Itoa(partitions))
	if err := roundTrip(ctx, c, ptopic, 300); err != nil {
		t.Fatal(err)
	}

	if n := counterValue(t, reg, "pulsar_client_connections_opened"); n < 3 {
		t.Fatalf("the client opened %v connections for topics spread over 3 brokers; want at least 3 (were lookups redirected?)", n)
	} else {
		t.Logf("the client opened %v connections", n)
	}
	c.Close()
	if err := b.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

// roundTrip subscribes to topic, publishes n keyed messages and checks
// that all n come back, each key in order.
func roundTrip(ctx context.Context, c pulsar.Client, topic string, n int) error {
	cons, err := c.Subscribe(pulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "rt",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", topic, err)
	}
	defer cons.Close()
	p, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, BatcherBuilderType: pulsar.KeyBasedBatchBuilder})
	if err != nil {
		return fmt.Errorf("producer %s: %w", topic, err)
	}
	defer p.Close()
	var sendErr error
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		p.SendAsync(ctx, keyedMessage(i%7, i/7), func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			if err != nil {
				mu.Lock()
				sendErr = err
				mu.Unlock()
			}
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		return fmt.Errorf("flush %s: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sendErr != nil {
		return fmt.Errorf("send to %s: %w", topic, sendErr)
	}
	next := map[string]int{}
	for i := 0; i < n; i++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			return fmt.Errorf("%s: receive after %d of %d: %w", topic, i, n, err)
		}
		seq, _ := strconv.Atoi(string(m.Payload()))
		if seq != next[m.Key()] {
			return fmt.Errorf("%s: key %s got seq %d, want %d", topic, m.Key(), seq, next[m.Key()])
		}
		next[m.Key()]++
		cons.Ack(m)
	}
	return nil
}
