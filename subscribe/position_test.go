package subscribe_test

import (
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// A rewind to earliest is a seek of the stored cursor at every start: a
// consumer that acknowledged everything gets everything again the next
// time it starts, and the time after.
func TestRewindToEarliestReplaysOnEveryStart(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	publish(ctx, t, c, topic, 0, 20, nil)
	opts := subscribe.Options{Topics: []string{topic}, Subscription: "rewind", Rewind: subscribe.AtEarliest()}
	for start := 1; start <= 3; start++ {
		cons, err := subscribe.New(ctx, c, opts)
		if err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		checkSequence(t, receiveN(ctx, t, cons, 20, true), 0)
		if err := cons.Close(ctx); err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, testTimeout, "the acknowledgements to reach the cursor", func() bool { return tg.backlog(t, topic, "rewind") == 0 })
	}
	// Without the rewind, the same subscription has nothing left.
	opts.Rewind = subscribe.Position{}
	cons := newConsumer(ctx, t, c, opts)
	expectNothing(ctx, t, cons, 300*time.Millisecond)
}

// A rewind to a publish time starts at the first message published at or
// after it; to a message id, at that message (inside a batch too).
func TestRewindToTimeAndMessageID(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{})
	topic := brokertest.TopicName(t)
	publish(ctx, t, c, topic, 0, 10, nil)
	// Publish times are in milliseconds: the cut is in a millisecond after
	// every one of the first messages'.
	published := time.Now().UnixMilli()
	brokertest.Eventually(t, testTimeout, "the next millisecond", func() bool { return time.Now().UnixMilli() > published })
	cut := time.Now()
	ids := publish(ctx, t, c, topic, 10, 10, nil)

	byTime := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "time", Rewind: subscribe.AtTime(cut)})
	checkSequence(t, receiveN(ctx, t, byTime, 10, true), 10)

	at := ids[3] // message 13, inside the second batch
	if at.BatchIndex != 3 {
		t.Fatalf("message 13 has id %s: the test wants it at index 3 of a batch", at)
	}
	byID := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "id", Rewind: subscribe.AtMessage(at)})
	checkSequence(t, receiveN(ctx, t, byID, 7, true), 13)
}

// Seek moves a running consumer: what follows comes from the new place.
func TestSeekWhileRunning(t *testing.T) {
	tg := newTarget(t)
	ctx := testContext(t)
	c := tg.newClient(t, clientConfig{noBatching: true})
	topic := brokertest.TopicName(t)
	cons := newConsumer(ctx, t, c, subscribe.Options{Topics: []string{topic}, Subscription: "seek", ReceiverQueue: 10})
	ids := publish(ctx, t, c, topic, 0, 30, nil)
	checkSequence(t, receiveN(ctx, t, cons, 20, true), 0)

	if err := cons.Seek(ctx, subscribe.AtMessage(ids[5])); err != nil {
		t.Fatal(err)
	}
	checkSequence(t, receiveN(ctx, t, cons, 25, true), 5)
	if err := cons.Seek(ctx, subscribe.AtLatest()); err != nil {
		t.Fatal(err)
	}
	publish(ctx, t, c, topic, 30, 3, nil)
	checkSequence(t, receiveN(ctx, t, cons, 3, true), 30)
	if err := cons.Seek(ctx, subscribe.AtEarliest()); err != nil {
		t.Fatal(err)
	}
	checkSequence(t, receiveN(ctx, t, cons, 33, true), 0)
}

// Positions read from text as the command line takes them.
func TestParsePosition(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want subscribe.Position
	}{
		{"earliest", subscribe.AtEarliest()},
		{"LATEST", subscribe.AtLatest()},
		{"12:34:-1", subscribe.AtMessage(pulsarwire.MessageID{Ledger: 12, Entry: 34, Partition: -1, BatchIndex: -1})},
		{"12:34:2:7", subscribe.AtMessage(pulsarwire.MessageID{Ledger: 12, Entry: 34, Partition: 2, BatchIndex: 7})},
		{"2025-06-01T12:00:00Z", subscribe.AtTime(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))},
	} {
		got, err := subscribe.ParsePosition(tc.in)
		if err != nil || got.String() != tc.want.String() {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "soon", "1:2", "a:b:c", "2025-13-01T00:00:00Z"} {
		if p, err := subscribe.ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q) = %v, want an error", bad, p)
		}
	}
}
