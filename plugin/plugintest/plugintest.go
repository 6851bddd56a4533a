// Package plugintest runs a plugin.Handler in the test's own process and
// reads back what it answered: each message's outcome and reason, the
// outputs the host would publish, and the changes to keyed state (seeded
// with Options.State, kept across batches as the host keeps it, read
// back with Handler.State). It is for a handler's unit tests
// (go test), beside `streamrun test`, which runs the built plugin in a
// pipeline on a broker.
//
// The handler is called exactly as a plugin process calls it
// (plugin.ProcessLocal): a message it says nothing about is acknowledged,
// outputs go only with an ack, a returned error retries the whole batch,
// and a panic comes back as a *plugin.PanicError naming the message (in a
// plugin process, a crash). Init gets the config as the host hands it,
// JSON; Close runs when the test ends.
//
//	func TestUppercase(t *testing.T) {
//		h := plugintest.New(t, newHandler(), plugintest.Options{Config: map[string]any{"output": "out"}})
//		a := h.Process(plugintest.Text("hello"))
//		if got := string(a.Outputs()[0].Payload); got != "HELLO" {
//			t.Errorf("payload %q, want HELLO", got)
//		}
//	}
package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

// Options say how New starts a handler and what Process gives it. The
// zero value is an instance of pipeline "test" without config.
type Options struct {
	// Config is the pipeline's handler config, handed to Init as JSON: a
	// value is encoded with encoding/json; a json.RawMessage, []byte or
	// string is taken as JSON text as it is. Default nil: no config (Init
	// gets a nil Info.Config, as from a pipeline file without one).
	Config any
	// Pipeline and InstanceID are what Init is told. Default "test" and
	// "0".
	Pipeline   string
	InstanceID string
	// Topic is the topic of messages that name none. Default
	// DefaultTopic.
	Topic string
	// Timeout is each Process call's deadline, as the host's
	// handler.timeout. Default 30 s.
	Timeout time.Duration
	// State, when not nil, tests the handler as in a pipeline with a
	// state block: it is the keyed state to start from, key to value
	// (an empty map: no key has a value yet). Each batch's messages see
	// their keys' values (plugin.Message.State), and the change of each
	// acknowledged message is kept for the next batch, as the host keeps
	// it; Handler.State reads it back. New copies the map. Default nil: a
	// pipeline without state, where State().Put fails with
	// plugin.ErrNoState.
	State map[string][]byte
}

// DefaultTopic is Options.Topic's default.
const DefaultTopic = "persistent://public/default/in"

func (o Options) withDefaults() Options {
	if o.Pipeline == "" {
		o.Pipeline = "test"
	}
	if o.InstanceID == "" {
		o.InstanceID = "0"
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return o
}

// Handler is a handler under test, initialised.
type Handler struct {
	h    plugin.Handler
	opts Options

	mu     sync.Mutex
	entry  int // the next message's entry id
	closed bool
	// state is the keyed state as the host keeps it, nil without.
	state map[string][]byte
}

// New starts h (Start) and fails the test when its Init fails. Close
// runs when the test ends, and an error it returns fails the test.
func New(t testing.TB, h plugin.Handler, o Options) *Handler {
	t.Helper()
	th, err := Start(h, o)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	t.Cleanup(func() {
		if err := th.Close(); err != nil {
			t.Errorf("plugintest: %v", err)
		}
	})
	return th
}

// Start runs h's Init (when it is a plugin.Initializer) with o's config,
// as the host does when it starts a plugin, and returns h ready for
// Process, or Init's error. The caller calls Close when done.
func Start(h plugin.Handler, o Options) (*Handler, error) {
	o = o.withDefaults()
	if err := Init(h, o); err != nil {
		return nil, fmt.Errorf("Init: %w", err)
	}
	th := &Handler{h: h, opts: o}
	if o.State != nil {
		th.state = make(map[string][]byte, len(o.State))
		for k, v := range o.State {
			th.state[k] = bytes.Clone(v)
		}
	}
	return th, nil
}

// State is a copy of the keyed state as it stands after the batches so
// far: the values of Options.State with every acknowledged message's
// change applied. It is nil when Options.State was.
func (h *Handler) State() map[string][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == nil {
		return nil
	}
	c := make(map[string][]byte, len(h.state))
	for k, v := range h.state {
		c[k] = bytes.Clone(v)
	}
	return c
}

// Close runs the handler's Close (when it is a plugin.Closer), as the
// host does at a graceful stop, once; later calls return nil.
func (h *Handler) Close() error {
	h.mu.Lock()
	done := h.closed
	h.closed = true
	h.mu.Unlock()
	c, ok := h.h.(plugin.Closer)
	if done || !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		return fmt.Errorf("Close: %w", err)
	}
	return nil
}

// Init runs h's Init (when it is a plugin.Initializer) with o's config,
// as the host does when it starts a plugin, and returns its error: for
// testing the configs a handler refuses. Options.Config that does not
// encode is an error too.
func Init(h plugin.Handler, o Options) error {
	o = o.withDefaults()
	in, ok := h.(plugin.Initializer)
	if !ok {
		return nil
	}
	cfg, err := configJSON(o.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	return in.Init(ctx, plugin.Info{Pipeline: o.Pipeline, InstanceID: o.InstanceID, Config: cfg})
}

// configJSON is Options.Config as the host hands it over.
func configJSON(c any) ([]byte, error) {
	switch v := c.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("plugintest: Options.Config: %w", err)
	}
	return b, nil
}

// Process hands msgs to the handler as one batch and returns its answer.
// A message without an ID, Topic or PublishTime is given one: ids
// "1:N:-1:-1" with N counting up from 0 across the Handler's calls, the
// Options' topic, the time of the call. With Options.State, the batch
// carries the values of its messages' keys, and the changes of the
// acknowledged messages are kept afterwards. The messages must not be
// nil.
func (h *Handler) Process(msgs ...*plugin.Message) *Answer {
	now := time.Now().Truncate(time.Millisecond)
	h.mu.Lock()
	for _, m := range msgs {
		if m == nil {
			h.mu.Unlock()
			panic("plugintest: Process: a nil message")
		}
		if m.ID == "" {
			m.ID = "1:" + strconv.Itoa(h.entry) + ":-1:-1"
		}
		h.entry++
		if m.Topic == "" {
			m.Topic = h.opts.Topic
		}
		if m.PublishTime.IsZero() {
			m.PublishTime = now
		}
	}
	if h.state != nil {
		plugin.AttachState(msgs, h.entries(msgs))
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
	defer cancel()
	res, err := plugin.ProcessLocal(ctx, h.h, msgs)
	a := &Answer{Messages: msgs, Results: res}
	if pe, ok := err.(*plugin.PanicError); ok {
		a.Panic = pe
	}
	h.keep(res)
	return a
}

// entries are the values of the keys of msgs, as the host sends them
// with a batch. The caller holds h.mu.
func (h *Handler) entries(msgs []*plugin.Message) []plugin.StateEntry {
	var es []plugin.StateEntry
	seen := map[string]bool{}
	for _, m := range msgs {
		if m.Key == "" || seen[m.Key] {
			continue
		}
		seen[m.Key] = true
		if v, ok := h.state[m.Key]; ok {
			es = append(es, plugin.StateEntry{Key: m.Key, Value: bytes.Clone(v)})
		}
	}
	return es
}

// keep applies the acknowledged messages' changes to the state, as the
// host does once their outputs have their receipts.
func (h *Handler) keep(res []plugin.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == nil {
		return
	}
	for _, r := range res {
		c := r.State
		if r.Outcome != plugin.OutcomeAck || c == nil {
			continue
		}
		if c.Delete || len(c.Value) == 0 {
			delete(h.state, c.Key)
			continue
		}
		h.state[c.Key] = bytes.Clone(c.Value)
	}
}

// Text is a message whose payload is s.
func Text(s string) *plugin.Message { return &plugin.Message{Payload: []byte(s)} }

// JSON is a message whose payload is v encoded with encoding/json. It
// panics when v does not encode, as regexp.MustCompile does with a bad
// expression: the value is the test's own.
func JSON(v any) *plugin.Message {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("plugintest.JSON: %v", err))
	}
	return &plugin.Message{Payload: b}
}

// Answer is what a handler answered for one batch.
type Answer struct {
	// Messages are the batch as handed over (with the ids, topic and
	// publish time Process gave them).
	Messages []*plugin.Message
	// Results are the answers, one per message in the batch's order; nil
	// when the handler panicked.
	Results []plugin.Result
	// Panic is the handler's panic, nil when there was none. In a plugin
	// process it would end the process: a crash, the batch retried on a
	// fresh one (and a message that keeps crashing it dead-lettered).
	Panic *plugin.PanicError
}

// Outcome is what becomes of message i (0 when the handler panicked).
func (a *Answer) Outcome(i int) plugin.Outcome {
	if i < 0 || i >= len(a.Results) {
		return 0
	}
	return a.Results[i].Outcome
}

// Reason is the reason given with message i's outcome ("" for an ack).
func (a *Answer) Reason(i int) string {
	if i < 0 || i >= len(a.Results) {
		return ""
	}
	return a.Results[i].Reason
}

// StateChange is message i's change to the keyed state of its key, nil
// when it made none (or its outcome is not an ack, which discards it).
func (a *Answer) StateChange(i int) *plugin.StateChange {
	if i < 0 || i >= len(a.Results) {
		return nil
	}
	return a.Results[i].State
}

// Outputs are the outputs the host would publish, message by message in
// the batch's order (only acknowledged messages have any).
func (a *Answer) Outputs() []plugin.Output {
	var out []plugin.Output
	for _, r := range a.Results {
		out = append(out, r.Outputs...)
	}
	return out
}

// OutputsTo are the outputs to topic, in the order of Outputs.
func (a *Answer) OutputsTo(topic string) []plugin.Output {
	var out []plugin.Output
	for _, o := range a.Outputs() {
		if o.Topic == topic {
			out = append(out, o)
		}
	}
	return out
}

// String is the answer one line per message, then one per output:
//
//	0 ack
//	  -> out key="k1" payload="HELLO"
//	  state "k1" = "3"
//	1 dead-letter "order without id"
func (a *Answer) String() string {
	var b strings.Builder
	if a.Panic != nil {
		fmt.Fprintf(&b, "panic: %s\n", a.Panic.Error())
		return b.String()
	}
	for i, r := range a.Results {
		fmt.Fprintf(&b, "%d %s", i, r.Outcome)
		if r.Reason != "" {
			fmt.Fprintf(&b, " %q", r.Reason)
		}
		if r.RetryDelay > 0 {
			fmt.Fprintf(&b, " after %v", r.RetryDelay)
		}
		b.WriteByte('\n')
		for _, o := range r.Outputs {
			b.WriteString("  -> ")
			b.WriteString(o.Topic)
			if o.Key != "" {
				fmt.Fprintf(&b, " key=%q", o.Key)
			}
			if len(o.Properties) > 0 {
				fmt.Fprintf(&b, " properties=%v", o.Properties)
			}
			fmt.Fprintf(&b, " payload=%q\n", o.Payload)
		}
		if c := r.State; c != nil {
			if c.Delete || len(c.Value) == 0 {
				fmt.Fprintf(&b, "  state %q deleted\n", c.Key)
			} else {
				fmt.Fprintf(&b, "  state %q = %q\n", c.Key, c.Value)
			}
		}
	}
	return b.String()
}
