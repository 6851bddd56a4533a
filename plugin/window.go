package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Window is a closed window of a pipeline with a window block
// (docs/pipelines.md, "Windows"): one key's messages between Start
// (included) and End (excluded) in the time the pipeline places them
// by. The host hands it to the handler as one message, whose payload
// ReadWindow decodes.
type Window struct {
	// Key is the key whose messages the window holds.
	Key string
	// Start and End bound the window; End is excluded.
	Start, End time.Time
	// Fire is 1 the first time the window is handed over, 2, 3… when
	// messages within the allowed lateness came for it since: each time
	// with all its messages.
	Fire int
	// Messages are the window's messages, in the order of their Time.
	Messages []WindowMessage
}

// WindowMessage is one message of a window.
type WindowMessage struct {
	ID         string            `json:"id"`
	Topic      string            `json:"topic"`
	Key        string            `json:"key"`
	Payload    []byte            `json:"payload"`
	Properties map[string]string `json:"properties,omitempty"`
	// Time is the time the window placed it by, in Unix milliseconds.
	Time int64 `json:"time"`
	// EventTime and PublishTime are the message's, in Unix
	// milliseconds; 0 when it had none.
	EventTime   int64 `json:"event_time,omitempty"`
	PublishTime int64 `json:"publish_time,omitempty"`
}

// The properties of a window's message (the host's
// runtime.PropertyWindowStart and the others).
const (
	propertyWindowStart = "streamrun-window-start"
	propertyWindowEnd   = "streamrun-window-end"
)

// ReadWindow decodes the window m carries; ok is false when m is not a
// window (its pipeline has no window block).
func ReadWindow(m *Message) (w *Window, ok bool, err error) {
	if _, is := m.Properties[propertyWindowStart]; !is {
		return nil, false, nil
	}
	var p struct {
		Key      string          `json:"key"`
		Start    int64           `json:"start"`
		End      int64           `json:"end"`
		Fire     int             `json:"fire"`
		Messages []WindowMessage `json:"messages"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return nil, true, fmt.Errorf("window message %s: %w", m.ID, err)
	}
	return &Window{Key: p.Key, Start: time.UnixMilli(p.Start).UTC(), End: time.UnixMilli(p.End).UTC(), Fire: p.Fire,
		Messages: p.Messages}, true, nil
}

// WindowFunc is a Handler for a pipeline with a window block: it is
// called once per closed window, and returns the outputs to publish for
// it. Its error says what happens to the window as MessageFunc's does
// for a message (a retry hands the window over again; a dead letter
// sends the window's message to the dead-letter topic). A message that
// is not a window is dead-lettered.
type WindowFunc func(ctx context.Context, w *Window) ([]Output, error)

// Process calls f for each window of the batch.
func (f WindowFunc) Process(ctx context.Context, w ResultWriter, batch []*Message) error {
	return MessageFunc(func(ctx context.Context, m *Message) ([]Output, error) {
		win, ok, err := ReadWindow(m)
		if !ok {
			return nil, DeadLetter(fmt.Errorf("message %s is not a window: is the pipeline's window block set?", m.ID))
		}
		if err != nil {
			return nil, DeadLetter(err)
		}
		return f(ctx, win)
	}).Process(ctx, w, batch)
}
