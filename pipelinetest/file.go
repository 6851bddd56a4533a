package pipelinetest

import (
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

// The test file, declared once on these types: the yaml tags are the
// names in the file, the comments their meaning (docs/testing.md says
// the same for readers; docs/pipelinetest.schema.json for editors, kept
// in step by TestSchemaNamesEveryField).

// File is a test file: the pipeline file under test, and its cases.
type File struct {
	// PipelineFile is the pipeline file the cases run, relative to the
	// test file's directory. Required.
	PipelineFile string `yaml:"pipeline_file"`
	// Pipelines names the pipelines of it the cases run, together.
	// Default: every pipeline of the file.
	Pipelines []string `yaml:"pipelines,omitempty"`
	// Timeout bounds each case, from the broker's start to the last
	// check. Default 30s.
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Cases run one after the other, each on a broker of its own.
	Cases []Case `yaml:"cases"`

	// Path is the file's name as given; Pipeline the pipeline file as
	// loaded, with only the pipelines named.
	Path     string          `yaml:"-"`
	Pipeline *pipelines.File `yaml:"-"`
	places   *pipelines.Places
}

// DefaultTimeout is File.Timeout's default.
const DefaultTimeout = 30 * time.Second

// Case is one test: state to start from, inputs, faults, what to expect.
type Case struct {
	// Name says what the case shows. Required, unique in the file.
	Name string `yaml:"name"`
	// State is the keyed state before the inputs (key: value), written
	// to the changelog of the pipeline that keeps state. A string is the
	// value's bytes; anything else its JSON. Default none.
	State map[string]any `yaml:"state,omitempty"`
	// Inputs are published in order once the pipelines run. Required.
	Inputs []Input `yaml:"inputs"`
	// Faults are done to the handler of the pipeline reading the inputs.
	// Default none.
	Faults []Fault `yaml:"faults,omitempty"`
	// Expect is what the case checks beyond each input's outcome.
	Expect Expect `yaml:"expect,omitempty"`
}

// Input is a message to publish, and the outcome expected for it.
type Input struct {
	// Topic is where it is published. Default: the one source topic of
	// the first pipeline run.
	Topic string `yaml:"topic,omitempty"`
	// Key is the message's key. Default none.
	Key string `yaml:"key,omitempty"`
	// Properties travel with it. Default none.
	Properties map[string]string `yaml:"properties,omitempty"`
	// EventTime is its event time, RFC 3339 ("2025-01-02T15:04:05Z").
	// Default none.
	EventTime string `yaml:"event_time,omitempty"`
	// Text, JSON or Base64 is the payload (one of them): text as it is,
	// a value written as JSON (compact), or bytes in standard base64.
	// Default: an empty payload.
	Text   *string `yaml:"text,omitempty"`
	JSON   any     `yaml:"json,omitempty"`
	Base64 *string `yaml:"base64,omitempty"`
	// Outcome is how the pipeline reading it must settle it: ack, drop,
	// filter or dead_letter (for good), or retry (handed back at least
	// once; the case does not wait for more). Default: any settlement
	// for good, which every input must reach unless retry is expected.
	Outcome string `yaml:"outcome,omitempty"`
	// Reason is a regular expression the outcome's reason must match
	// (the handler's, a step's or the host's). Default: any reason.
	Reason string `yaml:"reason,omitempty"`
}

// The outcomes an input may be expected to have.
const (
	OutcomeAck        = "ack"
	OutcomeRetry      = "retry"
	OutcomeDeadLetter = "dead_letter"
	OutcomeDrop       = "drop"
	OutcomeFilter     = "filter"
)

// Fault is something done to the handler's process during a case; each
// is done once, on the first call of a batch holding its input. Exactly
// one of Crash, Hang and Garbage is set, to an input's number (1 is the
// first).
type Fault struct {
	// Crash kills the handler's process (SIGKILL) as the batch is handed
	// to it: the host sees a crash and hands the batch to a fresh one.
	Crash int `yaml:"crash,omitempty"`
	// Hang stops the process (SIGSTOP) as the batch is handed to it: the
	// host waits out handler.timeout, takes it for hung, kills it and
	// hands the batch to a fresh one.
	Hang int `yaml:"hang,omitempty"`
	// Garbage lets the handler answer, then puts a wrong answer in its
	// place: the host throws the answer away, restarts the instance and
	// hands the batch to a fresh one.
	Garbage int `yaml:"garbage,omitempty"`
	// Timeout is handler.timeout for the case's pipelines with a hang,
	// so that the case does not wait the pipeline's own (30s by
	// default); only with Hang, never longer than the pipeline's own.
	// Default 2s.
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// DefaultHangTimeout is Fault.Timeout's default.
const DefaultHangTimeout = 2 * time.Second

// Expect is what a case checks after the inputs are settled.
type Expect struct {
	// Outputs are the messages expected on topics, per topic. A topic
	// listed gets exactly these; one not listed is not checked.
	Outputs []TopicOutputs `yaml:"outputs,omitempty"`
	// State is every key's value after the case, in the pipeline that
	// keeps state: keys not listed must have none. Written as Case.State
	// is; a value that is not a string is compared as JSON. Default: not
	// checked (an empty mapping checks that no key has a value).
	State map[string]any `yaml:"state,omitempty"`
}

// TopicOutputs are the messages expected on one topic.
type TopicOutputs struct {
	// Topic, as a pipeline file names it. Required.
	Topic string `yaml:"topic"`
	// Order is in_order (the messages come in the order listed) or any.
	// Default in_order.
	Order string `yaml:"order,omitempty"`
	// Messages are those expected, all of them: an empty list expects
	// none.
	Messages []Message `yaml:"messages"`
}

// The orders TopicOutputs.Order may name.
const (
	OrderInOrder = "in_order"
	OrderAny     = "any"
)

// Message is an expected output. Each field set must match; those not
// set are not checked.
type Message struct {
	// Text, Base64: the payload exactly. JSON: the payload is JSON equal
	// to it (whatever the spacing and the order of keys). JSONContains:
	// the payload is JSON holding it: every key given, with a value that
	// holds the one given (mappings), equals it (other values), or, for
	// lists, is as long with each item holding the one given. At most
	// one of the four.
	Text         *string `yaml:"text,omitempty"`
	JSON         any     `yaml:"json,omitempty"`
	JSONContains any     `yaml:"json_contains,omitempty"`
	Base64       *string `yaml:"base64,omitempty"`
	// Key is the message's key exactly ("" for none).
	Key *string `yaml:"key,omitempty"`
	// Properties given must be there with these values; others may be
	// there too.
	Properties map[string]string `yaml:"properties,omitempty"`
}
