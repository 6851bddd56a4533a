package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A topic's life through the admin API, the same against the embedded
// broker and Apache Pulsar: created partitioned, listed once, published
// to and subscribed, its stats and cursors read, its subscription moved
// to the latest message, deleted.
func TestATopicsLife(t *testing.T) {
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, time.Minute)
	a, err := admin.New(admin.Options{URL: peer.Admin})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	topic := fmt.Sprintf("persistent://public/default/admin-life-%d", time.Now().UnixNano())
	if err := a.CreateTopic(ctx, topic, 2); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Partitions(ctx, topic); err != nil || n != 2 {
		t.Fatalf("partitions %d, %v; want 2", n, err)
	}
	list, err := a.Topics(ctx, "public/default")
	if err != nil || !slices.Contains(list, topic) || slices.Contains(list, topic+"-partition-0") {
		t.Fatalf("topics %v, %v: want %s once, not its partitions", list, err, topic)
	}

	client, err := pool.New(ctx, pool.Options{ServiceURL: peer.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	cons, err := subscribe.New(ctx, client, subscribe.Options{Topics: []string{topic}, Subscription: "life", Type: subscribe.Shared})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := client.Publish(ctx, topic, pool.Message{Key: fmt.Sprint(i), Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	brokertest.Eventually(t, 30*time.Second, "the messages in the stats", func() bool {
		st, err := a.TopicStats(ctx, topic)
		return err == nil && st.MsgInCounter == 10 && st.Subscriptions["life"].MsgBacklog+st.Subscriptions["life"].UnackedMessages > 0 && len(st.Raw) > 0
	})
	st, err := a.TopicStats(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	// Apache Pulsar as CI runs it adds a compaction cursor, __compaction.
	b := slices.DeleteFunc(st.Backlogs(), func(b admin.SubscriptionBacklog) bool { return b.Subscription == "__compaction" })
	if len(b) != 1 || b[0].Subscription != "life" || b[0].Backlog+b[0].Unacked == 0 || b[0].Consumers == 0 {
		t.Errorf("backlogs %+v: want life's, with its consumers and messages", b)
	}
	subs, err := a.Subscriptions(ctx, topic)
	if subs = slices.DeleteFunc(subs, func(s string) bool { return s == "__compaction" }); err != nil || !slices.Equal(subs, []string{"life"}) {
		t.Errorf("subscriptions %v, %v", subs, err)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.ResetCursor(ctx, topic, "life", admin.ResetTarget{Latest: true}); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 30*time.Second, "no backlog after a reset to the latest", func() bool {
		st, err := a.TopicStats(ctx, topic)
		return err == nil && st.Subscriptions["life"].MsgBacklog == 0
	})
	if _, err := a.DeleteTopic(ctx, topic, true); err != nil {
		t.Fatal(err)
	}
	_, err = a.TopicStats(ctx, topic)
	var se *admin.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound {
		t.Errorf("stats of a deleted topic: %v, want a 404", err)
	}
}

// What a client cannot be made with is refused before anything is sent,
// naming the option.
func TestNewRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		o     admin.Options
		field string
	}{
		{admin.Options{URL: "pulsar://127.0.0.1:6650"}, "URL"},
		{admin.Options{URL: "127.0.0.1:8080"}, "URL"},
		{admin.Options{URL: "http://127.0.0.1:8080", CAFile: "/nonexistent/ca.pem"}, "CAFile"},
	} {
		_, err := admin.New(tc.o)
		var oe *admin.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("New(%+v): %v, want an OptionError on %s", tc.o, err, tc.field)
		}
	}
}

// ParseResetTarget reads what `topics reset-cursor --to` takes.
func TestParseResetTarget(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for s, want := range map[string]func(admin.ResetTarget) bool{
		"earliest":             func(r admin.ResetTarget) bool { return r.Time.UnixMilli() == 0 && !r.Latest },
		"Latest":               func(r admin.ResetTarget) bool { return r.Latest },
		"10m":                  func(r admin.ResetTarget) bool { return r.Time.Equal(now.Add(-10 * time.Minute)) },
		"2026-06-01T11:00:00Z": func(r admin.ResetTarget) bool { return r.Time.Equal(now.Add(-time.Hour)) },
		"3:4:-1":               func(r admin.ResetTarget) bool { return r.ID != nil && r.ID.Ledger == 3 && r.ID.Entry == 4 },
	} {
		r, err := admin.ParseResetTarget(s, now)
		if err != nil || !want(r) {
			t.Errorf("%q: %+v, %v", s, r, err)
		}
	}
	if _, err := admin.ParseResetTarget("yesterday", now); err == nil {
		t.Error("yesterday was taken")
	}
}
