package broker_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	pb "github.com/streamrun/streamrun/pulsarwire/pb"
)

func readCompacted(m *pb.CommandSubscribe) { m.ReadCompacted = proto.Bool(true) }

// A compacted view is kept apart from the log: it survives a restart of
// the broker, and a readCompacted consumer still reads it once every
// entry of the log under it is trimmed (the log acknowledged by all and
// past its retention); a second compaction at once while one runs is
// refused with 409, as Apache Pulsar's.
func TestTheCompactedViewSurvivesARestartAndATrim(t *testing.T) {
	dir := t.TempDir()
	start := func() *broker.Cluster {
		return brokertest.Start(t, func(o *broker.Options) { o.Memory = false; o.DataDir = dir; o.Retention = 1 })
	}
	c := start()
	topic := "persistent://public/default/compacted"
	path := c.AdminURL() + "/admin/v2/persistent/public/default/compacted/compaction"
	p := dial(t, c.ServiceURL())
	publishN(t, p, topic, 10, func(i int) string { return []string{"a", "b"}[i%2] }) // a=8, b=9 last
	adminDo(t, "PUT", path, "", 204)
	brokertest.Eventually(t, waitFor, "compaction done", func() bool {
		return strings.Contains(adminDo(t, "GET", path, "", 200), `"SUCCESS"`)
	})
	// Everything acknowledged by a subscription of its own, then trimmed.
	cid := p.subscribe(topic, "all", pb.CommandSubscribe_Exclusive, earliest)
	p.flow(cid, 100)
	for range 10 {
		p.ack(cid, p.receive(cid).id)
	}
	brokertest.Eventually(t, waitFor, "the log trimmed", func() bool {
		return strings.Contains(adminDo(t, "GET", strings.TrimSuffix(path, "/compaction")+"/internalStats", "", 200), `"numberOfEntries":0`)
	})
	p.close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = start()
	q := dial(t, c.ServiceURL())
	cid = q.subscribe(topic, "view", pb.CommandSubscribe_Exclusive, earliest, readCompacted)
	q.flow(cid, 100)
	var got []string
	for range 2 {
		m := q.receive(cid)
		got = append(got, m.key+"="+m.payload)
	}
	if strings.Join(got, " ") != "a=8 b=9" {
		t.Errorf("readCompacted after a restart: %v, want a=8 b=9", got)
	}
	q.noMessage(cid, 200*time.Millisecond)
}
