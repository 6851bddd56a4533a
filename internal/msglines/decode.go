package msglines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/streamrun/streamrun/pool"
)

// Decoder makes a message of a line: as text, the payload with a key
// split off at KeySeparator, or with JSON as an object as Writer prints
// one. Template's key, ordering key and properties are every message's,
// unless its line says otherwise.
type Decoder struct {
	// JSON reads each line as an object as Writer prints one. Default
	// false: as text.
	JSON bool
	// KeySeparator splits a text line at its first occurrence: key, then
	// payload. Default "": the line is the payload.
	KeySeparator string
	// Template is what every message starts as.
	Template pool.Message
}

// Message is line as a message. The error says what is wrong with the
// line, not where it is.
func (d *Decoder) Message(line []byte) (pool.Message, error) {
	m := d.Template
	if !d.JSON {
		m.Payload = line
		if d.KeySeparator != "" {
			if k, v, ok := bytes.Cut(line, []byte(d.KeySeparator)); ok {
				m.Key, m.Payload = string(k), v
			}
		}
		return m, nil
	}
	var jm jsonMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jm); err != nil {
		return m, fmt.Errorf("want an object as consume --output json prints: %w", err)
	}
	if dec.More() {
		return m, errors.New("want one JSON object on the line, got more")
	}
	switch {
	case jm.Payload != nil && jm.PayloadBase64 != nil:
		return m, errors.New("payload and payload_base64 exclude each other")
	case jm.Payload != nil:
		m.Payload = []byte(*jm.Payload)
	default:
		m.Payload = jm.PayloadBase64
	}
	if jm.Key != "" {
		m.Key = jm.Key
	}
	if jm.OrderingKey != "" {
		m.OrderingKey = jm.OrderingKey
	}
	if len(jm.Properties) > 0 {
		props := maps.Clone(d.Template.Properties)
		if props == nil {
			props = map[string]string{}
		}
		maps.Copy(props, jm.Properties)
		m.Properties = props
	}
	if jm.EventTime != nil {
		m.EventTime = *jm.EventTime
	}
	return m, nil
}

// Messages is the lines of l as messages made by d, one at a time, for
// (*pool.Producer).Publish: at most limit when limit > 0, false at the
// end of the input or of ctx. A line d refuses ends them with an error
// naming the line and the input.
func (d *Decoder) Messages(l *Lines, limit int) func(context.Context) (pool.Message, bool, error) {
	n := 0
	return func(ctx context.Context) (pool.Message, bool, error) {
		if limit > 0 && n >= limit {
			return pool.Message{}, false, nil
		}
		line, ok, err := l.Next(ctx)
		if !ok {
			return pool.Message{}, false, err
		}
		m, err := d.Message(line.Text)
		if err != nil {
			return pool.Message{}, false, fmt.Errorf("line %d of %s: %w", line.N, l.name, err)
		}
		n++
		return m, true, nil
	}
}
