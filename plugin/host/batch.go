package host

import (
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// Batch is a batch of messages as Instance.ProcessBatch reads it: by
// index, while it encodes the batch for the plugin. A caller whose
// messages are in a form of its own (the runtime's, as a consumer
// received them) sends them so without making a plugin.Message of each:
// no id string, no copy. Messages is the Batch of plugin.Messages.
//
// A Batch is read during the call only, on the calling goroutine, and
// must not change meanwhile.
type Batch interface {
	// Len is the number of messages.
	Len() int
	// Fields sets f to message i's fields, its id apart. f's strings,
	// maps and slices may be the batch's own: the host only reads them,
	// and an output echoing the message (contract version 3's compact
	// answer) carries its key, properties and payload on as they are.
	Fields(i int, f *Fields)
	// AppendID appends message i's id, in its text form
	// ("ledger:entry:partition:batchIndex"), to b.
	AppendID(b []byte, i int) []byte
}

// StateBatch is a Batch of a pipeline that keeps keyed state: it carries
// the values of its messages' keys (each key once; a key without an entry
// has no value), sent with the batch.
type StateBatch interface {
	Batch
	State() []plugin.StateEntry
}

// Fields are a message's fields as the batch frame carries them to the
// plugin (plugin.Message's, but the id, which Batch.AppendID writes).
type Fields struct {
	Topic, Key, OrderingKey string
	Properties              map[string]string
	Payload                 []byte
	PublishTime, EventTime  time.Time
	RedeliveryCount         uint32
	TraceParent, TraceState string
}

// Messages is a Batch of plugin.Messages.
type Messages []*plugin.Message

func (ms Messages) Len() int { return len(ms) }

// Fields sets f from message i. The ordering key's string is m's bytes, not a copy (the host
// only reads it, during the call).
func (ms Messages) Fields(i int, f *Fields) {
	m := ms[i]
	*f = Fields{Topic: m.Topic, Key: m.Key, OrderingKey: wire.Str(m.OrderingKey), Properties: m.Properties,
		Payload: m.Payload, PublishTime: m.PublishTime, EventTime: m.EventTime,
		RedeliveryCount: m.RedeliveryCount, TraceParent: m.TraceParent, TraceState: m.TraceState}
}

func (ms Messages) AppendID(b []byte, i int) []byte { return append(b, ms[i].ID...) }

// messageID is message i's id as a string (for errors, which are rare).
func messageID(b Batch, i int) string { return string(b.AppendID(nil, i)) }

// pluginMessages makes plugin.Messages of b, for a handler in the host's
// process (ProcessLocalBatch).
func pluginMessages(b Batch) []*plugin.Message {
	if ms, ok := b.(Messages); ok {
		return ms
	}
	n := b.Len()
	msgs := make([]plugin.Message, n)
	out := make([]*plugin.Message, n)
	var f Fields
	var id [48]byte // room for most ids' text; append grows past it
	for i := range msgs {
		b.Fields(i, &f)
		m := &msgs[i]
		*m = plugin.Message{ID: string(b.AppendID(id[:0], i)), Topic: f.Topic, Key: f.Key,
			Properties: f.Properties, Payload: f.Payload, PublishTime: f.PublishTime, EventTime: f.EventTime,
			RedeliveryCount: f.RedeliveryCount, TraceParent: f.TraceParent, TraceState: f.TraceState}
		if f.OrderingKey != "" {
			m.OrderingKey = []byte(f.OrderingKey)
		}
		out[i] = m
	}
	return out
}
