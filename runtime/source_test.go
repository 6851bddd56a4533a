package runtime

import (
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

func TestSourceOptions(t *testing.T) {
	o, err := sourceOptions(pipelines.Source{Topics: []string{"a"}, Subscription: "s", Type: "Key_Shared",
		InitialPosition: "Earliest", Rewind: "1:2:-1", ReceiverQueue: 7})
	if err != nil {
		t.Fatal(err)
	}
	id, isID := o.Rewind.MessageID()
	if o.Type != subscribe.KeyShared || o.InitialPosition != subscribe.Earliest || !isID ||
		id.Ledger != 1 || id.Entry != 2 || o.ReceiverQueue != 7 || o.Subscription != "s" || o.Topics[0] != "a" {
		t.Errorf("options %+v", o)
	}
	o, err = sourceOptions(pipelines.Source{Pattern: "p.*", Subscription: "s", Rewind: "2025-06-01T12:00:00Z"})
	if err != nil || o.Type != subscribe.Shared || o.InitialPosition != subscribe.Latest || o.Pattern != "p.*" ||
		o.Rewind != subscribe.AtTime(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("options %+v, %v", o, err)
	}
	for _, c := range []struct {
		in   string
		want subscribe.Position
	}{{"", subscribe.Position{}}, {"earliest", subscribe.AtEarliest()}, {"LATEST", subscribe.AtLatest()}} {
		if o, err := sourceOptions(pipelines.Source{Rewind: c.in}); err != nil || o.Rewind != c.want {
			t.Errorf("rewind %q: %v, %v", c.in, o.Rewind, err)
		}
	}
}

// pipelines checks a file before anything runs, by rules of its own;
// subscribe checks again at start. They must agree, or a file that
// validates fails at start (or one that would run is refused).
func TestPipelinesAndSubscribeAgree(t *testing.T) {
	for _, s := range []string{"", "shared", "Shared", "Key_Shared", "key-shared", "KEYSHARED", "failover", "Exclusive", "round_robin", "key shared", "sharedx"} {
		_, perr := pipelines.ParseSubscriptionType(s)
		_, serr := subscribe.ParseType(s)
		if s != "" && (perr == nil) != (serr == nil) {
			t.Errorf("type %q: pipelines says %v, subscribe says %v", s, perr, serr)
		}
	}
	for _, s := range []string{"earliest", "Latest", "1:2:3", "1:2:-1:4", "2025-06-01T12:00:00Z", "2025-06-01T12:00:00.5+02:00", "1:2", "yesterday", "2025-06-01", "a:b:c"} {
		pp, perr := pipelines.ParsePosition(s)
		sp, serr := subscribe.ParsePosition(s)
		if (perr == nil) != (serr == nil) {
			t.Errorf("position %q: pipelines says %v, subscribe says %v", s, perr, serr)
			continue
		}
		if perr == nil {
			if got, _ := position(s); got != sp {
				t.Errorf("position %q: converted to %v, subscribe reads %v (%+v)", s, got, sp, pp)
			}
		}
	}
	// Patterns: subscribe's TestPatternRulesAgreeWithPipelines.
	for _, topic := range []string{"orders", "t/ns/x", "persistent://t/ns/x", "a/b", "", "persistent://t/ns/x-partition-2"} {
		src := pipelines.Pipeline{Name: "p", Source: pipelines.Source{Topics: []string{topic}, Subscription: "s"}, Handler: pipelines.Handler{Plugin: "x"}}
		_, werr := pulsarwire.ParseTopic(topic)
		if perr := src.Validate(); (perr == nil) != (werr == nil) {
			t.Errorf("topic %q: pipelines says %v, pulsarwire says %v", topic, perr, werr)
		}
	}
}
