package interop

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// topicPath is the admin API path of a topic in public/default.
func topicPath(topic string) string {
	return "/admin/v2/persistent/public/default/" + strings.TrimPrefix(topic, "persistent://public/default/")
}

// The admin REST subset on a non-partitioned topic: create, list, a
// subscription's backlog in the stats, list and delete the subscription,
// delete the topic.
func TestAdminTopicLifecycle(t *testing.T) {
	ctx := testContext(t)
	topic := brokertest.TopicName(t)
	path := topicPath(topic)
	list := func() []string {
		var names []string
		body := adminDo(t, "GET", "/admin/v2/persistent/public/default", "")
		if err := json.Unmarshal(body, &names); err != nil {
			t.Fatalf("GET /admin/v2/persistent/public/default: %s: %v", body, err)
		}
		return names
	}
	adminDo(t, "PUT", path, "")
	if names := list(); !slices.Contains(names, topic) {
		t.Fatalf("created %s, but the topic list is %v", topic, names)
	}

	c := newClient(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "backlog", Type: pulsar.Exclusive})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 10, 0)
	for _, m := range receiveN(ctx, t, cons, 10, false)[:4] {
		cons.Ack(m)
	}
	backlog := func() int64 {
		var stats struct {
			Subscriptions map[string]struct {
				MsgBacklog int64 `json:"msgBacklog"`
			} `json:"subscriptions"`
		}
		body := adminDo(t, "GET", path+"/stats", "")
		if err := json.Unmarshal(body, &stats); err != nil {
			t.Fatalf("GET %s/stats: %s: %v", path, body, err)
		}
		s, ok := stats.Subscriptions["backlog"]
		if !ok {
			t.Fatalf("GET %s/stats: no subscription \"backlog\" in %s", path, body)
		}
		return s.MsgBacklog
	}
	eventually(ctx, t, "the stats to show a backlog of 6", func() bool { return backlog() == 6 })

	var subs []string
	if body := adminDo(t, "GET", path+"/subscriptions", ""); json.Unmarshal(body, &subs) != nil || !slices.Equal(subs, []string{"backlog"}) {
		t.Fatalf("GET %s/subscriptions: %s, want [\"backlog\"]", path, body)
	}
	cons.Close()
	adminDo(t, "DELETE", path+"/subscription/backlog", "")
	if body := adminDo(t, "GET", path+"/subscriptions", ""); json.Unmarshal(body, &subs) != nil || len(subs) != 0 {
		t.Fatalf("GET %s/subscriptions after deleting it: %s", path, body)
	}
	p.Close()
	c.Close()
	adminDo(t, "DELETE", path, "")
	if names := list(); slices.Contains(names, topic) {
		t.Fatalf("deleted %s, but the topic list still has it: %v", topic, names)
	}
}

// A partitioned topic grown through the admin API (POST .../partitions):
// the metadata says so, and a producer and a consumer that discover
// partitions every second start using the new ones.
func TestPartitionedTopicGrows(t *testing.T) {
	const keys = 40
	ctx := testContext(t)
	topic := brokertest.TopicName(t)
	path := topicPath(topic) + "/partitions"
	adminDo(t, "PUT", path, "2")

	c := newClient(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "grow",
		Type:                        pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		AutoDiscoveryPeriod:         time.Second,
	})
	p := newProducer(t, c, pulsar.ProducerOptions{
		Topic:                           topic,
		DisableBatching:                 true,
		PartitionsAutoDiscoveryInterval: time.Second,
	})
	round := func(r int) map[string]int {
		sendAll(ctx, t, p, keys, func(i int) *pulsar.ProducerMessage {
			return &pulsar.ProducerMessage{Key: "key-" + strconv.Itoa(i), Payload: []byte(strconv.Itoa(r))}
		})
		seen := map[string]int{}
		for _, m := range receiveN(ctx, t, cons, keys, true) {
			seen[m.Topic()]++
		}
		return seen
	}
	if seen := round(0); len(seen) != 2 {
		t.Fatalf("with 2 partitions messages came from %v", seen)
	}

	adminDo(t, "POST", path, "4")
	var meta struct {
		Partitions int `json:"partitions"`
	}
	if body := adminDo(t, "GET", path, ""); json.Unmarshal(body, &meta) != nil || meta.Partitions != 4 {
		t.Fatalf("GET %s after growing to 4: %s", path, body)
	}
	// Publish a round per 200 ms until the new partitions carry messages.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for r := 1; ; r++ {
		seen := round(r)
		if seen[topic+"-partition-2"] > 0 && seen[topic+"-partition-3"] > 0 {
			t.Logf("round %d used the new partitions: %v", r, seen)
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the new partitions were never used: last round %v", seen)
		}
	}
}

// Cumulative acks on an Exclusive subscription move the cursor past
// everything up to the acked message; Unsubscribe deletes the cursor, so a
// new subscription of that name starts at the latest message.
func TestCumulativeAckAndUnsubscribe(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "cumulative", Type: pulsar.Exclusive}
	cons := subscribe(t, c, opts)
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxMessages: 7})
	sendPlain(ctx, t, p, 30, 0)
	got := receiveN(ctx, t, cons, 30, false)
	checkSequence(t, got, 0)
	// Ack up to the last message of a batch. The client acks a batch's
	// entry only once all of it is acked, so a cut inside a batch brings
	// the whole batch back; where the batches end depends on the
	// producer's timer as well as its count (once, on Apache Pulsar, the
	// acked message 20 was inside a batch and the batch came back from
	// 15), so the cut is found from the ids, not assumed.
	cut := -1
	for i := 10; i+1 < len(got); i++ {
		if got[i+1].ID().BatchIdx() == 0 {
			cut = i
			break
		}
	}
	if cut < 0 {
		t.Fatalf("messages did not come in batches: ids %v .. %v", got[0].ID(), got[29].ID())
	}
	if err := cons.AckCumulative(got[cut]); err != nil {
		t.Fatalf("cumulative ack of %v: %v", got[cut].ID(), err)
	}
	cons.Close()
	cons = subscribe(t, c, opts)
	checkSequence(t, receiveN(ctx, t, cons, 29-cut, true), cut+1)

	if err := cons.Unsubscribe(); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	cons.Close()
	cons = subscribe(t, c, opts)
	sendPlain(ctx, t, p, 1, 30)
	checkSequence(t, receiveN(ctx, t, cons, 1, true), 30)
}

// A consumer of a list of topics reads them all as one stream.
func TestMultiTopicConsumer(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	base := brokertest.TopicName(t)
	topics := []string{base + "-a", base + "-b", base + "-c"}
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topics: topics, SubscriptionName: "multi", Type: pulsar.Shared})
	for i, topic := range topics {
		p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic})
		sendPlain(ctx, t, p, 20, 100*i)
	}
	per := map[string][]int{}
	for _, m := range receiveN(ctx, t, cons, 60, true) {
		seq, err := strconv.Atoi(strings.TrimPrefix(string(m.Payload()), "message-"))
		if err != nil {
			t.Fatalf("bad payload %q", m.Payload())
		}
		per[m.Topic()] = append(per[m.Topic()], seq)
	}
	for i, topic := range topics {
		if len(per[topic]) != 20 || !slices.IsSorted(per[topic]) || per[topic][0] != 100*i {
			t.Fatalf("%s: got %v", topic, per[topic])
		}
	}
	expectNothing(ctx, t, cons, 300*time.Millisecond)
}
