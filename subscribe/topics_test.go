package subscribe_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// A list of topics is one stream: every message of each arrives, each
// topic's in order, each telling where it came from.
func TestTopicListIsOneStream(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	a, b := brokertest.TopicName(t), brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{a, b}, Subscription: "list"})
	publish(ctx, t, c, a, 0, 50, nil)
	publish(ctx, t, c, b, 100, 50, nil)
	byTopic := map[string][]*subscribe.Message{}
	for _, m := range receiveN(ctx, t, cons, 100, true) {
		byTopic[m.Topic] = append(byTopic[m.Topic], m)
	}
	checkSequence(t, byTopic[a], 0)
	checkSequence(t, byTopic[b], 100)
	if len(byTopic) != 2 {
		t.Fatalf("messages from %d topics, want 2", len(byTopic))
	}
}

// A pattern subscription takes the matching topics of its namespace, a
// partitioned one partition by partition; a topic created later is
// consumed within the refresh period; a deleted one leaves.
func TestPatternPicksUpNewTopicsAndDropsDeletedOnes(t *testing.T) {
	const refresh = 200 * time.Millisecond
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	prefix := "persistent://public/default/" + brokertest.Name(t)
	old, parted, later := prefix+"-old", prefix+"-parted", prefix+"-later"
	// Published to by a client closed at once: a producer of its own
	// would re-create the topic after the delete below.
	oldClient := tg.newClient(t, clientConfig{})
	publish(ctx, t, oldClient, old, 0, 5, nil)
	if err := oldClient.Close(ctx); err != nil {
		t.Fatal(err)
	}
	tg.CreatePartitioned(t, parted, 2)
	publish(ctx, t, c, "persistent://public/default/other-"+brokertest.Name(t), 0, 1, nil) // does not match

	cons := newConsumer(ctx, t, c, subscribe.Options{
		Pattern: strings.ReplaceAll(prefix, ".", `\.`) + "-.*", Subscription: "pattern",
		InitialPosition: subscribe.Earliest, PatternRefresh: refresh,
	})
	want := []string{old, parted + "-partition-0", parted + "-partition-1"}
	if got := sorted(cons.Topics()); !slices.Equal(got, want) {
		t.Fatalf("consuming %v, want %v", got, want)
	}
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 0)
	publish(ctx, t, c, parted, 10, 10, func(i int, m *pool.Message) { m.Key = fmt.Sprint(i) })
	if n := len(receiveN(ctx, t, cons, 10, true)); n != 10 {
		t.Fatal(n)
	}

	publish(ctx, t, c, later, 100, 5, nil)
	start := time.Now()
	msgs := receiveN(ctx, t, cons, 5, true)
	took := time.Since(start)
	checkSequence(t, msgs, 100)
	if msgs[0].Topic != later {
		t.Fatalf("message from %s, want %s", msgs[0].Topic, later)
	}
	// A refresh period, plus lookup and subscribe: generous on a busy CI.
	if took > refresh+5*time.Second {
		t.Fatalf("the new topic was consumed after %v, refresh period %v", took, refresh)
	}

	tg.deleteTopic(t, old)
	brokertest.Eventually(t, testTimeout, "the deleted topic to leave", func() bool { return !slices.Contains(cons.Topics(), old) })
}

// A pattern that matches no topic yet still refreshes: the first topic
// created is consumed. (New decided to refresh inside its loop over the
// topics found, so with none it never did.)
func TestPatternMatchingNothingYetPicksUpTheFirstTopic(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	prefix := "persistent://public/default/" + brokertest.Name(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{
		Pattern: strings.ReplaceAll(prefix, ".", `\.`) + "-.*", Subscription: "empty",
		InitialPosition: subscribe.Earliest, PatternRefresh: 100 * time.Millisecond,
	})
	if got := cons.Topics(); len(got) != 0 {
		t.Fatalf("consuming %v, want nothing yet", got)
	}
	publish(ctx, t, c, prefix+"-first", 0, 3, nil)
	checkSequence(t, receiveN(ctx, t, cons, 3, true), 0)
}

// A partitioned topic is consumed partition by partition; partitions
// added later join at the next refresh, from their first message.
func TestPartitionedTopicGrowthIsPickedUp(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	tg.CreatePartitioned(t, topic, 2)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "grow", PatternRefresh: 100 * time.Millisecond})
	if got := sorted(cons.Topics()); !slices.Equal(got, []string{topic + "-partition-0", topic + "-partition-1"}) {
		t.Fatalf("consuming %v", got)
	}
	publish(ctx, t, c, topic, 0, 40, func(i int, m *pool.Message) { m.Key = fmt.Sprint("key", i) })
	parts := map[int32]int{}
	for _, m := range receiveN(ctx, t, cons, 40, true) {
		parts[m.ID.Partition]++
		if want := fmt.Sprintf("%s-partition-%d", topic, m.ID.Partition); m.Topic != want {
			t.Fatalf("message %s from %s, want %s", m.ID, m.Topic, want)
		}
	}
	if len(parts) != 2 {
		t.Fatalf("messages by partition: %v", parts)
	}

	tg.UpdatePartitions(t, topic, 3)
	brokertest.Eventually(t, testTimeout, "the third partition to join", func() bool { return len(cons.Topics()) == 3 })
	third := topic + "-partition-2"
	publish(ctx, t, c, third, 100, 3, nil)
	msgs := receiveN(ctx, t, cons, 3, true)
	checkSequence(t, msgs, 100)
	if msgs[0].Topic != third || msgs[0].ID.Partition != 2 {
		t.Fatalf("message %s from %s", msgs[0].ID, msgs[0].Topic)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}
