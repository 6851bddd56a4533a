package subscribe

import (
	"context"
	"maps"
	"sync"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Properties the dead-letter copy of a message carries, as the Java
// client names them.
const (
	// PropertyRealTopic is the topic (or partition) the message came from.
	PropertyRealTopic = "REAL_TOPIC"
	// PropertyOriginMessageID is the message's id there.
	PropertyOriginMessageID = "ORIGIN_MESSAGE_ID"
)

// DeadLetterTopic is the dead-letter topic of a message of topic (a
// partition counts as its partitioned topic) read by subscription:
// "<topic>-<subscription>-DLQ", as the Java and Go clients name it.
func DeadLetterTopic(topic, subscription string) string {
	if t, err := pulsarwire.ParseTopic(topic); err == nil {
		_, base := t.PartitionIndex()
		topic = base.String()
	}
	return topic + "-" + subscription + "-DLQ"
}

// DeadLetter is m's dead-letter copy: its payload, keys, event time and
// properties, with REAL_TOPIC and ORIGIN_MESSAGE_ID added, and extra
// (more properties, such as a reason).
func DeadLetter(m *Message, extra map[string]string) pool.Message {
	props := make(map[string]string, len(m.Properties)+2+len(extra))
	maps.Copy(props, m.Properties)
	props[PropertyRealTopic] = m.Topic
	props[PropertyOriginMessageID] = m.ID.String()
	maps.Copy(props, extra)
	return pool.Message{
		Payload:     m.Payload,
		Key:         m.Key,
		OrderingKey: m.OrderingKey,
		Properties:  props,
		EventTime:   m.EventTime,
	}
}

// deadLetters publishes messages delivered too many times to their
// dead-letter topic, through the client's shared producers, and
// acknowledges each once its copy is receipted (a failed publish nacks
// it, so it comes back and is tried again).
type deadLetters struct {
	c      *Consumer
	policy DeadLetterPolicy
	kick   chan struct{}

	mu    sync.Mutex
	items []entry
}

func (d *deadLetters) add(m entry) {
	d.mu.Lock()
	d.items = append(d.items, m)
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *deadLetters) topic(m *Message) string {
	if d.policy.Topic != "" {
		return d.policy.Topic
	}
	return DeadLetterTopic(m.pc.base, d.c.opts.Subscription)
}

func (d *deadLetters) run() {
	c := d.c
	var codecs pulsarwire.Codecs
	defer codecs.Close()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-d.kick:
		}
		d.mu.Lock()
		items := d.items
		d.items = nil
		d.mu.Unlock()
		for i := range items {
			e := &items[i]
			// The entry's messages were counted as taken when it arrived.
			if !e.s.pc.current(e.s.gen) {
				continue // its session is gone: it comes again
			}
			p, err := c.split(e, &codecs)
			if err != nil {
				c.unreadable(e, err, 0)
				continue
			}
			for j := range p.msgs {
				d.send(&p.msgs[j])
			}
		}
	}
}

// send publishes m's copy and acknowledges m once it is receipted.
func (d *deadLetters) send(m *Message) {
	c := d.c
	topic := d.topic(m)
	c.log.Info("sending a message to the dead-letter topic", "topic", m.Topic, "id", m.ID, "deliveries", m.RedeliveryCount+1, "dead_letter_topic", topic)
	c.client.PublishAsync(c.ctx, topic, DeadLetter(m, nil), func(_ pulsarwire.MessageID, err error) {
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("publishing to the dead-letter topic failed; the message comes back", "topic", topic, "err", err)
				c.Nack(m)
			}
			return
		}
		c.ack(context.Background(), m, false)
	})
}
