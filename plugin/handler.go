package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A Handler processes batches of messages. It is the one thing a handler
// author writes, as http.Handler is for a web server.
//
// Process is called with a batch of one or more messages and a ResultWriter
// on which it says, per message, what the host should do: publish outputs
// (ResultWriter.Output), retry, dead-letter or drop. A message the handler
// says nothing about is acknowledged once its outputs are published.
//
// If Process returns an error, the whole batch is retried: every message is
// negatively acknowledged with the error as reason, everything written to
// the ResultWriter is discarded, and the broker delivers the messages again
// (to this or another instance) under the pipeline's error policy. Return an
// error for trouble that concerns the batch as a whole, such as a database
// that is down; answer per message with the ResultWriter otherwise.
//
// Calls to Process never overlap within one plugin process unless the
// plugin allows it (ServeOptions.Concurrency); the host runs more processes
// for more parallelism. Process must not keep the batch or
// the ResultWriter after it returns. A panic in Process kills the plugin
// process; the host sees a crash, starts a fresh instance and retries the
// batch there.
type Handler interface {
	Process(ctx context.Context, w ResultWriter, batch []*Message) error
}

// HandlerFunc makes an ordinary function a Handler.
type HandlerFunc func(ctx context.Context, w ResultWriter, batch []*Message) error

// Process calls f(ctx, w, batch).
func (f HandlerFunc) Process(ctx context.Context, w ResultWriter, batch []*Message) error {
	return f(ctx, w, batch)
}

// ResultWriter collects a handler's answer for each message of a batch. Its
// methods take a message of the batch being processed; a message from
// anywhere else fails the batch (it is retried) with an error saying so.
// The last outcome set for a message wins; outputs accumulate, and are
// published only if the final outcome is ack. A ResultWriter is safe for
// concurrent use, and ignores every call once Process has returned.
type ResultWriter interface {
	// Output adds a message for the host to publish on behalf of m. The host
	// acknowledges m only after every output of m has its send receipt.
	Output(m *Message, out Output)
	// Ack acknowledges m after its outputs are published. It is the default.
	Ack(m *Message)
	// Retry has m delivered again, after delay when delay > 0, else after
	// the pipeline's error policy; reason goes to the logs.
	Retry(m *Message, delay time.Duration, reason string)
	// DeadLetter sends m to the pipeline's dead-letter topic with reason.
	DeadLetter(m *Message, reason string)
	// Drop acknowledges m without publishing anything.
	Drop(m *Message, reason string)
}

// MessageFunc is a Handler that handles one message at a time, in the
// order of the batch, returning the outputs to publish for it. The error
// says what happens to the message instead of an ack:
//
//   - nil: publish the outputs, then ack the message;
//   - DeadLetter(err): send it to the dead-letter topic with err as reason;
//   - RetryAfter(d, err): deliver it again after d;
//   - Drop(reason): ack it without output;
//   - any other error: deliver it again under the pipeline's error policy.
//
// If ctx is done before the batch is through, Process returns ctx.Err() and
// the whole batch is retried.
type MessageFunc func(ctx context.Context, m *Message) ([]Output, error)

// Process calls f for each message of the batch in turn.
func (f MessageFunc) Process(ctx context.Context, w ResultWriter, batch []*Message) error {
	tr, _ := w.(interface{ handling(i int) })
	for _, m := range batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if tr != nil {
			tr.handling(m.index)
		}
		outs, err := f(ctx, m)
		if err != nil {
			WriteError(w, m, err)
			if m.state != nil {
				// Not acknowledged: the next message of its key must not
				// see its change.
				m.state.undo(m)
			}
			continue
		}
		for _, o := range outs {
			w.Output(m, o)
		}
	}
	if tr != nil {
		tr.handling(-1)
	}
	return nil
}

// outcomeError is an error that carries the outcome a message should get.
type outcomeError struct {
	outcome Outcome
	delay   time.Duration
	err     error
}

func (e *outcomeError) Error() string {
	if e.err == nil {
		return e.outcome.String()
	}
	return e.err.Error()
}

func (e *outcomeError) Unwrap() error { return e.err }

// DeadLetter wraps err so that a MessageFunc's message goes to the
// dead-letter topic, with err's text as the reason. Use it for a message
// that will never succeed, such as one that does not parse.
func DeadLetter(err error) error {
	return &outcomeError{outcome: OutcomeDeadLetter, err: err}
}

// RetryAfter wraps err so that a MessageFunc's message is delivered again
// after delay, with err's text as the reason.
func RetryAfter(delay time.Duration, err error) error {
	return &outcomeError{outcome: OutcomeRetry, delay: delay, err: err}
}

// Drop returns an error that has a MessageFunc's message acknowledged
// without output, with reason for the logs.
func Drop(reason string) error {
	return &outcomeError{outcome: OutcomeDrop, err: errors.New(reason)}
}

// WriteError records err as m's outcome on w, the way MessageFunc does:
// DeadLetter, RetryAfter and Drop errors give their outcome, any other
// error a retry under the pipeline's error policy. It is for batch
// handlers that want MessageFunc's error convention.
func WriteError(w ResultWriter, m *Message, err error) {
	var oe *outcomeError
	if !errors.As(err, &oe) {
		w.Retry(m, 0, err.Error())
		return
	}
	switch oe.outcome {
	case OutcomeDeadLetter:
		w.DeadLetter(m, err.Error())
	case OutcomeDrop:
		w.Drop(m, err.Error())
	default:
		w.Retry(m, oe.delay, err.Error())
	}
}

// Info is what the host tells a handler when it starts it.
type Info struct {
	// Pipeline is the name of the pipeline the handler runs in.
	Pipeline string
	// InstanceID tells this process from the pipeline's other instances.
	InstanceID string
	// Config is the handler's config from the pipeline file, as JSON; nil
	// when the pipeline gives none.
	Config []byte
}

// Initializer is implemented by a Handler that wants the pipeline's config
// before its first batch. An error from Init fails the start of the plugin;
// the host reports it and does not send batches.
type Initializer interface {
	Init(ctx context.Context, info Info) error
}

// Closer is implemented by a Handler that has something to release when the
// host stops it gracefully (it is not called after a crash or a kill).
type Closer interface {
	Close(ctx context.Context) error
}

// batchWriter is the ResultWriter the SDK hands to a Handler.
type batchWriter struct {
	mu      sync.Mutex
	batch   []*Message
	results []Result
	err     error // the first misuse, fails the batch
	done    bool
	current int // the message a MessageFunc is handling, -1 when unknown
	// spare holds the first output of the messages that have not had one
	// yet: one allocation per batch instead of one per message. When it
	// is a worker's (scratch), its slots are not cleared beforehand (each
	// is written whole when handed out), and taken counts those handed
	// out, for scratch.outputsUsed.
	spare   []Output
	scratch bool
	taken   int
	// state is the batch's keyed state, nil when the pipeline keeps none.
	state *batchState
}

// newBatchWriter makes the writer of batch's results, in sc's arrays
// when sc is not nil.
func newBatchWriter(batch []*Message, sc *scratch) *batchWriter {
	w := &batchWriter{batch: batch, current: -1}
	if sc == nil {
		w.results = make([]Result, len(batch))
	} else {
		w.results, w.spare = sc.resultArrays(len(batch))
		w.scratch = true
	}
	for i := range w.results {
		w.results[i].Outcome = OutcomeAck
	}
	return w
}

// slot returns m's result, or nil (recording why) when m is not of this
// batch or Process has returned. The caller holds w.mu.
func (w *batchWriter) slot(m *Message, op string) *Result {
	if w.done {
		return nil
	}
	if m == nil || m.index < 0 || m.index >= len(w.batch) || w.batch[m.index] != m {
		if w.err == nil {
			id := "<nil>"
			if m != nil {
				id = m.ID
			}
			w.err = fmt.Errorf("ResultWriter.%s called with message %s, which is not in this batch", op, id)
		}
		return nil
	}
	return &w.results[m.index]
}

func (w *batchWriter) set(m *Message, op string, o Outcome, delay time.Duration, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.slot(m, op); r != nil {
		// reason is a string in the contract: valid UTF-8, or a peer
		// built on generated code refuses the whole answer.
		r.Outcome, r.RetryDelay, r.Reason = o, delay, strings.ToValidUTF8(reason, "\uFFFD")
	}
}

func (w *batchWriter) Output(m *Message, out Output) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.slot(m, "Output"); r != nil {
		if r.Outputs == nil {
			if len(w.spare) == 0 {
				w.spare, w.scratch = make([]Output, len(w.batch)), false
			}
			if w.scratch {
				w.taken++
			}
			r.Outputs, w.spare = w.spare[:0:1], w.spare[1:]
		}
		r.Outputs = append(r.Outputs, out)
	}
}

func (w *batchWriter) Ack(m *Message) { w.set(m, "Ack", OutcomeAck, 0, "") }

func (w *batchWriter) Retry(m *Message, delay time.Duration, reason string) {
	w.set(m, "Retry", OutcomeRetry, max(delay, 0), reason)
}

func (w *batchWriter) DeadLetter(m *Message, reason string) {
	w.set(m, "DeadLetter", OutcomeDeadLetter, 0, reason)
}

func (w *batchWriter) Drop(m *Message, reason string) { w.set(m, "Drop", OutcomeDrop, 0, reason) }

func (w *batchWriter) handling(i int) {
	w.mu.Lock()
	w.current = i
	w.mu.Unlock()
}

// finish closes the writer and returns the results; if the handler failed
// (handlerErr) or misused the writer, every message is retried instead.
// Outputs stay only with an ack.
func (w *batchWriter) finish(handlerErr error) []Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	err := handlerErr
	if err == nil {
		err = w.err
	}
	if err != nil {
		reason := "batch failed: " + err.Error()
		for i := range w.results {
			w.results[i] = Result{Outcome: OutcomeRetry, Reason: reason}
		}
	}
	for i := range w.results {
		if w.results[i].Outcome != OutcomeAck {
			w.results[i].Outputs = nil
		}
	}
	if w.state != nil {
		w.state.settle(w.batch, w.results)
	}
	return w.results
}

// scratchTaken is how many of the scratch's outputs were handed out.
func (w *batchWriter) scratchTaken() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.taken
}

// handlingIndex is the message being handled when a panic struck, -1 when
// unknown.
func (w *batchWriter) handlingIndex() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}
