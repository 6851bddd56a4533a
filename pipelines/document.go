package pipelines

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// Places are where the fields of a document read by DecodeDocument were
// written, so that problems found after decoding point into the file.
type Places struct{ p places }

// ErrorAt is an *Error about the field at path (spelt as Error.Path is:
// "cases[0].inputs[1].json"), at the place it, or its nearest written
// parent, was written.
func (pl *Places) ErrorAt(path, msg string) *Error { return pl.p.errorAt(path, msg) }

// DecodeDocument reads data, the contents of the file called name, into
// v (a pointer to a struct) by the rules of pipeline files: one YAML
// document of UTF-8 text within MaxFileSize and MaxDepth, fields named
// by their yaml tags (an unknown one is refused, with the field it was
// probably meant to be), ${VAR} expanded (lookupEnv, nil: os.LookupEnv),
// durations with their units, aliases bounded, no merge keys. It is for
// the project's other YAML files (`streamrun test`'s test files), so
// that they read and fail as pipeline files do. what names the kind of
// file in messages ("a test file"). The error is an *Error, or Errors
// when there are several, each FILE:LINE:COL.
func DecodeDocument(name string, data []byte, v any, what string, lookupEnv func(string) (string, bool)) (*Places, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("DecodeDocument: want a pointer to a struct, got %T", v)
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: name, Line: 1, Col: 1, Msg: fmt.Sprintf("larger than %d bytes (1 MiB), the most %s may hold", MaxFileSize, what)}
	}
	if e := checkText(name, data); e != nil {
		return nil, e
	}
	if e := checkNesting(name, data); e != nil {
		return nil, e
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, syntaxError(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: name, Line: extra.Line, Col: extra.Column, Msg: fmt.Sprintf("a second YAML document (after ---): %s holds one", what)}
	} else if err != io.EOF {
		return nil, syntaxError(name, data, err)
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	if top.Kind == 0 || top.Kind == yaml.DocumentNode {
		return nil, &Error{File: name, Line: 1, Col: 1, Msg: fmt.Sprintf("empty: %s is a mapping", what)}
	}
	d := &decoder{file: name, lookup: lookupEnv, at: map[string]pos{}, src: data, scalars: map[string]*yaml.Node{}}
	d.at[""] = pos{top.Line, top.Column}
	d.value(top, rv.Elem(), "", 0)
	if len(d.errs) > 0 {
		return nil, d.sorted().err()
	}
	return &Places{places{file: name, at: d.at}}, nil
}
