package host

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

// ownForm is a Batch in a form of the caller's own (not Messages): ids
// kept as numbers, written as text only into the frame.
type ownForm []ownMessage

type ownMessage struct {
	ledger, entry int
	f             Fields
}

func (o ownForm) Len() int                { return len(o) }
func (o ownForm) Fields(i int, f *Fields) { *f = o[i].f }
func (o ownForm) AppendID(b []byte, i int) []byte {
	b = strconv.AppendInt(b, int64(o[i].ledger), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(o[i].entry), 10)
	return append(b, ":-1:-1"...)
}

// A batch in the caller's own form reaches the plugin as the same
// messages as plugin.Messages would, field for field, and an echoed
// output (contract version 3's compact answer) is made from its fields.
func TestABatchInTheCallersFormReachesThePluginAsItsMessagesWould(t *testing.T) {
	fields := start(t, selfPlugin(t, "sdk", nil), `{"mode":"fields"}`)
	own := ownForm{{ledger: 12, entry: 34, f: Fields{
		Topic: "persistent://t/ns/orders-partition-2", Key: "customer-1", OrderingKey: "\x00\x01\x02",
		Properties: map[string]string{"a": "b", "traceparent": "x"}, Payload: []byte{0xff, 0, 'x'},
		PublishTime: time.UnixMilli(1_700_000_000_123), EventTime: time.UnixMilli(1_600_000_000_456), RedeliveryCount: 3,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "vendor=1",
	}}, {ledger: 12, entry: 35, f: Fields{Topic: "persistent://t/ns/orders-partition-2", PublishTime: time.UnixMilli(1)}}}
	msgs := Messages{}
	for i, m := range own {
		f := m.f
		pm := &plugin.Message{ID: string(own.AppendID(nil, i)), Topic: f.Topic, Key: f.Key, Properties: f.Properties,
			Payload: f.Payload, PublishTime: f.PublishTime, EventTime: f.EventTime, RedeliveryCount: f.RedeliveryCount,
			TraceParent: f.TraceParent, TraceState: f.TraceState}
		if f.OrderingKey != "" {
			pm.OrderingKey = []byte(f.OrderingKey)
		}
		msgs = append(msgs, pm)
	}
	ctx := context.Background()
	got, err := fields.ProcessBatch(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fields.Process(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range own {
		if g, w := got[i].Outputs[0].Payload, want[i].Outputs[0].Payload; !bytes.Equal(g, w) {
			t.Errorf("message %d: from the caller's form the plugin saw\n%s\nfrom plugin.Messages\n%s", i, g, w)
		}
	}
	if !bytes.Contains(got[0].Outputs[0].Payload, []byte(`"ID":"12:34:-1:-1"`)) {
		t.Errorf("the id's text did not come through: %s", got[0].Outputs[0].Payload)
	}

	echo := start(t, selfPlugin(t, "sdk", nil), `{"mode":"echo"}`)
	bare := ownForm{{ledger: 1, entry: 2, f: Fields{Topic: "in", Key: "k", Payload: []byte("p")}}}
	res, err := echo.ProcessBatch(ctx, bare)
	if err != nil {
		t.Fatal(err)
	}
	if o := res[0].Outputs; len(o) != 1 || o[0].Topic != "out" || o[0].Key != "k" || string(o[0].Payload) != "p" || o[0].OrderingKey != nil {
		t.Errorf("the echo of a batch in the caller's form is %+v", o)
	}
}

// A plugin.Message batch made of a Batch for an in-process handler has
// every field, the ordering key as bytes of its own.
func TestProcessLocalBatchGivesTheHandlerEveryField(t *testing.T) {
	own := ownForm{{ledger: 5, entry: 6, f: Fields{Topic: "t", Key: "k", OrderingKey: "ok", Payload: []byte("p"),
		Properties: map[string]string{"x": "y"}, PublishTime: time.UnixMilli(7), EventTime: time.UnixMilli(8),
		RedeliveryCount: 2, TraceParent: "tp", TraceState: "ts"}}}
	var gotMsg plugin.Message
	h := plugin.HandlerFunc(func(_ context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
		gotMsg = *batch[0]
		return nil
	})
	if _, err := ProcessLocalBatch(context.Background(), h, own); err != nil {
		t.Fatal(err)
	}
	f := own[0].f
	if gotMsg.ID != "5:6:-1:-1" || gotMsg.Topic != f.Topic || gotMsg.Key != f.Key || string(gotMsg.OrderingKey) != f.OrderingKey ||
		gotMsg.Properties["x"] != "y" || string(gotMsg.Payload) != "p" || !gotMsg.PublishTime.Equal(f.PublishTime) ||
		!gotMsg.EventTime.Equal(f.EventTime) || gotMsg.RedeliveryCount != 2 || gotMsg.TraceParent != "tp" || gotMsg.TraceState != "ts" {
		t.Errorf("the handler was given %+v", gotMsg)
	}
}
