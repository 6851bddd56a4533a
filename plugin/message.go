package plugin

import (
	"fmt"
	"time"
)

// Message is one message from a subscription, as a handler sees it. The
// host fills it from what the broker delivered; a handler must not keep a
// Message, or slices inside it, after its Process call returns. In a plugin
// process the slices of a batch's messages (Payload, OrderingKey) share the
// buffer the batch was received in, which the SDK reads the next batches
// into once this one is answered: copy a slice to keep it. Strings stay
// valid: they are copies, several messages' in one buffer, so a kept string
// keeps that buffer in memory (strings.Clone keeps only the string).
type Message struct {
	// ID is the message id in its text form "ledger:entry:partition:batchIndex".
	ID string
	// Topic is the full name of the topic it was read from
	// (persistent://tenant/ns/name, with -partition-N for a partition).
	Topic string
	// Key is the partition key, "" when the message has none.
	Key string
	// OrderingKey is the ordering key, nil when the message has none.
	OrderingKey []byte
	// Properties are the message's properties, nil when there are none.
	Properties map[string]string
	// Payload is the message's body.
	Payload []byte
	// PublishTime is when the broker received the message (millisecond precision).
	PublishTime time.Time
	// EventTime is the time the producer set, zero when it set none.
	EventTime time.Time
	// RedeliveryCount is how many times the broker delivered the message
	// before this delivery.
	RedeliveryCount uint32
	// TraceParent and TraceState are the W3C trace context of the message's
	// creation ("" when there is none).
	TraceParent string
	TraceState  string

	// index is the message's position in its batch, set by the SDK so that
	// a ResultWriter can find it in O(1).
	index int
	// state is the batch's keyed state, nil when the pipeline keeps none.
	state *batchState
}

// Index is the message's position in the batch it came in.
func (m *Message) Index() int { return m.index }

// Output is a message a handler asks the host to publish. The host publishes
// it through the process's shared producer for Topic and acknowledges the
// input message it belongs to only after every one of that input's outputs
// has its send receipt (at-least-once).
type Output struct {
	// Topic to publish to (required).
	Topic string
	// Key is the partition key, "" for none.
	Key string
	// OrderingKey is the ordering key, nil for none.
	OrderingKey []byte
	// Properties of the new message, nil for none.
	Properties map[string]string
	// Payload of the new message.
	Payload []byte
	// EventTime of the new message, zero for none.
	EventTime time.Time
	// TraceParent and TraceState are the W3C trace context of the work
	// that made the output, the parent of the span that publishes it.
	// When they are "", the output follows its input's trace: the SDK
	// sets them to the handler's span when the input is in that span's
	// trace (the batch's first traced message, or every message of a
	// batch none of whose messages had a context), and the host gives the
	// others their input's context (docs/telemetry.md). Set them to nest
	// the publishing under a span of your own. The published message
	// carries the context of that span, not these.
	TraceParent string
	TraceState  string
}

// Outcome says what the host does with an input message after the handler
// is done with it.
type Outcome int

const (
	// OutcomeAck publishes the message's outputs, then acknowledges it. It
	// is what a message gets when the handler says nothing else about it.
	OutcomeAck Outcome = iota + 1
	// OutcomeRetry negatively acknowledges the message so the broker delivers it
	// again, after Result.RetryDelay when that is set, else after the
	// pipeline's error policy. Its outputs are discarded.
	OutcomeRetry
	// OutcomeDeadLetter sends the message to the dead-letter topic with
	// Result.Reason and acknowledges it. Its outputs are discarded.
	OutcomeDeadLetter
	// OutcomeDrop acknowledges the message without publishing anything; it is
	// counted as dropped. Its outputs are discarded.
	OutcomeDrop
)

func (o Outcome) String() string {
	switch o {
	case OutcomeAck:
		return "ack"
	case OutcomeRetry:
		return "retry"
	case OutcomeDeadLetter:
		return "dead-letter"
	case OutcomeDrop:
		return "drop"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the host's view of the handler's answer for one input message.
type Result struct {
	Outcome Outcome
	// RetryDelay is the wanted redelivery delay for OutcomeRetry; 0 leaves it to
	// the pipeline's error policy.
	RetryDelay time.Duration
	// Reason says why, for Retry, DeadLetter and Drop.
	Reason string
	// Outputs to publish before acknowledging; only ever set for OutcomeAck.
	Outputs []Output
	// State is the change to the value under the message's key, written
	// to the pipeline's changelog before the message is acknowledged;
	// nil for none, and only ever set for OutcomeAck (see State).
	State *StateChange
}
