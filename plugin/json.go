package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Emit is one output of a JSON handler: Value is encoded as JSON into the
// payload of a message published to Topic.
type Emit[T any] struct {
	// Topic to publish to (required).
	Topic string
	// Key is the partition key, "" for none (it is not copied from the input).
	Key string
	// OrderingKey is the ordering key, nil for none.
	OrderingKey []byte
	// Properties of the new message, nil for none.
	Properties map[string]string
	// EventTime of the new message, zero for none.
	EventTime time.Time
	// Value becomes the payload, encoded with encoding/json.
	Value T
}

// JSON makes a MessageFunc of a function over decoded JSON payloads: each
// payload is decoded into an In with encoding/json, f is called with it and
// the message, and each Emit it returns is encoded into an Output.
//
// A payload that does not decode as an In, and a value that does not encode,
// are dead-lettered with the decoder's or encoder's error as the reason:
// no retry would change them. f's error is treated as MessageFunc treats
// errors (see there).
func JSON[In, Out any](f func(ctx context.Context, in In, m *Message) ([]Emit[Out], error)) MessageFunc {
	return func(ctx context.Context, m *Message) ([]Output, error) {
		var in In
		if err := json.Unmarshal(m.Payload, &in); err != nil {
			return nil, DeadLetter(fmt.Errorf("decode payload as %T: %w", in, err))
		}
		emits, err := f(ctx, in, m)
		if err != nil {
			return nil, err
		}
		outs := make([]Output, len(emits))
		for i, e := range emits {
			payload, err := json.Marshal(e.Value)
			if err != nil {
				return nil, DeadLetter(fmt.Errorf("encode output %d for %s: %w", i, e.Topic, err))
			}
			outs[i] = Output{
				Topic:       e.Topic,
				Key:         e.Key,
				OrderingKey: e.OrderingKey,
				Properties:  e.Properties,
				Payload:     payload,
				EventTime:   e.EventTime,
			}
		}
		return outs, nil
	}
}

// Configure makes a Handler whose real handler is built at Init from the
// pipeline's config: Init decodes the config's JSON into a C, strictly (an
// unknown field is an error naming it, so a typo in the pipeline file fails
// the start instead of being ignored), and calls newHandler with it. An
// absent config decodes as C's zero value. If the built handler implements
// Closer, Close reaches it.
func Configure[C any](newHandler func(ctx context.Context, cfg C) (Handler, error)) Handler {
	return &configured[C]{newHandler: newHandler}
}

type configured[C any] struct {
	newHandler func(ctx context.Context, cfg C) (Handler, error)
	mu         sync.Mutex
	h          Handler
}

func (c *configured[C]) Init(ctx context.Context, info Info) error {
	var cfg C
	if raw := bytes.TrimSpace(info.Config); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	h, err := c.newHandler(ctx, cfg)
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("config: the handler constructor returned no handler")
	}
	c.mu.Lock()
	c.h = h
	c.mu.Unlock()
	return nil
}

func (c *configured[C]) handler() Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.h
}

func (c *configured[C]) Process(ctx context.Context, w ResultWriter, batch []*Message) error {
	h := c.handler()
	if h == nil {
		return errors.New("Process before a successful Init")
	}
	return h.Process(ctx, w, batch)
}

func (c *configured[C]) Close(ctx context.Context) error {
	if cl, ok := c.handler().(Closer); ok {
		return cl.Close(ctx)
	}
	return nil
}
