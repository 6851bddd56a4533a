package pool

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
