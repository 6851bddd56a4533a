package interop

import (
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// Seeking a subscription to a message id replays from that message: the
// broker resends it, and the Go client hands it over only when
// StartMessageIDInclusive is set (by default it resumes after it).
func TestSeekByMessageID(t *testing.T) {
	for _, inclusive := range []bool{false, true} {
		name := "exclusive"
		if inclusive {
			name = "inclusive"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testSeekByMessageID(t, inclusive)
		})
	}
}

func testSeekByMessageID(t *testing.T, inclusive bool) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	opts := pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "seek", Type: pulsar.Exclusive, StartMessageIDInclusive: inclusive}
	cons := subscribe(t, c, opts)
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	ids := sendPlain(ctx, t, p, 10, 0)
	checkSequence(t, receiveN(ctx, t, cons, 10, true), 0)

	if err := cons.Seek(ids[4]); err != nil {
		t.Fatalf("seek to %v: %v", ids[4], err)
	}
	from := 5
	if inclusive {
		from = 4
	}
	checkSequence(t, receiveN(ctx, t, cons, 10-from, true), from)

	// Back to the start, and the cursor stays there for the next consumer.
	// (pulsar-client-go v0.19 cannot Seek(EarliestMessageID()) on a
	// non-partitioned topic: "invalid partition index -1"; so seek to the
	// first id.)
	if err := cons.Seek(ids[0]); err != nil {
		t.Fatalf("seek to %v: %v", ids[0], err)
	}
	from = 1
	if inclusive {
		from = 0
	}
	checkSequence(t, receiveN(ctx, t, cons, 3, true), from)
	cons.Close()
	cons = subscribe(t, c, opts)
	checkSequence(t, receiveN(ctx, t, cons, 10-from-3, true), from+3)
	sendPlain(ctx, t, p, 1, 10)
	checkSequence(t, receiveN(ctx, t, cons, 1, true), 10)
}

// Seeking a subscription to a time replays from the first message
// published at or after it.
func TestSeekByTime(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "seek", Type: pulsar.Exclusive})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendPlain(ctx, t, p, 5, 0)
	first := receiveN(ctx, t, cons, 5, true)
	checkSequence(t, first, 0)

	// A cut strictly after every publish time so far (publish times have
	// millisecond precision), then the second group strictly after it.
	cut := first[4].PublishTime().Add(time.Millisecond)
	eventually(ctx, t, "the clock to pass the cut", func() bool { return time.Now().After(cut.Add(time.Millisecond)) })
	sendPlain(ctx, t, p, 5, 5)
	second := receiveN(ctx, t, cons, 5, true)
	checkSequence(t, second, 5)
	if !second[0].PublishTime().After(cut) {
		t.Fatalf("second group published at %v, not after the cut %v", second[0].PublishTime(), cut)
	}

	if err := cons.SeekByTime(cut); err != nil {
		t.Fatalf("seek to %v: %v", cut, err)
	}
	checkSequence(t, receiveN(ctx, t, cons, 5, true), 5)

	if err := cons.SeekByTime(first[0].PublishTime().Add(-time.Hour)); err != nil {
		t.Fatalf("seek to an hour before the first message: %v", err)
	}
	checkSequence(t, receiveN(ctx, t, cons, 10, true), 0)
}
