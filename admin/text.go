package admin

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// The text forms of the server's answers, as `streamrun topics` prints
// them (its --output json prints the answers themselves).

// WriteText writes the stats of topic: its counters and rates in and
// out, its storage, each publisher, and each subscription by name.
func (st *TopicStats) WriteText(w io.Writer, topic string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", topic)
	fmt.Fprintf(&b, "  in:  %s, %d bytes (%.1f msg/s, %.0f B/s)\n", plural(st.MsgInCounter, "message"), st.BytesInCounter, st.MsgRateIn, st.MsgThroughputIn)
	fmt.Fprintf(&b, "  out: %s, %d bytes (%.1f msg/s, %.0f B/s)\n", plural(st.MsgOutCounter, "message"), st.BytesOutCounter, st.MsgRateOut, st.MsgThroughputOut)
	fmt.Fprintf(&b, "  storage: %d bytes\n", st.StorageSize)
	fmt.Fprintf(&b, "  publishers: %d\n", len(st.Publishers))
	for _, p := range st.Publishers {
		fmt.Fprintf(&b, "    %s from %s (%.1f msg/s)\n", p.ProducerName, p.Address, p.MsgRateIn)
	}
	fmt.Fprintf(&b, "  subscriptions: %d\n", len(st.Subscriptions))
	for _, n := range slices.Sorted(maps.Keys(st.Subscriptions)) {
		s := st.Subscriptions[n]
		fmt.Fprintf(&b, "    %s (%s): backlog %s, unacked %s, out %s (%.1f msg/s), %s\n", n, s.Type,
			plural(s.MsgBacklog, "entry"), plural(s.UnackedMessages, "message"), plural(s.MsgOutCounter, "message"), s.MsgRateOut, plural(int64(len(s.Consumers)), "consumer"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes how topic is stored: its entries, size and last
// entry, then each cursor by subscription name.
func (st *InternalStats) WriteText(w io.Writer, topic string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s, %d bytes, last %s\n", topic, plural(st.NumberOfEntries, "entry"), st.TotalSize, st.LastConfirmedEntry)
	for _, n := range slices.Sorted(maps.Keys(st.Cursors)) {
		c := st.Cursors[n]
		fmt.Fprintf(&b, "  %s: mark-delete %s, read %s, acknowledged past it %s\n", n, c.MarkDeletePosition, c.ReadPosition, c.IndividuallyDeleted)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteBacklogs writes rows (TopicStats.Backlogs) as a table with a
// header.
func WriteBacklogs(w io.Writer, rows []SubscriptionBacklog) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBSCRIPTION\tTYPE\tBACKLOG (ENTRIES)\tUNACKED\tCONSUMERS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", r.Subscription, r.Type, r.Backlog, r.Unacked, r.Consumers)
	}
	return tw.Flush()
}

// plural is "1 entry", "2 entries", "3 messages".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "y"); ok {
		return fmt.Sprintf("%d %sies", n, stem)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
