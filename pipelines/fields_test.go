package pipelines

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every field of a file, found by walking the types (a struct of this
// package is a section, anything else a field), declares what its change
// does on reload: a field added without one fails here, instead of
// making every reload of it do whatever a catch-all did. Pipeline fields
// change a running pipeline; the file's settings take a restart. Every
// plain default is written as the field's type reads it.
func TestEveryFieldIsDeclared(t *testing.T) {
	var leaves []string
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case name == "" || name == "-":
			case f.Type == reflect.TypeFor[[]Pipeline]():
				walk(reflect.TypeFor[Pipeline](), "pipelines[].")
			case f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == typ.PkgPath():
				walk(f.Type, prefix+name+".")
			default:
				leaves = append(leaves, prefix+name)
			}
		}
	}
	walk(reflect.TypeFor[File](), "")
	var declared []string
	for _, f := range FileFields() {
		declared = append(declared, f.Path)
		if f.Reload != ReloadRestart {
			t.Errorf("file setting %s: reload %q, want %q: one run has one connection and one telemetry", f.Path, f.Reload, ReloadRestart)
		}
	}
	for _, f := range PipelineFields() {
		declared = append(declared, "pipelines[]."+f.Path)
		switch f.Reload {
		case ReloadIdentity, ReloadHandler, ReloadFlow, ReloadSource:
		case "":
			t.Errorf("pipeline field %s declares no reload effect (a reload:\"...\" tag: handler, flow, source or identity)", f.Path)
		default:
			t.Errorf("pipeline field %s: reload %q is none of handler, flow, source, identity", f.Path, f.Reload)
		}
		if f.Default != "" {
			if err := setText(reflect.New(f.typ).Elem(), f.Default); err != nil {
				t.Errorf("pipeline field %s: default %q: %v", f.Path, f.Default, err)
			}
		}
	}
	if len(leaves) < 40 || !slices.Equal(leaves, declared) {
		t.Errorf("fields of the types:\n%v\ndeclared:\n%v", leaves, declared)
	}
}

// WithDefaults sets what the fields declare, then what it computes from
// them; a value given stays.
func TestWithDefaults(t *testing.T) {
	p := Pipeline{Name: "p", Source: Source{Topics: []string{"in"}, Subscription: "s", Type: "Key-Shared"},
		Handler: Handler{Plugin: "/bin/h", Instances: 4, Timeout: time.Minute}}.WithDefaults()
	h := p.Handler
	if p.Source.Type != KeyShared || p.Source.InitialPosition != Latest || p.Source.ReceiverQueue != 1000 {
		t.Errorf("source %+v", p.Source)
	}
	if h.BatchSize != 100 || h.BatchWait != 10*time.Millisecond || h.Instances != 4 || h.Timeout != time.Minute {
		t.Errorf("handler %+v", h)
	}
	if h.MaxInFlight != 4*100*4 || h.MaxBatchesInFlight != 1 || h.Python != "" {
		t.Errorf("computed: max_in_flight %d, max_batches_in_flight %d, python %q", h.MaxInFlight, h.MaxBatchesInFlight, h.Python)
	}
	if e := p.ErrorPolicy; e.MaxCrashes != 3 || e.Backoff != (Backoff{time.Second, time.Minute}) || e.DeadLetterTopic != "" {
		t.Errorf("error policy %+v", e)
	}
	shared := Pipeline{Handler: Handler{Plugin: "/bin/h"}}
	for _, tc := range []struct {
		name string
		p    Pipeline
		want int
	}{
		{"a plugin on shared", shared.WithDefaults(), DefaultSharedBatchesInFlight},
		{"in the host's process", shared.InProcess(), DefaultLocalBatchesInFlight},
		{"steps alone", Pipeline{Steps: []Step{{Filter: "true"}}}.WithDefaults(), DefaultLocalBatchesInFlight},
		{"given", Pipeline{Handler: Handler{Plugin: "/bin/h", MaxBatchesInFlight: 3}}.InProcess(), 3},
	} {
		if got := tc.p.Handler.MaxBatchesInFlight; got != tc.want {
			t.Errorf("%s: max_batches_in_flight %d, want %d", tc.name, got, tc.want)
		}
	}
	if b := (Backoff{Initial: 2 * time.Minute}).withDefaults(); b.Max != 2*time.Minute {
		t.Errorf("backoff max %v below its initial", b.Max)
	}
}

// A reload's changes, by the declarations: each field that differs once,
// with its effect; an empty list and none, or a default written out, are
// no change.
func TestChanges(t *testing.T) {
	base := Pipeline{Name: "p", Source: Source{Topics: []string{"in"}, Subscription: "s"}, Handler: Handler{Plugin: "/bin/h"}}
	next := base
	next.Handler.MaxInFlight, next.Handler.Env, next.Source.Rewind, next.Handler.Args = 5000, map[string]string{"A": "b"}, "earliest", []string{}
	got := base.WithDefaults().Changes(next.WithDefaults())
	want := []Change{{"source.rewind", ReloadSource}, {"handler.env", ReloadHandler}, {"handler.max_in_flight", ReloadFlow}}
	if !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	explicit := base
	explicit.Handler.BatchSize = 100
	if c := base.WithDefaults().Changes(explicit.WithDefaults()); len(c) != 0 {
		t.Errorf("a default written out: %v", c)
	}
	f, g := &File{ServiceURL: "pulsar://a:6650"}, &File{ServiceURL: "pulsar://a:6650", Telemetry: Telemetry{HTTP: ":9464"}}
	if c := f.SettingsChanges(g); !slices.Equal(c, []Change{{"telemetry.http", ReloadRestart}}) {
		t.Errorf("settings changes %v", c)
	}
}
