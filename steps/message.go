package steps

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Message is what steps see of a message and what a map step changes.
// The caller fills it from the message received (or, after a handler,
// from an output); steps replace Payload, Key, OrderingKey and EventTime
// with new values and never write into Payload's array or the
// Properties map they were given: a map step that sets a property
// makes a new map.
type Message struct {
	Payload     []byte
	Key         string
	OrderingKey string
	Properties  map[string]string
	Topic       string
	PublishTime time.Time
	// EventTime is zero when the producer set none.
	EventTime time.Time
	// ID gives the message id's text, asked for only by an expression
	// that reads message_id.
	ID              fmt.Stringer
	RedeliveryCount uint32
}

// activation resolves an expression's variables from the message being
// evaluated, making its text and JSON only when an expression reads
// them, once per payload.
type activation struct {
	m *Message
	// The payload's text and JSON, made for the payload held in parsed
	// (by its array and length): a map of the payload makes them anew.
	parsedOf []byte
	text     ref.Val
	json     ref.Val
	adapter  types.Adapter
}

var _ interpreter.Activation = (*activation)(nil)

func (a *activation) Parent() interpreter.Activation { return nil }

func (a *activation) ResolveName(name string) (any, bool) {
	m := a.m
	switch name {
	case VarPayload:
		return types.Bytes(m.Payload), true
	case VarText:
		a.fresh()
		if a.text == nil {
			if !utf8.Valid(m.Payload) {
				a.text = types.NewErr("the payload is not UTF-8 text")
			} else {
				a.text = types.String(m.Payload)
			}
		}
		return a.text, true
	case VarJSON:
		a.fresh()
		if a.json == nil {
			a.json = a.decodeJSON()
		}
		return a.json, true
	case VarKey:
		return types.String(m.Key), true
	case VarOrderingKey:
		return types.String(m.OrderingKey), true
	case VarProperties:
		return types.NewStringStringMap(a.adapter, m.Properties), true
	case VarTopic:
		return types.String(m.Topic), true
	case VarPublishTime:
		return types.Timestamp{Time: m.PublishTime.UTC()}, true
	case VarEventTime:
		if m.EventTime.IsZero() {
			return types.Timestamp{Time: time.Unix(0, 0).UTC()}, true
		}
		return types.Timestamp{Time: m.EventTime.UTC()}, true
	case VarMessageID:
		if m.ID == nil {
			return types.String(""), true
		}
		return types.String(m.ID.String()), true
	case VarRedeliveryCount:
		return types.Int(m.RedeliveryCount), true
	}
	return nil, false
}

// fresh forgets the text and JSON made of an earlier payload.
func (a *activation) fresh() {
	p := a.m.Payload
	if len(p) != len(a.parsedOf) || (len(p) > 0 && &p[0] != &a.parsedOf[0]) {
		a.parsedOf, a.text, a.json = p, nil, nil
	}
}

// reset points a at m, forgetting what it made of the last message.
func (a *activation) reset(m *Message) {
	a.m, a.parsedOf, a.text, a.json = m, nil, nil, nil
}

// decodeJSON is the payload as CEL reads JSON, or the error that it is
// not JSON.
func (a *activation) decodeJSON() ref.Val {
	var v any
	if err := json.Unmarshal(a.m.Payload, &v); err != nil {
		return types.NewErr("the payload is not JSON: %v", err)
	}
	return a.adapter.NativeToValue(v)
}
