package pool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// target is the broker a test talks to: the embedded broker started for
// the test, or the Apache Pulsar that STREAMRUN_PULSAR_URL names (admin
// API at STREAMRUN_PULSAR_HTTP, default http://127.0.0.1:8080).
type target struct {
	URL   string // service URL
	TLS   string // pulsar+ssl:// service URL, "" without TLS
	Admin string // http:// admin API

	// The embedded broker; nil against Apache Pulsar.
	cluster *broker.Cluster
}

func pulsarURL() string { return os.Getenv("STREAMRUN_PULSAR_URL") }

// newTarget returns the broker for a test that runs against either: the
// embedded one (started with opts) unless STREAMRUN_PULSAR_URL is set.
func newTarget(t *testing.T, opts ...func(*broker.Options)) *target {
	t.Helper()
	if u := pulsarURL(); u != "" {
		admin := os.Getenv("STREAMRUN_PULSAR_HTTP")
		if admin == "" {
			admin = "http://127.0.0.1:8080"
		}
		return &target{URL: u, Admin: admin}
	}
	return startEmbedded(t, opts...)
}

// embeddedTarget is for tests that need the embedded broker: fault
// injection, several brokers, TLS, tokens. They are skipped against
// Apache Pulsar.
func embeddedTarget(t *testing.T, opts ...func(*broker.Options)) *target {
	t.Helper()
	if pulsarURL() != "" {
		t.Skip("needs the embedded broker (fault injection, several brokers, TLS or tokens); skipped with STREAMRUN_PULSAR_URL set")
	}
	return startEmbedded(t, opts...)
}

func startEmbedded(t *testing.T, opts ...func(*broker.Options)) *target {
	t.Helper()
	quiet := func(o *broker.Options) {
		o.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c := brokertest.Start(t, append([]func(*broker.Options){quiet}, opts...)...)
	return &target{URL: c.ServiceURL(), TLS: c.ServiceURLTLS(), Admin: c.AdminURL(), cluster: c}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// brokers sets the embedded broker's number of brokers.
func brokers(n int) func(*broker.Options) { return func(o *broker.Options) { o.Brokers = n } }

var topicSeq atomic.Int64

// topicName is a topic of its own for the test.
func topicName(t *testing.T) string {
	name := regexp.MustCompile(`[^a-zA-Z0-9-]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("persistent://public/default/%s-%d-%d", strings.ToLower(name), time.Now().UnixNano(), topicSeq.Add(1))
}

// createPartitioned creates topic with n partitions through the admin API.
func (tg *target) createPartitioned(t *testing.T, topic string, n int) {
	t.Helper()
	tg.admin(t, http.MethodPut, topic, n)
}

// updatePartitions raises topic's partition count to n.
func (tg *target) updatePartitions(t *testing.T, topic string, n int) {
	t.Helper()
	tg.admin(t, http.MethodPost, topic, n)
}

func (tg *target) admin(t *testing.T, method, topic string, n int) {
	t.Helper()
	path := strings.Replace(topic, "://", "/", 1)
	req, _ := http.NewRequest(method, tg.Admin+"/admin/v2/"+path+"/partitions", strings.NewReader(fmt.Sprint(n)))
	req.Header.Set("Content-Type", "application/json")
	req.Close = true // no idle connection left for goleak
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s partitions of %s to %d: %s: %s", method, topic, n, resp.Status, body)
	}
}

// testCtx is a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newClient opens a client on tg, closed when the test ends.
func newClient(t *testing.T, tg *target, o Options) *Client {
	t.Helper()
	if o.ServiceURL == "" {
		o.ServiceURL = tg.URL
	}
	c, err := New(testCtx(t, 30*time.Second), o)
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

// eventually waits for cond, checking every few milliseconds, failing the
// test after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newTargetB is newTarget for benchmarks: the service URL of Apache
// Pulsar or of an embedded broker.
func newTargetB(b *testing.B) string {
	if u := pulsarURL(); u != "" {
		return u
	}
	return brokertest.Start(b, func(o *broker.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}).ServiceURL()
}
