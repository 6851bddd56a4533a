package admin

import (
	"maps"
	"slices"
)

// SubscriptionBacklog is one subscription's backlog as `streamrun topics
// backlog` shows it; the JSON names are Apache Pulsar's.
type SubscriptionBacklog struct {
	Subscription string `json:"subscription"`
	Type         string `json:"type"`
	Backlog      int64  `json:"msgBacklog"` // entries not yet acknowledged
	Unacked      int64  `json:"unackedMessages"`
	Consumers    int    `json:"consumers"`
}

// Backlogs is each subscription's backlog, sorted by name.
func (st *TopicStats) Backlogs() []SubscriptionBacklog {
	out := []SubscriptionBacklog{}
	for _, n := range slices.Sorted(maps.Keys(st.Subscriptions)) {
		s := st.Subscriptions[n]
		out = append(out, SubscriptionBacklog{n, s.Type, s.MsgBacklog, s.UnackedMessages, len(s.Consumers)})
	}
	return out
}
