package runtime

import (
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// callBatch is the messages of a call to an instance, as the instance reads
// them (host.Batch): a plugin process's batch is encoded straight from
// the received messages, with no plugin.Message made of each and no id
// string (the id's text is appended to the frame); an in-process handler
// gets plugin.Messages made of them (host.ProcessLocalBatch).
type callBatch []*item

func (its callBatch) Len() int { return len(its) }

func (its callBatch) Fields(i int, f *host.Fields) {
	it := its[i]
	m := it.m
	if sm := it.sm; sm != nil {
		// As the steps before the handler left it.
		*f = host.Fields{Topic: m.Topic, Key: sm.Key, OrderingKey: sm.OrderingKey, Properties: sm.Properties,
			Payload: sm.Payload, PublishTime: m.PublishTime, EventTime: sm.EventTime, RedeliveryCount: m.RedeliveryCount}
		f.TraceParent, f.TraceState = traceContext(m)
		return
	}
	*f = host.Fields{Topic: m.Topic, Key: m.Key, OrderingKey: m.OrderingKey, Properties: m.Properties,
		Payload: m.Payload, PublishTime: m.PublishTime, EventTime: m.EventTime, RedeliveryCount: m.RedeliveryCount}
	f.TraceParent, f.TraceState = traceContext(m)
}

func (its callBatch) AppendID(b []byte, i int) []byte { return its[i].m.ID.AppendText(b) }

// id is it's message id in its text form, for logs, traces and the
// dead-letter topic (which are not on every message's way).
func (it *item) id() string { return it.m.ID.String() }

// traceContext is the W3C trace context m was created in, from its
// properties ("" when there is none).
func traceContext(m *subscribe.Message) (parent, state string) {
	if m.Properties == nil {
		return "", ""
	}
	return m.Properties[msgtrace.PropertyTraceParent], m.Properties[msgtrace.PropertyTraceState]
}

// retryKeyOf names m for the host's own count of its retries: by its id
// as numbers, so that settling a message (every message) makes no string.
func retryKeyOf(m *subscribe.Message) retryKey {
	id := m.ID
	id.BatchSize = 0 // not part of the identity
	return retryKey{topic: m.Topic, id: id}
}
