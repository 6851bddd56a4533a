package msglines

import (
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/streamrun/streamrun/subscribe"
)

// Writer prints one line per message: as text, its id, key, properties
// and quoted payload; as JSON, an object a Decoder reads back.
type Writer struct {
	w    io.Writer
	json bool
	buf  []byte
}

// NewWriter writes to w, as JSON when json is true.
func NewWriter(w io.Writer, json bool) *Writer {
	return &Writer{w: w, json: json}
}

// jsonMessage is a message as a JSON line. A payload that is
// not UTF-8 text is given in base64 as payload_base64 instead.
type jsonMessage struct {
	ID              string            `json:"id"`
	Topic           string            `json:"topic"`
	Key             string            `json:"key,omitempty"`
	OrderingKey     string            `json:"ordering_key,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	Payload         *string           `json:"payload,omitempty"`
	PayloadBase64   []byte            `json:"payload_base64,omitempty"`
	PublishTime     time.Time         `json:"publish_time"`
	EventTime       *time.Time        `json:"event_time,omitempty"`
	RedeliveryCount uint32            `json:"redelivery_count,omitempty"`
}

// Write prints m's line.
func (lw *Writer) Write(m *subscribe.Message) error {
	if lw.json {
		jm := jsonMessage{
			ID: m.ID.String(), Topic: m.Topic, Key: m.Key, OrderingKey: m.OrderingKey,
			Properties: m.Properties, PublishTime: m.PublishTime, RedeliveryCount: m.RedeliveryCount,
		}
		if utf8.Valid(m.Payload) {
			s := string(m.Payload)
			jm.Payload = &s
		} else {
			jm.PayloadBase64 = m.Payload
		}
		if !m.EventTime.IsZero() {
			jm.EventTime = &m.EventTime
		}
		b, err := json.Marshal(jm)
		if err != nil {
			return err
		}
		_, err = lw.w.Write(append(b, '\n'))
		return err
	}
	// id key=... properties=k=v,... payload="..." (quoted, so that a line
	// is a message whatever its bytes).
	b := lw.buf[:0]
	b = append(b, m.ID.String()...)
	b = append(b, " key="...)
	b = strconv.AppendQuote(b, m.Key)
	if len(m.Properties) > 0 {
		b = append(b, " properties="...)
		for i, k := range slices.Sorted(maps.Keys(m.Properties)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, m.Properties[k]...)
		}
	}
	b = append(b, " payload="...)
	b = strconv.AppendQuote(b, string(m.Payload))
	b = append(b, '\n')
	lw.buf = b
	_, err := lw.w.Write(b)
	return err
}
