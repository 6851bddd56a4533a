package runtime_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A handler is given every field of a message, the same in a plugin
// process (whose batch is encoded straight from the received message)
// as in the host's process (given plugin.Messages): its id's text, topic,
// key, ordering key, properties, payload, times, redelivery count and
// trace context. Both pipelines read the same messages, on subscriptions
// of their own.
func TestAHandlerIsGivenEveryFieldInAPluginAsInProcess(t *testing.T) {
	c := cluster(t)
	cl := client(t, c, unbatched)
	in, fromPlugin, fromLocal := topic(t, "in"), topic(t, "plugin"), topic(t, "local")
	const traceParent, traceState = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=1"
	ctx := testContext(t)
	sent := []pool.Message{{
		Payload: []byte("fields:all"), Key: "customer-1", OrderingKey: "order\x00key",
		Properties: map[string]string{"a": "b", "traceparent": traceParent, "tracestate": traceState},
		EventTime:  time.UnixMilli(1_600_000_000_456),
	}, {Payload: []byte("fields:bare")}}
	ids := make([]pulsarwire.MessageID, len(sent))
	for i, m := range sent {
		id, err := cl.Publish(ctx, in, m)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	outPlugin, outLocal := collect(t, cl, fromPlugin), collect(t, cl, fromLocal)
	pipeline := func(name, out string) pipelines.Pipeline {
		h := self(testConfig{Output: out})
		h.BatchSize = 1 // each message first in its batch, on both paths
		return pipelines.Pipeline{
			Name:    name,
			Source:  pipelines.Source{Topics: []string{in}, Subscription: name, InitialPosition: pipelines.Earliest},
			Handler: h,
			Outputs: []string{out},
		}
	}
	runHost(t, c, streamrun.Options{
		LocalHandlers: map[string]func() plugin.Handler{"local": func() plugin.Handler { return plugin.Configure(newTestHandler) }},
	}, pipeline("plugin", fromPlugin), pipeline("local", fromLocal))

	got := map[string][]seen{} // in the order sent
	for name, col := range map[string]*collector{"plugin": outPlugin, "local": outLocal} {
		got[name] = make([]seen, len(sent))
		for _, m := range col.waitLen(t, len(sent)) {
			var s seen
			if err := json.Unmarshal(m.Payload, &s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i := range sent {
				if string(sent[i].Payload) == string(s.Payload) {
					got[name][i] = s
				}
			}
		}
	}
	for i, s := range got["plugin"] {
		checkSeen(t, i, s, sent[i], ids[i], in)
	}
	pb, _ := json.Marshal(got["plugin"])
	lb, _ := json.Marshal(got["local"])
	if !bytes.Equal(pb, lb) {
		t.Errorf("in a plugin the handler was given\n%s\nin the host's process\n%s", pb, lb)
	}
}

// checkSeen checks what a handler was given of message i, published as
// m to topic with id.
func checkSeen(t *testing.T, i int, s seen, m pool.Message, id pulsarwire.MessageID, topic string) {
	t.Helper()
	got, err := pulsarwire.ParseMessageID(s.ID)
	if err != nil || got.Ledger != id.Ledger || got.Entry != id.Entry || got.Partition != id.Partition {
		t.Errorf("message %d: id %q, published as %v (%v)", i, s.ID, id, err)
	}
	wantTP, wantTS := m.Properties["traceparent"], m.Properties["tracestate"]
	if s.Topic != topic || s.Key != m.Key || string(s.OrderingKey) != m.OrderingKey || len(s.Properties) != len(m.Properties) ||
		string(s.Payload) != string(m.Payload) || !s.EventTime.Equal(m.EventTime) || s.PublishTime.IsZero() ||
		s.RedeliveryCount != 0 || s.TraceParent != wantTP || s.TraceState != wantTS || s.Index != 0 {
		t.Errorf("message %d: the plugin was given %+v for %+v", i, s, m)
	}
	for k, v := range m.Properties {
		if s.Properties[k] != v {
			t.Errorf("message %d: property %q is %q, want %q", i, k, s.Properties[k], v)
		}
	}
}
