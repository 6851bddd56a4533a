package pipelinetest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pulsarwire"
)

// A FileError is what is wrong with a test file or the pipeline file it
// names, each problem FILE:LINE:COL: field: what is wrong. `streamrun
// test` exits 2 for it: no case ran.
type FileError struct{ Err error }

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// Load reads the test file at path and the pipeline file it names, and
// checks them: every problem the loader finds in either, and what the
// test file asks of the pipelines (names they have, a topic one reads,
// a pipeline keeping state where a case gives state, a handler process
// where a case has faults). lookupEnv supplies ${VAR} in both; nil means
// os.LookupEnv. The error is a *FileError.
func Load(path string, lookupEnv func(string) (string, bool)) (*File, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	data, err := readFile(path)
	if err != nil {
		return nil, &FileError{err}
	}
	f := &File{Path: path}
	if f.places, err = pipelines.DecodeDocument(path, data, f, "a test file", lookupEnv); err != nil {
		return nil, &FileError{err}
	}
	if errs := f.check(); len(errs) > 0 {
		return nil, &FileError{errs}
	}
	pf := f.PipelineFile
	if !filepath.IsAbs(pf) {
		pf = filepath.Join(filepath.Dir(path), pf)
	}
	if f.Pipeline, err = pipelines.Load(pf, lookupEnv); err != nil {
		return nil, &FileError{err}
	}
	if errs := f.checkPipelines(); len(errs) > 0 {
		return nil, &FileError{errs}
	}
	return f, nil
}

func readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &pipelines.Error{File: path, Line: 1, Col: 1, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, pipelines.MaxFileSize+1))
	if err != nil {
		return nil, &pipelines.Error{File: path, Line: 1, Col: 1, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err))}
	}
	return data, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// check is what the test file alone can show.
func (f *File) check() pipelines.Errors {
	var errs pipelines.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, f.places.ErrorAt(path, fmt.Sprintf(format, args...)))
	}
	if f.PipelineFile == "" {
		bad("pipeline_file", "missing: name the pipeline file the cases run")
	}
	if f.Timeout < 0 {
		bad("timeout", "must not be negative")
	}
	if len(f.Cases) == 0 {
		bad("cases", "missing: a test file lists at least one case")
	}
	names := map[string]int{}
	for i := range f.Cases {
		c := &f.Cases[i]
		at := fmt.Sprintf("cases[%d]", i)
		switch prev, dup := names[c.Name]; {
		case c.Name == "":
			bad(at+".name", "missing: say what the case shows")
		case dup:
			bad(at+".name", "%q again (cases[%d] has it)", c.Name, prev)
		default:
			names[c.Name] = i
		}
		if len(c.Inputs) == 0 {
			bad(at+".inputs", "missing: a case publishes at least one input")
		}
		for j := range c.Inputs {
			checkInput(&c.Inputs[j], fmt.Sprintf("%s.inputs[%d]", at, j), bad)
		}
		for j, ft := range c.Faults {
			checkFault(ft, len(c.Inputs), fmt.Sprintf("%s.faults[%d]", at, j), bad)
		}
		for k, v := range c.State {
			if _, err := valueBytes(v); err != nil {
				bad(at+".state."+k, "%v", err)
			}
		}
		for k, v := range c.Expect.State {
			if _, err := valueBytes(v); err != nil {
				bad(at+".expect.state."+k, "%v", err)
			}
		}
		for j := range c.Expect.Outputs {
			checkOutputs(&c.Expect.Outputs[j], fmt.Sprintf("%s.expect.outputs[%d]", at, j), bad)
		}
	}
	return errs
}

func checkInput(in *Input, at string, bad func(path, format string, args ...any)) {
	if in.Topic != "" {
		if _, err := pulsarwire.ParseTopic(in.Topic); err != nil {
			bad(at+".topic", "%v", err)
		}
	}
	if n := count(in.Text != nil, in.JSON != nil, in.Base64 != nil); n > 1 {
		bad(at, "give the payload once: text, json or base64")
	}
	if in.Base64 != nil {
		if _, err := base64.StdEncoding.DecodeString(*in.Base64); err != nil {
			bad(at+".base64", "not standard base64: %v", err)
		}
	}
	if in.JSON != nil {
		if _, err := json.Marshal(in.JSON); err != nil {
			bad(at+".json", "cannot be written as JSON: %v", err)
		}
	}
	if in.EventTime != "" {
		if _, err := time.Parse(time.RFC3339Nano, in.EventTime); err != nil {
			bad(at+".event_time", "%q: want a time as RFC 3339 writes it, such as 2025-01-02T15:04:05Z", in.EventTime)
		}
	}
	switch in.Outcome {
	case "", OutcomeAck, OutcomeRetry, OutcomeDeadLetter, OutcomeDrop, OutcomeFilter:
	default:
		bad(at+".outcome", "%q: want ack, retry, dead_letter, drop or filter", in.Outcome)
	}
	if in.Reason != "" {
		if _, err := regexp.Compile(in.Reason); err != nil {
			bad(at+".reason", "not a regular expression: %v", err)
		}
		if in.Outcome == "" || in.Outcome == OutcomeAck {
			bad(at+".reason", "a reason goes with outcome retry, dead_letter, drop or filter (an ack has none)")
		}
	}
}

func checkFault(ft Fault, inputs int, at string, bad func(path, format string, args ...any)) {
	if count(ft.Crash != 0, ft.Hang != 0, ft.Garbage != 0) != 1 {
		bad(at, "give one of crash, hang or garbage, set to an input's number")
		return
	}
	for field, n := range map[string]int{"crash": ft.Crash, "hang": ft.Hang, "garbage": ft.Garbage} {
		if n != 0 && (n < 1 || n > inputs) {
			bad(at+"."+field, "%d: want an input's number, 1 to %d", n, inputs)
		}
	}
	if ft.Timeout != 0 && ft.Hang == 0 {
		bad(at+".timeout", "only with hang: it is handler.timeout while the handler hangs")
	}
	if ft.Timeout < 0 {
		bad(at+".timeout", "must not be negative")
	}
}

func checkOutputs(o *TopicOutputs, at string, bad func(path, format string, args ...any)) {
	if o.Topic == "" {
		bad(at+".topic", "missing: the topic the messages are expected on")
	} else if _, err := pulsarwire.ParseTopic(o.Topic); err != nil {
		bad(at+".topic", "%v", err)
	}
	switch o.Order {
	case "", OrderInOrder, OrderAny:
	default:
		bad(at+".order", "%q: want in_order or any", o.Order)
	}
	for i, m := range o.Messages {
		mat := fmt.Sprintf("%s.messages[%d]", at, i)
		if count(m.Text != nil, m.JSON != nil, m.JSONContains != nil, m.Base64 != nil) > 1 {
			bad(mat, "give the payload once: text, json, json_contains or base64")
		}
		if m.Base64 != nil {
			if _, err := base64.StdEncoding.DecodeString(*m.Base64); err != nil {
				bad(mat+".base64", "not standard base64: %v", err)
			}
		}
	}
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// checkPipelines checks what the test file asks of the pipeline file,
// and keeps in f.Pipeline only the pipelines named.
func (f *File) checkPipelines() pipelines.Errors {
	var errs pipelines.Errors
	bad := func(path, format string, args ...any) {
		errs = append(errs, f.places.ErrorAt(path, fmt.Sprintf(format, args...)))
	}
	all := f.Pipeline.Pipelines
	var have []string
	for _, p := range all {
		have = append(have, p.Name)
	}
	if len(f.Pipelines) > 0 {
		var kept []pipelines.Pipeline
		for i, name := range f.Pipelines {
			j := slices.Index(have, name)
			if j < 0 {
				bad(fmt.Sprintf("pipelines[%d]", i), "%s has no pipeline %q (it has %s)", f.PipelineFile, name, strings.Join(have, ", "))
				continue
			}
			kept = append(kept, all[j])
		}
		f.Pipeline.Pipelines = kept
	}
	if len(errs) > 0 || len(f.Pipeline.Pipelines) == 0 {
		return errs
	}
	stateful := 0
	for _, p := range f.Pipeline.Pipelines {
		if p.State.Enabled {
			stateful++
		}
	}
	for i := range f.Cases {
		c := &f.Cases[i]
		at := fmt.Sprintf("cases[%d]", i)
		if (c.State != nil || c.Expect.State != nil) && stateful != 1 {
			path := at + ".state"
			if c.State == nil {
				path = at + ".expect.state"
			}
			bad(path, "needs one pipeline keeping state (state.enabled) among those run; there are %d", stateful)
		}
		for j := range c.Inputs {
			topic := c.Inputs[j].Topic
			if topic == "" {
				first := f.Pipeline.Pipelines[0]
				if len(first.Source.Topics) != 1 {
					bad(fmt.Sprintf("%s.inputs[%d]", at, j), "pipeline %s does not read one topic: say the input's topic", first.Name)
					continue
				}
				c.Inputs[j].Topic = first.Source.Topics[0]
				continue
			}
			if f.reader(topic) == nil {
				bad(fmt.Sprintf("%s.inputs[%d].topic", at, j), "%s: no pipeline run reads it", topic)
			}
		}
		for j, ft := range c.Faults {
			n := max(ft.Crash, ft.Hang, ft.Garbage)
			if n < 1 || n > len(c.Inputs) {
				continue
			}
			p := f.reader(c.Inputs[n-1].Topic)
			if p != nil && p.Handler.Plugin == "" && p.Handler.Package == "" && p.Handler.Script == "" {
				bad(fmt.Sprintf("%s.faults[%d]", at, j), "pipeline %s, which reads input %d, has no handler process to fault (steps alone)", p.Name, n)
			}
		}
	}
	return errs
}

// reader is the first pipeline run that reads topic, nil when none.
func (f *File) reader(topic string) *pipelines.Pipeline {
	full := fullTopic(topic)
	for i := range f.Pipeline.Pipelines {
		p := &f.Pipeline.Pipelines[i]
		for _, t := range p.Source.Topics {
			if fullTopic(t) == full {
				return p
			}
		}
		if p.Source.Pattern != "" {
			if re, err := regexp.Compile("^" + p.Source.Pattern + "$"); err == nil && re.MatchString(full) {
				return p
			}
		}
	}
	return nil
}

// fullTopic is topic's full name ("persistent://public/default/x"), as
// received messages name theirs; topic itself when it does not parse.
func fullTopic(topic string) string {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return topic
	}
	_, base := t.PartitionIndex()
	return base.String()
}

// valueBytes is a state value as stored: a string's bytes, else JSON.
func valueBytes(v any) ([]byte, error) {
	if s, ok := v.(string); ok {
		return []byte(s), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be written as JSON: %w", err)
	}
	return b, nil
}
