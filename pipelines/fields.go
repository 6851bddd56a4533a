package pipelines

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Each field of a pipeline file is declared once, on its Go field: its
// name in the file (the yaml tag), its meaning (the doc comment), its
// default when that is a plain value (the default tag, written as in a
// file; a default computed from other fields is stated in the comment
// and set by WithDefaults), and what changing it does to a running
// pipeline (the reload tag, a Reload). WithDefaults, the reload's diff
// (Pipeline.Changes), the JSON Schema and docs/pipelines.md's table are
// derived from, or checked against, these declarations.

// Reload is what a change of a field does to a running host
// (docs/reload.md).
type Reload string

// The reload effects, from the least to the most disruptive.
const (
	// ReloadIdentity: the field names the pipeline; another value is
	// another pipeline (the old one drains and stops, the new one starts).
	ReloadIdentity Reload = "identity"
	// ReloadHandler: how an instance starts; the new handler is rolled
	// out one instance at a time while messages flow.
	ReloadHandler Reload = "handler"
	// ReloadFlow: how messages flow through the pipeline; it drains, then
	// goes on with the new settings on the same subscription and
	// instances.
	ReloadFlow Reload = "flow"
	// ReloadSource: the subscription; the pipeline drains and subscribes
	// anew.
	ReloadSource Reload = "source"
	// ReloadRestart: a setting of the whole file (the connection,
	// telemetry); a reload that changes it is refused: it takes a restart.
	ReloadRestart Reload = "restart"
)

// Field is one declared field of a pipeline file.
type Field struct {
	// Path is the field's place in the file, as errors name it:
	// "handler.batch_size" in a pipeline, "tls.ca_file" in the file.
	Path string
	// Default is the plain default, written as in a file ("10ms"); ""
	// when the default is none, or computed (see the field's comment).
	Default string
	// Reload is what a change of it does; "" when undeclared, a defect
	// that TestEveryFieldIsDeclared catches and a reload treats as
	// changing everything.
	Reload Reload

	index []int
	typ   reflect.Type
}

// PipelineFields are the declared fields of a pipeline, in the order of
// the types. A struct (source, handler, error_policy, backoff) is not a
// field itself: its fields are.
func PipelineFields() []Field { return declared(reflect.TypeFor[Pipeline](), "", nil, "") }

// FileFields are the declared fields of a file outside its pipelines.
func FileFields() []Field { return declared(reflect.TypeFor[File](), "", nil, "pipelines") }

func declared(t reflect.Type, prefix string, index []int, skip string) []Field {
	var fs []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || name == skip {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		if sf.Type.Kind() == reflect.Struct && sf.Type.PkgPath() == t.PkgPath() {
			fs = append(fs, declared(sf.Type, prefix+name+".", idx, "")...)
			continue
		}
		fs = append(fs, Field{Path: prefix + name, Default: sf.Tag.Get("default"), Reload: Reload(sf.Tag.Get("reload")),
			index: idx, typ: sf.Type})
	}
	return fs
}

// Change is a field whose value differs between two versions.
type Change struct {
	Path   string
	Reload Reload
}

// Changes lists the fields of p that next changes, each with what its
// change does on reload. Both are compared as given: call WithDefaults
// on both first so that a default written out is no change. An empty
// list and none are the same.
func (p Pipeline) Changes(next Pipeline) []Change {
	return changes(PipelineFields(), reflect.ValueOf(p), reflect.ValueOf(next))
}

// SettingsChanges lists the settings of the whole file (every field
// outside its pipelines) that next changes; all of them take a restart.
func (f *File) SettingsChanges(next *File) []Change {
	return changes(FileFields(), reflect.ValueOf(f).Elem(), reflect.ValueOf(next).Elem())
}

func changes(fs []Field, a, b reflect.Value) []Change {
	var cs []Change
	for _, f := range fs {
		if !sameValue(a.FieldByIndex(f.index), b.FieldByIndex(f.index)) {
			cs = append(cs, Change{Path: f.Path, Reload: f.Reload})
		}
	}
	return cs
}

// sameValue is reflect.DeepEqual, with an empty slice or map the same
// as none.
func sameValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Slice, reflect.Map:
		if a.Len() == 0 && b.Len() == 0 {
			return true
		}
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// setDefaults sets every zero field of v (a Pipeline or a struct of
// one, at the place fs were taken from) that declares a plain default.
func setDefaults(v reflect.Value, fs []Field) {
	for _, f := range fs {
		if f.Default == "" {
			continue
		}
		fv := v.FieldByIndex(f.index)
		if fv.IsZero() {
			_ = setText(fv, f.Default)
		}
	}
}

// setText sets v to s, written as in a file; the declarations are
// checked by a test, so an error here is a defect of a declaration.
func setText(v reflect.Value, s string) error {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(n))
	case v.Kind() == reflect.String:
		v.SetString(s)
	default:
		return fmt.Errorf("a %s has no plain default", v.Type())
	}
	return nil
}
