package interop

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// A message far larger than the broker's limit, split by the producer into
// chunks, comes back whole; a message over the limit without chunking is
// refused by the client, which learned the limit from the broker.
func TestChunkedAndOversizedMessages(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "chunks", Type: pulsar.Exclusive})
	chunked := newProducer(t, c, pulsar.ProducerOptions{
		Topic:               topic,
		DisableBatching:     true,
		EnableChunking:      true,
		ChunkMaxMessageSize: 100 << 10,
	})
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 6<<20) // over the 5 MiB default limit
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	small := []byte("after the big one")
	sendAll(ctx, t, chunked, 2, func(i int) *pulsar.ProducerMessage {
		if i == 0 {
			return &pulsar.ProducerMessage{Payload: big, Key: "big", Properties: map[string]string{"size": strconv.Itoa(len(big))}}
		}
		return &pulsar.ProducerMessage{Payload: small}
	})
	got := receiveN(ctx, t, cons, 2, true)
	if !bytes.Equal(got[0].Payload(), big) || got[0].Key() != "big" || got[0].Properties()["size"] != strconv.Itoa(len(big)) {
		t.Fatalf("chunked message: got %d bytes, key %q, properties %v; want %d bytes intact", len(got[0].Payload()), got[0].Key(), got[0].Properties(), len(big))
	}
	if !bytes.Equal(got[1].Payload(), small) {
		t.Fatalf("message after the chunked one: %q", got[1].Payload())
	}

	plain := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	_, err := plain.Send(ctx, &pulsar.ProducerMessage{Payload: big})
	if err == nil {
		t.Fatalf("a %d-byte message without chunking was accepted", len(big))
	}
	if !errors.Is(err, pulsar.ErrMessageTooLarge) && !strings.Contains(err.Error(), "MaxMessageSize") {
		t.Fatalf("a %d-byte message without chunking: %v, want ErrMessageTooLarge", len(big), err)
	}
	sendPlain(ctx, t, plain, 1, 0)
	checkSequence(t, receiveN(ctx, t, cons, 1, true), 0)
}

// On KeyShared the ordering key, when set, decides the consumer and the
// order, not the message key.
func TestKeySharedOrderingKey(t *testing.T) {
	const orderingKeys, perKey = 30, 30
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	consumers := make([]pulsar.Consumer, 2)
	for i := range consumers {
		consumers[i] = subscribe(t, c, pulsar.ConsumerOptions{
			Topic:            topic,
			SubscriptionName: "ordering",
			Type:             pulsar.KeyShared,
			Name:             fmt.Sprintf("consumer-%d", i),
		})
	}
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	sendAll(ctx, t, p, orderingKeys*perKey, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{
			OrderingKey: "ok-" + strconv.Itoa(i%orderingKeys),
			Key:         "k-" + strconv.Itoa(i), // unique: would spread a key's messages if it were used
			Payload:     []byte(strconv.Itoa(i / orderingKeys)),
		}
	})
	ch, _ := fanIn(ctx, t, consumers...)
	log := newKeyLog(pulsar.Message.OrderingKey)
	for i := 0; i < orderingKeys*perKey; i++ {
		d := next(ctx, t, ch, "a message")
		log.add(t, d)
		if ok := d.msg.OrderingKey(); len(log.owners[ok]) > 1 {
			t.Fatalf("ordering key %s went to more than one consumer: %v", ok, log.owners[ok])
		}
		consumers[d.who].Ack(d.msg)
	}
	if log.per[0] == 0 || log.per[1] == 0 {
		t.Fatalf("all ordering keys went to one consumer: %v", log.per)
	}
}

// Two producers may not share a name on one topic: the second is refused.
func TestProducerNameConflict(t *testing.T) {
	c := newClient(t)
	topic := brokertest.TopicName(t)
	name := "unique-" + brokertest.Name(t)
	newProducer(t, c, pulsar.ProducerOptions{Topic: topic, Name: name})
	start := time.Now()
	p, err := newClient(t).CreateProducer(pulsar.ProducerOptions{Topic: topic, Name: name, SendTimeout: 5 * time.Second})
	if err == nil {
		p.Close()
		t.Fatalf("a second producer named %s was accepted", name)
	}
	if !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("second producer named %s: %v, want ProducerBusy", name, err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// Typed messages with a JSON schema round-trip through the broker, and a
// consumer with the same schema decodes them.
func TestJSONSchemaRoundTrip(t *testing.T) {
	type order struct {
		ID    int     `json:"id"`
		Item  string  `json:"item"`
		Price float64 `json:"price"`
	}
	const def = `{"type":"record","name":"Order","namespace":"streamrun.interop","fields":[{"name":"id","type":"int"},{"name":"item","type":"string"},{"name":"price","type":"double"}]}`
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "typed", Schema: pulsar.NewJSONSchema(def, nil)})
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, Schema: pulsar.NewJSONSchema(def, nil)})
	sendAll(ctx, t, p, 10, func(i int) *pulsar.ProducerMessage {
		return &pulsar.ProducerMessage{Value: order{ID: i, Item: "item-" + strconv.Itoa(i), Price: float64(i) + 0.5}}
	})
	for i, m := range receiveN(ctx, t, cons, 10, true) {
		var o order
		if err := m.GetSchemaValue(&o); err != nil {
			t.Fatalf("message %d: decode: %v (payload %q)", i, err, m.Payload())
		}
		if want := (order{ID: i, Item: "item-" + strconv.Itoa(i), Price: float64(i) + 0.5}); o != want {
			t.Fatalf("message %d: %+v, want %+v", i, o, want)
		}
	}
}

// pulsar-client-go's access modes: a second Exclusive producer is
// refused as fenced (the client gives up on it at once); a
// WaitForExclusive one is created only once the exclusive one has left,
// and then publishes; a Shared one is refused while it holds the topic.
func TestProducerAccessModes(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "s"})
	first, err := c.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err != nil {
		t.Fatal(err)
	}
	sendAll(ctx, t, first, 1, func(int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte("first")} })
	_, err = newClient(t).CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeExclusive})
	if err == nil || !strings.Contains(err.Error(), "ProducerFenced") || !strings.Contains(err.Error(), "Topic has an existing exclusive producer: "+first.Name()) {
		t.Fatalf("second Exclusive producer: %v, want ProducerFenced naming %s", err, first.Name())
	}
	_, err = newClient(t).CreateProducer(pulsar.ProducerOptions{Topic: topic})
	if err == nil || !strings.Contains(err.Error(), "ProducerBusy") {
		t.Fatalf("Shared producer beside an exclusive one: %v, want ProducerBusy", err)
	}
	type made struct {
		p   pulsar.Producer
		err error
	}
	waited := make(chan made, 1)
	second := newClient(t)
	go func() {
		p, err := second.CreateProducer(pulsar.ProducerOptions{Topic: topic, ProducerAccessMode: pulsar.ProducerAccessModeWaitForExclusive})
		waited <- made{p, err}
	}()
	select {
	case m := <-waited:
		t.Fatalf("WaitForExclusive producer created beside the exclusive one: %v", m.err)
	case <-time.After(time.Second): // the absence under test
	}
	first.Close()
	var m made
	select {
	case m = <-waited:
	case <-ctx.Done():
		t.Fatal("WaitForExclusive producer not created after the exclusive one left")
	}
	if m.err != nil {
		t.Fatalf("WaitForExclusive producer: %v", m.err)
	}
	defer m.p.Close()
	sendAll(ctx, t, m.p, 1, func(int) *pulsar.ProducerMessage { return &pulsar.ProducerMessage{Payload: []byte("second")} })
	for i, want := range []string{"first", "second"} {
		if got := string(receiveN(ctx, t, cons, 1, true)[0].Payload()); got != want {
			t.Fatalf("message %d: %q, want %q", i, got, want)
		}
	}
}
