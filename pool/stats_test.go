package pool

import (
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

// Stats counts the connections open, a connection dialed again after the
// broker dropped it as a reconnect, and nothing pending once every
// publish has its receipt.
func TestStatsCountsReconnects(t *testing.T) {
	tg := embeddedTarget(t)
	c := newClient(t, tg, Options{ServiceURL: tg.URL})
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	if _, err := c.Publish(ctx, topic, Message{Payload: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Connections < 1 || st.Reconnects != 0 || st.PendingMessages != 0 || st.PendingBytes != 0 {
		t.Fatalf("after one publish: %+v", st)
	}
	tg.cluster.DropConnections(-1)
	// The producer reconnects on its own; a publish waits for it.
	if _, err := c.Publish(ctx, topic, Message{Payload: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 30*time.Second, "a reconnect counted", func() bool { return c.Stats().Reconnects >= 1 })
	if st := c.Stats(); st.Connections < 1 || st.PendingMessages != 0 {
		t.Errorf("after the reconnect: %+v", st)
	}
}
