package plugin

import (
	"context"
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
	// In an incremental window (window.mode: incremental), they are the
	// messages an add step brings, in the order they came, and none when
	// the window fires.
	Messages []WindowMessage
	// Accumulator is an incremental window's accumulator: the bytes the
	// handler's add steps returned so far (nil before the first). When
	// the window fires, it is the window.
	Accumulator []byte
	// Add says this is an incremental window's add step. With Fire set
	// too (contract version 5, IncrementalWindow), it is an add and then
	// the window's fire, in one message.
	Add bool
	// Replaces are the starts of sessions that fired before and that
	// this session took in: a message within the allowed lateness came
	// before a fired session's start, or between two sessions, and
	// joined them. Their results are this one's now (a consumer keyed
	// on key and start drops them). Fire goes on from the most fired of
	// them. Empty for tumbling and sliding windows.
	Replaces []time.Time
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
// window (its pipeline has no window block). It reads both forms the
// host sends (docs/contract.md §6, windows): JSON, and contract version 5's
// compact form of an incremental window, whose messages' payloads and
// accumulator share m.Payload (copy them to keep them past the call).
func ReadWindow(m *Message) (w *Window, ok bool, err error) {
	if _, is := m.Properties[propertyWindowStart]; !is {
		return nil, false, nil
	}
	var p windowJSON
	decode := decodeWindow
	if len(m.Payload) > 0 && m.Payload[0] == compactWindowForm {
		// Contract version 5's compact form of an incremental window.
		decode = decodeCompactWindow
	}
	if err := decode(m.Payload, &p); err != nil {
		return nil, true, fmt.Errorf("window message %s: %w", m.ID, err)
	}
	w = &Window{Key: p.Key, Start: time.UnixMilli(p.Start).UTC(), End: time.UnixMilli(p.End).UTC(), Fire: p.Fire,
		Messages: p.Messages, Accumulator: p.Accumulator, Add: p.Add}
	for _, s := range p.Replaces {
		w.Replaces = append(w.Replaces, time.UnixMilli(s).UTC())
	}
	return w, true, nil
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

// IncrementalWindow is a Handler for a pipeline whose windows are
// incremental (window.mode: incremental, docs/pipelines.md,
// "Incremental windows"): the host keeps one accumulator a window, which
// Add updates with each batch of the window's messages, and hands it to
// Fire when the window closes. A window due with messages waiting comes
// as one message (contract version 5): Add, then Fire with the
// accumulator Add returned; its answer is that accumulator and Fire's
// outputs, and an error of either leaves the accumulator as it was (a
// retry makes both again; a dead letter is the add's, and the window
// fires later with the accumulator it had). A message that is neither
// is dead-lettered.
type IncrementalWindow struct {
	// Add returns the accumulator with w.Messages added to
	// w.Accumulator (nil before the first add). The host keeps what it
	// returns, and acknowledges the messages, once the accumulator is in
	// its changelog; an error retries or dead-letters the step (and its
	// messages) as MessageFunc's does for a message, leaving the
	// accumulator as it was.
	Add func(ctx context.Context, w *Window) ([]byte, error)
	// Fire returns the outputs of a closed window, whose accumulator is
	// w.Accumulator. With allowed lateness, it is called again (Fire 2,
	// 3…) with the accumulator grown by the late messages.
	Fire func(ctx context.Context, w *Window) ([]Output, error)
}

// Process calls Add or Fire for each message of the batch.
func (h IncrementalWindow) Process(ctx context.Context, w ResultWriter, batch []*Message) error {
	return MessageFunc(func(ctx context.Context, m *Message) ([]Output, error) {
		win, ok, err := ReadWindow(m)
		if !ok {
			return nil, DeadLetter(fmt.Errorf("message %s is not a window: is the pipeline's window block set?", m.ID))
		}
		if err != nil {
			return nil, DeadLetter(err)
		}
		if !win.Add {
			return h.Fire(ctx, win)
		}
		acc, err := h.Add(ctx, win)
		if err != nil {
			return nil, err
		}
		var outs []Output
		if win.Fire > 0 {
			// An add and the fire in one message (contract version 5):
			// the fire gets the accumulator the add made, no messages.
			fire := *win
			fire.Add, fire.Messages, fire.Accumulator = false, []WindowMessage{}, acc
			if outs, err = h.Fire(ctx, &fire); err != nil {
				return nil, err // the accumulator stays as it was: both are made again
			}
		}
		// The accumulator goes back as the add's keyed state
		// (docs/contract.md §6): an empty one is no accumulator.
		if err := m.State().Put(acc); err != nil {
			return nil, DeadLetter(fmt.Errorf("window %s at %d: %w", win.Key, win.Start.UnixMilli(), err))
		}
		return outs, nil
	}).Process(ctx, w, batch)
}
