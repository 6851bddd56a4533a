package interop

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// javaStringHash is Java's String.hashCode over the key's bytes, the hash
// the Go and Java clients route keys with by default.
func javaStringHash(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h = 31*h + uint32(s[i])
	}
	return h
}

// A partitioned topic created through the admin REST API: its metadata
// reads back, producing by key puts every key on the partition its hash
// names, and one consumer reads every partition, each key in order.
func TestPartitionedTopicFromAdminAPI(t *testing.T) {
	const partitions, keys, perKey = 4, 20, 25
	ctx := testContext(t)
	topic := brokertest.TopicName(t)
	path := topicPath(topic) + "/partitions"
	adminDo(t, "PUT", path, strconv.Itoa(partitions))

	var meta struct {
		Partitions int `json:"partitions"`
	}
	if body := adminDo(t, "GET", path, ""); json.Unmarshal(body, &meta) != nil || meta.Partitions != partitions {
		t.Fatalf("GET %s: %s, want partitions=%d", path, body, partitions)
	}

	var listed []string
	list := "/admin/v2/persistent/public/default/partitioned"
	if body := adminDo(t, "GET", list, ""); json.Unmarshal(body, &listed) != nil || !slices.Contains(listed, topic) {
		t.Fatalf("GET %s: %s, want a JSON list naming %s", list, body, topic)
	}

	c := newClient(t)
	parts, err := c.TopicPartitions(topic)
	if err != nil {
		t.Fatalf("partitions of %s: %v", topic, err)
	}
	if len(parts) != partitions {
		t.Fatalf("client sees partitions %v, want %d", parts, partitions)
	}
	cons := subscribe(t, c, pulsar.ConsumerOptions{
		Topic:                       topic,
		SubscriptionName:            "all",
		Type:                        pulsar.Exclusive,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
	})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatcherBuilderType: pulsar.KeyBasedBatchBuilder})
	sendAll(ctx, t, p, keys*perKey, func(i int) *pulsar.ProducerMessage {
		return keyedMessage(i%keys, i/keys)
	})

	next := map[string]int{}
	perPartition := map[string]int{}
	for i := 0; i < keys*perKey; i++ {
		m := receive(ctx, t, cons)
		if err := cons.Ack(m); err != nil {
			t.Fatal(err)
		}
		key := m.Key()
		seq, _ := strconv.Atoi(string(m.Payload()))
		if seq != next[key] {
			t.Fatalf("key %s: got seq %d, want %d", key, seq, next[key])
		}
		next[key]++
		want := fmt.Sprintf("%s-partition-%d", topic, javaStringHash(key)%partitions)
		if m.Topic() != want {
			t.Fatalf("key %s came from %s, want %s (Java string hash routing)", key, m.Topic(), want)
		}
		perPartition[m.Topic()]++
	}
	if len(perPartition) != partitions {
		t.Fatalf("messages came from %d partitions, want all %d: %v", len(perPartition), partitions, perPartition)
	}
	t.Logf("per partition: %v", perPartition)
}
