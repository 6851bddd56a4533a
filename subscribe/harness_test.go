package subscribe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The admin API's keep-alive connections are the test's, not leaks.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testTimeout bounds every wait of a test.
const testTimeout = 60 * time.Second

// target is the broker a test runs against (brokertest.Target): the
// embedded broker, or Apache Pulsar when STREAMRUN_PULSAR_URL is set, as
// in CI.
type target struct{ *brokertest.Peer }

func newTarget(t *testing.T, opts ...func(*broker.Options)) *target {
	t.Helper()
	return &target{brokertest.Target(t, opts...)}
}

func (tg *target) pulsar() bool { return tg.Pulsar() }

// embedded returns the embedded cluster, skipping the test on Apache
// Pulsar: what it checks needs the embedded broker's introspection.
func (tg *target) embedded(t *testing.T, why string) *broker.Cluster {
	t.Helper()
	if tg.Cluster == nil {
		t.Skipf("on Apache Pulsar: %s needs the embedded broker's introspection", why)
	}
	return tg.Cluster
}

func testContext(t *testing.T) context.Context { return brokertest.Context(t, testTimeout) }

type clientConfig struct {
	noBatching bool
	retryDelay time.Duration
	rec        *testkit.Records // keeps the client's log records when set
	opts       func(*pool.Options)
}

// newClient connects a pool client to the target, closed when the test
// ends. Retries are 200 ms apart (the default 5 s only slows tests).
func (tg *target) newClient(t *testing.T, cfg clientConfig) *pool.Client {
	t.Helper()
	h := slog.NewTextHandler(brokertest.LogWriter(t, "client"), &slog.HandlerOptions{Level: slog.LevelDebug})
	var handler slog.Handler = h
	if cfg.rec != nil {
		handler = cfg.rec.Handler(h)
	}
	delay := cfg.retryDelay
	if delay == 0 {
		delay = 200 * time.Millisecond
	}
	opts := pool.Options{
		ServiceURL:       tg.URL,
		Logger:           slog.New(handler),
		OperationRetries: pool.OperationRetries{Delay: delay, Timeout: 10 * time.Second},
	}
	opts.Producer.Batching.Disabled = cfg.noBatching
	if cfg.opts != nil {
		cfg.opts(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := pool.New(ctx, opts)
	if err != nil {
		t.Fatalf("connect to %s: %v", tg.URL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

func payload(i int) []byte { return []byte(fmt.Sprintf("message-%06d", i)) }

// publish sends n messages payload(from)..payload(from+n-1) to topic and
// waits for every receipt. msg may set key and properties.
func publish(ctx context.Context, t *testing.T, c *pool.Client, topic string, from, n int, msg func(i int, m *pool.Message)) []pulsarwire.MessageID {
	t.Helper()
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatalf("producer for %s: %v", topic, err)
	}
	ids := make([]pulsarwire.MessageID, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		m := pool.Message{Payload: payload(from + i)}
		if msg != nil {
			msg(from+i, &m)
		}
		p.SendAsync(ctx, m, func(id pulsarwire.MessageID, err error) {
			ids[i], errs[i] = id, err
			wg.Done()
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush %s: %v", topic, err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publish %d to %s: %v", from+i, topic, err)
		}
	}
	return ids
}

// newConsumer subscribes, failing the test on error; closed at the end.
func newConsumer(ctx context.Context, t *testing.T, c *pool.Client, o subscribe.Options) *subscribe.Consumer {
	t.Helper()
	cons, err := subscribe.New(ctx, c, o)
	if err != nil {
		t.Fatalf("subscribe %s: %v", o.Subscription, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cons.Close(ctx)
	})
	return cons
}

// receiveN receives n messages, acking each when ack is set.
func receiveN(ctx context.Context, t *testing.T, c *subscribe.Consumer, n int, ack bool) []*subscribe.Message {
	t.Helper()
	out := make([]*subscribe.Message, 0, n)
	for len(out) < n {
		m, err := c.Receive(ctx)
		if err != nil {
			t.Fatalf("receive %d of %d: %v", len(out)+1, n, err)
		}
		if ack {
			if err := c.Ack(ctx, m); err != nil {
				t.Fatalf("ack %s: %v", m.ID, err)
			}
		}
		out = append(out, m)
	}
	return out
}

// expectNothing checks that nothing arrives for d.
func expectNothing(ctx context.Context, t *testing.T, c *subscribe.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if m, err := c.Receive(ctx); err == nil {
		t.Fatalf("unexpected message %s %q", m.ID, m.Payload)
	}
}

// checkSequence checks that msgs carry payload(from), payload(from+1), ...
func checkSequence(t *testing.T, msgs []*subscribe.Message, from int) {
	t.Helper()
	for i, m := range msgs {
		if want := payload(from + i); !bytes.Equal(m.Payload, want) {
			t.Fatalf("message %d: got %q (id %s), want %q", i, m.Payload, m.ID, want)
		}
	}
}

func (tg *target) deleteTopic(t *testing.T, topic string) {
	tg.AdminDo(t, http.MethodDelete, brokertest.AdminPath(topic)+"?force=true", "")
}

// consumerState is what the broker says about the one consumer of a
// subscription: permits left and messages dispatched in all.
type consumerState struct {
	found      bool
	permits    int64
	dispatched int64
}

// consumerState asks the broker: the embedded one directly, Apache Pulsar
// through its topic stats.
func (tg *target) consumerState(t *testing.T, topic, sub string) consumerState {
	t.Helper()
	if tg.Cluster != nil {
		cs := tg.Cluster.Consumers(topic, sub)
		if len(cs) != 1 {
			return consumerState{}
		}
		return consumerState{found: true, permits: cs[0].Permits, dispatched: cs[0].Dispatched}
	}
	var st struct {
		Subscriptions map[string]struct {
			Consumers []struct {
				AvailablePermits int64 `json:"availablePermits"`
				MsgOutCounter    int64 `json:"msgOutCounter"`
			} `json:"consumers"`
		} `json:"subscriptions"`
	}
	tg.adminGet(t, brokertest.AdminPath(topic)+"/stats", &st)
	cs := st.Subscriptions[sub].Consumers
	if len(cs) != 1 {
		return consumerState{}
	}
	return consumerState{found: true, permits: cs[0].AvailablePermits, dispatched: cs[0].MsgOutCounter}
}

// backlog is how many messages (entries, on the embedded broker) of
// topic the subscription has not acknowledged.
func (tg *target) backlog(t *testing.T, topic, sub string) int64 {
	t.Helper()
	if tg.Cluster != nil {
		return tg.Cluster.Backlog(topic, sub)
	}
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	tg.adminGet(t, brokertest.AdminPath(topic)+"/stats", &st)
	s, ok := st.Subscriptions[sub]
	if !ok {
		return -1
	}
	return s.MsgBacklog
}

func (tg *target) adminGet(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal(tg.AdminDo(t, http.MethodGet, path, ""), v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// disconnect unloads the topic: the broker (Apache Pulsar or the embedded
// one) closes its consumers with CLOSE_CONSUMER and they subscribe again.
func (tg *target) disconnect(t *testing.T, topic string) {
	t.Helper()
	tg.AdminDo(t, http.MethodPut, brokertest.AdminPath(topic)+"/unload", "")
}
