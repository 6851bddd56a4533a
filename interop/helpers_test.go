package interop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// testTimeout bounds each test's waits; a broker that stops answering
// fails the test instead of hanging the run.
const testTimeout = 90 * time.Second

// testContext is cancelled when the test ends or testTimeout passes.
func testContext(t *testing.T) context.Context { return brokertest.Context(t, testTimeout) }

// testLog returns a writer whose contents are printed with the test's
// output only if the test fails (brokertest.LogWriter), or stderr at
// once with STREAMRUN_INTEROP_LOG=1, as for the broker's log.
func testLog(t *testing.T, name string) io.Writer {
	if os.Getenv("STREAMRUN_INTEROP_LOG") == "1" {
		return os.Stderr
	}
	return brokertest.LogWriter(t, name)
}

// clientOption changes the options of a client newClient makes.
type clientOption func(*pulsar.ClientOptions)

// newClient connects an official Go client to the target. Its log is kept
// quiet unless the test fails; it is closed when the test ends.
func newClient(t *testing.T, opts ...clientOption) pulsar.Client {
	t.Helper()
	return newClientURL(t, tgt.serviceURL, opts...)
}

func newClientURL(t *testing.T, url string, opts ...clientOption) pulsar.Client {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(testLog(t, "pulsar-client-go"), &slog.HandlerOptions{Level: slog.LevelInfo}))
	o := pulsar.ClientOptions{
		URL:               url,
		ConnectionTimeout: 10 * time.Second,
		OperationTimeout:  30 * time.Second,
		Logger:            pulsarlog.NewLoggerWithSlog(logger),
		// A registry of its own, so clients never share counters.
		MetricsRegisterer: prometheus.NewRegistry(),
	}
	for _, opt := range opts {
		opt(&o)
	}
	c, err := pulsar.NewClient(o)
	if err != nil {
		t.Fatalf("new client for %s: %v", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

func newProducer(t *testing.T, c pulsar.Client, o pulsar.ProducerOptions) pulsar.Producer {
	t.Helper()
	p, err := c.CreateProducer(o)
	if err != nil {
		t.Fatalf("create producer on %s: %v", o.Topic, err)
	}
	t.Cleanup(p.Close)
	return p
}

func subscribe(t *testing.T, c pulsar.Client, o pulsar.ConsumerOptions) pulsar.Consumer {
	t.Helper()
	cons, err := c.Subscribe(o)
	if err != nil {
		t.Fatalf("subscribe %s to %s%s: %v", o.SubscriptionName, o.Topic, o.TopicsPattern, err)
	}
	t.Cleanup(cons.Close)
	return cons
}

// payload is message i's body.
func payload(i int) []byte { return []byte(fmt.Sprintf("message-%06d", i)) }

// sendAll publishes n messages with SendAsync, then flushes and waits for
// every receipt. msg builds message i. It returns the ids in order.
func sendAll(ctx context.Context, t *testing.T, p pulsar.Producer, n int, msg func(i int) *pulsar.ProducerMessage) []pulsar.MessageID {
	t.Helper()
	ids := make([]pulsar.MessageID, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		i := i
		p.SendAsync(ctx, msg(i), func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			defer wg.Done()
			if err != nil {
				errs <- fmt.Errorf("send %d: %w", i, err)
				return
			}
			ids[i] = id
		})
	}
	if err := p.FlushWithCtx(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	waitGroup(ctx, t, &wg, "send receipts")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// sendPlain publishes n messages carrying payload(i) and waits for them.
func sendPlain(ctx context.Context, t *testing.T, p pulsar.Producer, n, from int) []pulsar.MessageID {
	t.Helper()
	return sendAll(ctx, t, p, n, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Payload: payload(from + i)}
	})
}

func waitGroup(ctx context.Context, t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}

// receive takes one message, failing the test if none comes before ctx ends.
func receive(ctx context.Context, t *testing.T, c pulsar.Consumer) pulsar.Message {
	t.Helper()
	m, err := c.Receive(ctx)
	if err != nil {
		t.Fatalf("receive on %s: %v", c.Subscription(), err)
	}
	return m
}

// receiveN takes n messages, acking each when ack is set.
func receiveN(ctx context.Context, t *testing.T, c pulsar.Consumer, n int, ack bool) []pulsar.Message {
	t.Helper()
	out := make([]pulsar.Message, 0, n)
	for len(out) < n {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("receive on %s after %d of %d messages: %v", c.Subscription(), len(out), n, err)
		}
		if ack {
			if err := c.Ack(m); err != nil {
				t.Fatalf("ack %v: %v", m.ID(), err)
			}
		}
		out = append(out, m)
	}
	return out
}

// expectNothing asserts that no message arrives within d. It is the one
// place the suite waits for an absence, and d is short.
func expectNothing(ctx context.Context, t *testing.T, c pulsar.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("%s: unexpected message %q (id %v, redelivery %d)", c.Subscription(), m.Payload(), m.ID(), m.RedeliveryCount())
	}
}

// payloads lists the bodies of ms as strings.
func payloads(ms []pulsar.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload())
	}
	return out
}

// checkSequence asserts that ms carry payload(from) ... payload(from+len-1) in order.
func checkSequence(t *testing.T, ms []pulsar.Message, from int) {
	t.Helper()
	for i, m := range ms {
		if want := string(payload(from + i)); string(m.Payload()) != want {
			t.Fatalf("message %d: got %q, want %q (all: %v)", i, m.Payload(), want, abbreviate(payloads(ms)))
		}
	}
}

func abbreviate(s []string) []string {
	if len(s) <= 20 {
		return s
	}
	out := append([]string{}, s[:10]...)
	out = append(out, fmt.Sprintf("... %d more ...", len(s)-20))
	return append(out, s[len(s)-10:]...)
}

// eventually polls cond every 50 ms until it holds or ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// adminDo sends one request to the target's admin REST API and returns the
// response body, failing the test on a transport error or a status >= 300.
func adminDo(t *testing.T, method, path, body string) []byte {
	t.Helper()
	return (&brokertest.Peer{Admin: tgt.adminURL}).AdminDo(t, method, path, body)
}
