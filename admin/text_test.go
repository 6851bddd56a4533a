package admin

import (
	"strings"
	"testing"
)

// A topic's stats as text: counters with their units, each publisher,
// and the subscriptions sorted by name with their backlog and consumers.
func TestTopicStatsWriteText(t *testing.T) {
	st := &TopicStats{MsgInCounter: 1, BytesInCounter: 10, MsgRateIn: 0.5, MsgThroughputIn: 5, MsgOutCounter: 2, StorageSize: 99,
		Publishers: []PublisherStats{{ProducerName: "p-1", Address: "127.0.0.1:5000", MsgRateIn: 0.5}},
		Subscriptions: map[string]SubscriptionStats{
			"zeta":  {Type: "Shared", MsgBacklog: 1, UnackedMessages: 2, MsgOutCounter: 2, Consumers: []any{1, 2}},
			"alpha": {Type: "Exclusive", MsgBacklog: 3, Consumers: []any{1}},
		}}
	var b strings.Builder
	if err := st.WriteText(&b, "persistent://public/default/t"); err != nil {
		t.Fatal(err)
	}
	want := `persistent://public/default/t
  in:  1 message, 10 bytes (0.5 msg/s, 5 B/s)
  out: 2 messages, 0 bytes (0.0 msg/s, 0 B/s)
  storage: 99 bytes
  publishers: 1
    p-1 from 127.0.0.1:5000 (0.5 msg/s)
  subscriptions: 2
    alpha (Exclusive): backlog 3 entries, unacked 0 messages, out 0 messages (0.0 msg/s), 1 consumer
    zeta (Shared): backlog 1 entry, unacked 2 messages, out 2 messages (0.0 msg/s), 2 consumers
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// How a topic is stored, as text: entries and size, then each cursor by
// name.
func TestInternalStatsWriteText(t *testing.T) {
	st := &InternalStats{NumberOfEntries: 2, TotalSize: 64, LastConfirmedEntry: "5:1",
		Cursors: map[string]CursorStats{"b": {MarkDeletePosition: "5:0", ReadPosition: "5:2", IndividuallyDeleted: "[]"}, "a": {MarkDeletePosition: "5:1", ReadPosition: "5:2", IndividuallyDeleted: "[]"}}}
	var b strings.Builder
	if err := st.WriteText(&b, "t"); err != nil {
		t.Fatal(err)
	}
	want := "t: 2 entries, 64 bytes, last 5:1\n" +
		"  a: mark-delete 5:1, read 5:2, acknowledged past it []\n" +
		"  b: mark-delete 5:0, read 5:2, acknowledged past it []\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// The backlog table: a header and a row a subscription.
func TestWriteBacklogs(t *testing.T) {
	var b strings.Builder
	if err := WriteBacklogs(&b, []SubscriptionBacklog{{Subscription: "s", Type: "Shared", Backlog: 4, Unacked: 1, Consumers: 2}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SUBSCRIPTION") || strings.Join(strings.Fields(lines[1]), " ") != "s Shared 4 1 2" {
		t.Errorf("table:\n%s", b.String())
	}
}
