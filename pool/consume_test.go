package pool

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/connpool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// received is one message as a consumer saw it.
type received struct {
	ID          pulsarwire.MessageID
	Payload     string
	Key         string
	OrderingKey string
	Properties  map[string]string
	EventTime   uint64
	SequenceID  uint64
	Producer    string
	// EntryKey is the partition key of the entry's MessageMetadata: what
	// a KeyShared dispatcher routes the whole entry by.
	EntryKey string
}

// rawConsumer reads a topic through the connection layer only
// (connpool's Conn, RegisterConsumer, Request, Send): what package
// subscribe builds on. It subscribes Exclusive from the earliest message with a fresh
// subscription and grants permits generously.
type rawConsumer struct {
	t      *testing.T
	conn   *connpool.Conn
	id     uint64
	topic  string
	mu     sync.Mutex
	msgs   []received
	got    chan struct{}
	closed chan error
	codecs pulsarwire.Codecs
}

func subscribeRaw(t *testing.T, c *Client, topic string) *rawConsumer {
	t.Helper()
	ctx := brokertest.Context(t, 30*time.Second)
	rc := &rawConsumer{t: t, topic: topic, id: c.conns().NewConsumerID(), got: make(chan struct{}, 1), closed: make(chan error, 1)}
	err := c.own().retry(ctx, "subscribe "+topic, func(ctx context.Context) error {
		conn, err := c.conns().Conn(ctx, topic)
		if err != nil {
			return err
		}
		if err := conn.RegisterConsumer(rc.id, rc); err != nil {
			return err
		}
		_, err = conn.Request(ctx, pulsarwire.Wrap(&pb.CommandSubscribe{
			Topic:           proto.String(topic),
			Subscription:    proto.String(fmt.Sprintf("test-%d", time.Now().UnixNano())),
			SubType:         pb.CommandSubscribe_Exclusive.Enum(),
			ConsumerId:      proto.Uint64(rc.id),
			InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
		}))
		if err != nil {
			conn.UnregisterConsumer(rc.id)
			return err
		}
		rc.conn = conn
		return conn.Send(pulsarwire.Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(rc.id), MessagePermits: proto.Uint32(1 << 20)}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rc.conn.UnregisterConsumer(rc.id)
		rc.codecs.Close()
	})
	return rc
}

func (rc *rawConsumer) HandleFrame(f pulsarwire.Frame, err error) {
	if f.Cmd.GetType() != pb.BaseCommand_MESSAGE {
		return
	}
	if err != nil {
		rc.t.Errorf("message with a bad checksum: %v", err)
		return
	}
	id := pulsarwire.MessageIDFromProto(f.Cmd.GetMessage().GetMessageId())
	md := f.Metadata
	payload := f.Payload
	if md.GetCompression() != pb.CompressionType_NONE {
		rc.mu.Lock()
		payload, err = rc.codecs.Decompress(md.GetCompression(), nil, payload, int(md.GetUncompressedSize()), 10<<20)
		rc.mu.Unlock()
		if err != nil {
			rc.t.Errorf("decompress: %v", err)
			return
		}
	}
	var out []received
	if md.NumMessagesInBatch == nil {
		r := received{ID: id, Payload: string(payload), Key: md.GetPartitionKey(), OrderingKey: string(md.GetOrderingKey()),
			EventTime: md.GetEventTime(), SequenceID: md.GetSequenceId(), Producer: md.GetProducerName(), Properties: map[string]string{},
			EntryKey: md.GetPartitionKey()}
		for _, kv := range md.GetProperties() {
			r.Properties[kv.GetKey()] = kv.GetValue()
		}
		out = append(out, r)
	} else {
		msgs, err := pulsarwire.SplitBatch(payload, int(md.GetNumMessagesInBatch()))
		if err != nil {
			rc.t.Errorf("split batch: %v", err)
			return
		}
		for i, m := range msgs {
			mid := id
			mid.BatchIndex, mid.BatchSize = int32(i), int32(len(msgs))
			r := received{ID: mid, Payload: string(m.Payload), Key: m.Meta.GetPartitionKey(), OrderingKey: string(m.Meta.GetOrderingKey()),
				EventTime: m.Meta.GetEventTime(), SequenceID: m.Meta.GetSequenceId(), Producer: md.GetProducerName(), Properties: map[string]string{},
				EntryKey: md.GetPartitionKey()}
			for _, kv := range m.Meta.GetProperties() {
				r.Properties[kv.GetKey()] = kv.GetValue()
			}
			out = append(out, r)
		}
	}
	rc.mu.Lock()
	rc.msgs = append(rc.msgs, out...)
	rc.mu.Unlock()
	select {
	case rc.got <- struct{}{}:
	default:
	}
}

func (rc *rawConsumer) ConnectionClosed(err error) {
	select {
	case rc.closed <- err:
	default:
	}
}

// wait returns the first n messages, failing the test if they do not all
// arrive within d.
func (rc *rawConsumer) wait(n int, d time.Duration) []received {
	rc.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		rc.mu.Lock()
		have := len(rc.msgs)
		rc.mu.Unlock()
		if have >= n {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			return append([]received(nil), rc.msgs[:n]...)
		}
		select {
		case <-rc.got:
		case err := <-rc.closed:
			rc.t.Fatalf("consumer's connection closed after %d of %d messages: %v", have, n, err)
		case <-deadline.C:
			rc.t.Fatalf("%d of %d messages after %s", have, n, d)
		}
	}
}

// all returns every message received so far.
func (rc *rawConsumer) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.msgs...)
}
