package pool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pulsarwire"
)

// numbered gives n messages "m-0" to "m-(n-1)", then the end; with
// failAt >= 0 it fails there instead.
func numbered(n, failAt int) func(context.Context) (Message, bool, error) {
	i := 0
	return func(context.Context) (Message, bool, error) {
		switch {
		case i == failAt:
			return Message{}, false, errors.New("line 7: bad")
		case i >= n:
			return Message{}, false, nil
		}
		i++
		return Message{Payload: fmt.Appendf(nil, "m-%d", i-1)}, true, nil
	}
}

// Publish sends everything its source gives, through Wrap, and returns
// once the broker answered every message: the counts and the last id
// are those of the stored messages.
func TestPublishSendsTheSourceAndWaitsForEveryReceipt(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	topic := brokertest.TopicName(t)
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	progress := 0
	res, err := p.Publish(ctx, numbered(n, -1), PublishOptions{
		Wrap: func(m Message, done func(pulsarwire.MessageID, error)) (Message, func(pulsarwire.MessageID, error)) {
			m.Properties = map[string]string{"wrapped": "yes"}
			return m, done
		},
		Progress: func(r PublishResult) { progress = r.Sent },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != n || res.Acked != n || res.Failed != 0 || res.FirstErr != nil || progress != n {
		t.Fatalf("result %+v, progress %d: want %d sent and acknowledged", res, progress, n)
	}
	got := subscribeRaw(t, c, topic).wait(n, 30*time.Second)
	for i, m := range got {
		if m.Payload != fmt.Sprint("m-", i) || m.Properties["wrapped"] != "yes" {
			t.Fatalf("message %d arrived as %+v", i, m)
		}
	}
	if last := got[n-1].ID; res.LastID != last {
		t.Errorf("last id %s, the consumer's last is %s", res.LastID, last)
	}
}

// A source's error ends the run with that error, after the receipts of
// what was sent before it; a cancelled context ends it too, and the
// receipts of what was sent are still waited for.
func TestPublishStopsAtTheSourcesErrorAndAtTheContextsEnd(t *testing.T) {
	tg := newTarget(t)
	c := newClient(t, tg, Options{})
	ctx := brokertest.Context(t, time.Minute)
	p, err := c.Producer(ctx, brokertest.TopicName(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Publish(ctx, numbered(100, 40), PublishOptions{})
	if err == nil || err.Error() != "line 7: bad" {
		t.Fatalf("error %v, want the source's", err)
	}
	if res.Sent != 40 || res.Acked != 40 {
		t.Fatalf("result %+v, want 40 sent and acknowledged before the error", res)
	}

	cctx, cancel := context.WithCancel(ctx)
	res, err = p.Publish(cctx, numbered(1000, -1), PublishOptions{
		Rate: 1e6,
		Progress: func(r PublishResult) {
			if r.Sent == 25 {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 25 || res.Acked != 25 {
		t.Fatalf("result %+v, want the 25 sent before the cancel, acknowledged", res)
	}
}
