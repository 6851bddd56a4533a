package clientrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func conn(url string) Conn {
	return Conn{Client: pool.Options{ServiceURL: url}, ConnectTimeout: 30 * time.Second, CloseTimeout: 30 * time.Second}
}

// What Produce publishes, Consume hands over in order, each call telling
// its callbacks what it did: the command's lines come from these.
func TestProduceThenConsume(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	opened, progress := -2, 0
	res, err := Produce(ctx, ProduceOptions{
		Conn:     conn(peer.URL),
		Topic:    topic,
		Source:   msglines.Source{Generated: msglines.Generated{Template: pool.Message{Key: "k"}, Text: "m-{n}", Count: 5}},
		Opened:   func(total int) { opened = total },
		Progress: func(pool.PublishResult) { progress++ },
	})
	if err != nil || res == nil {
		t.Fatalf("Produce: %v, %v", res, err)
	}
	if res.Acked != 5 || res.Total != 5 || res.Failed != 0 || res.Interrupted || res.CloseErr != nil || opened != 5 || progress != 5 {
		t.Fatalf("Produce: %+v, opened with %d, progress told %d times; want 5 of 5 acknowledged, opened with 5, told 5 times", res, opened, progress)
	}

	var got []string
	var subscribed []string
	r, err := Consume(ctx, ConsumeOptions{
		Conn:       conn(peer.URL),
		Subscribe:  subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest},
		Each:       subscribe.EachOptions{Count: 5},
		Subscribed: func(topics []string) { subscribed = topics },
	}, func(m *subscribe.Message) error {
		got = append(got, m.Key+"="+string(m.Payload))
		return nil
	})
	if err != nil || r == nil {
		t.Fatalf("Consume: %v, %v", r, err)
	}
	want := []string{"k=m-0", "k=m-1", "k=m-2", "k=m-3", "k=m-4"}
	if !slices.Equal(got, want) || r.N != 5 || r.Last != res.LastID || !slices.Equal(subscribed, []string{topic}) {
		t.Errorf("Consume handed %q (N %d, last %v; produced last %v), subscribed to %q; want %q from %s",
			got, r.N, r.Last, res.LastID, subscribed, want, topic)
	}
}

// A source that does not open fails Produce before anything is sent, as
// a *SourceError with the cause inside, so that a command names its
// flag; nothing reached the topic.
func TestProduceSourceErrorComesFirst(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	missing := filepath.Join(t.TempDir(), "none.txt")
	res, err := Produce(ctx, ProduceOptions{Conn: conn(peer.URL), Topic: brokertest.TopicName(t), Source: msglines.Source{Input: missing}})
	var se *SourceError
	var pe *os.PathError
	if res != nil || !errors.As(err, &se) || !errors.As(err, &pe) || err.Error() != pe.Error() {
		t.Fatalf("Produce from a missing file: %+v, %v; want no result and a *SourceError around the *os.PathError, its text the same", res, err)
	}
}

// Consume stops once no message came for Each.Idle, saying so, with no
// error; Elapsed covers the wait.
func TestConsumeStopsWhenIdle(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	r, err := Consume(ctx, ConsumeOptions{
		Conn:      conn(peer.URL),
		Subscribe: subscribe.Options{Topics: []string{brokertest.TopicName(t)}, Subscription: "s"},
		Each:      subscribe.EachOptions{Idle: 300 * time.Millisecond},
	}, func(*subscribe.Message) error { return fmt.Errorf("no message was published") })
	if err != nil || r == nil || !r.Idle || r.N != 0 || r.Elapsed < 300*time.Millisecond {
		t.Fatalf("Consume of an empty topic: %+v, %v; want stopped idle after 300ms, none handled", r, err)
	}
}

// Consume's function's error ends it with that error, after the message
// it refused.
func TestConsumeEndsWithTheFunctionsError(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	topic := brokertest.TopicName(t)
	if _, err := Produce(ctx, ProduceOptions{Conn: conn(peer.URL), Topic: topic,
		Source: msglines.Source{Generated: msglines.Generated{Text: "x", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("refused")
	r, err := Consume(ctx, ConsumeOptions{
		Conn:      conn(peer.URL),
		Subscribe: subscribe.Options{Topics: []string{topic}, Subscription: "s", InitialPosition: subscribe.Earliest},
	}, func(*subscribe.Message) error { return refuse })
	if !errors.Is(err, refuse) || r == nil || r.N != 0 {
		t.Fatalf("Consume: %+v, %v; want the function's error, nothing handled", r, err)
	}
}

// Failing to connect, each call says where it tried and gives no result.
func TestNothingStartsWithoutABroker(t *testing.T) {
	ctx := brokertest.Context(t, time.Minute)
	c := conn("pulsar://127.0.0.1:1")
	c.ConnectTimeout = 500 * time.Millisecond
	if res, err := Produce(ctx, ProduceOptions{Conn: c, Topic: "t", Source: msglines.Source{Generated: msglines.Generated{Text: "x", Count: 1}}}); res != nil || err == nil {
		t.Errorf("Produce without a broker: %+v, %v; want no result and an error", res, err)
	}
	if r, err := Consume(ctx, ConsumeOptions{Conn: c, Subscribe: subscribe.Options{Topics: []string{"t"}, Subscription: "s"}},
		func(*subscribe.Message) error { return nil }); r != nil || err == nil {
		t.Errorf("Consume without a broker: %+v, %v; want no result and an error", r, err)
	}
	if vals, err := State(ctx, c, "t-changelog"); vals != nil || err == nil || !strings.Contains(err.Error(), "connect to pulsar://127.0.0.1:1") {
		t.Errorf("State without a broker: %v, %v; want an error naming the URL", vals, err)
	}
}

// State of a changelog nothing wrote is empty: reading stops at its own
// marker.
func TestStateOfAnEmptyChangelog(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	vals, err := State(ctx, conn(peer.URL), brokertest.TopicName(t)+"-changelog")
	if err != nil || len(vals) != 0 {
		t.Fatalf("State of an empty changelog: %v, %v; want no key, no error", vals, err)
	}
}
