package pool

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
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

	// Set for the embedded broker only.
	embedded embeddedCluster
}

// embeddedCluster is what the tests use of the embedded broker.
type embeddedCluster interface {
	BrokerURLs() []string
	OwnerOf(topic string) int
	AddFault(f fault) (fired func() int, remove func())
	DropConnections(i int)
	// ClientConns is how many client connections broker i has open.
	ClientConns(i int) int
}

// fault mirrors broker.Fault, so this file builds without the broker.
type fault struct {
	Broker  int
	Command int32
	Topic   string
	Err     int32
	Drop    bool
	Delay   time.Duration
	Count   int
}

// embeddedOptions are what a test asks of the embedded broker.
type embeddedOptions struct {
	Brokers int
	TLS     *tls.Config // serve pulsar+ssl:// with it
	Tokens  []string    // turn token authentication on
}

// startEmbedded starts the embedded broker; set by target_embedded_test.go
// once the broker package builds.
var startEmbedded func(t *testing.T, o embeddedOptions) *target

func pulsarURL() string { return os.Getenv("STREAMRUN_PULSAR_URL") }

// newTarget returns the broker for a test that runs against either.
func newTarget(t *testing.T, o embeddedOptions) *target {
	t.Helper()
	if u := pulsarURL(); u != "" {
		admin := os.Getenv("STREAMRUN_PULSAR_HTTP")
		if admin == "" {
			admin = "http://127.0.0.1:8080"
		}
		return &target{URL: u, Admin: admin}
	}
	if startEmbedded == nil {
		t.Skip("the embedded broker does not build yet; set STREAMRUN_PULSAR_URL to run against Apache Pulsar")
	}
	return startEmbedded(t, o)
}

// embeddedTarget is for tests that need the embedded broker's fault
// injection, several brokers, TLS or tokens; they are skipped against
// Apache Pulsar.
func embeddedTarget(t *testing.T, o embeddedOptions) *target {
	t.Helper()
	if pulsarURL() != "" {
		t.Skip("needs the embedded broker (fault injection, several brokers, TLS or tokens); STREAMRUN_PULSAR_URL is set")
	}
	if startEmbedded == nil {
		t.Skip("the embedded broker does not build yet")
	}
	return startEmbedded(t, o)
}

var topicSeq atomic.Int64

// topicName is a topic of its own for the test.
func topicName(t *testing.T) string {
	name := regexp.MustCompile(`[^a-zA-Z0-9-]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("persistent://public/default/%s-%d-%d", strings.ToLower(name), time.Now().UnixNano(), topicSeq.Add(1))
}

// createPartitioned creates topic with n partitions through the admin API.
func (tg *target) createPartitioned(t *testing.T, topic string, n int) {
	t.Helper()
	path := strings.Replace(topic, "://", "/", 1)
	req, _ := http.NewRequest(http.MethodPut, tg.Admin+"/admin/v2/"+path+"/partitions", strings.NewReader(fmt.Sprint(n)))
	req.Header.Set("Content-Type", "application/json")
	req.Close = true // no idle connection left for goleak
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("create %s with %d partitions: %s: %s", topic, n, resp.Status, body)
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
