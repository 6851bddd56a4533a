package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/streamrun/streamrun/pipelines"
)

// The checked-in schema is the one the Go types make; regenerate it with
// "go generate ./pipelines" after changing them.
func TestSchemaIsCurrent(t *testing.T) {
	got, err := generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../../docs/pipeline.schema.json")
	if err != nil {
		t.Fatalf("%v: run go generate ./pipelines", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/pipeline.schema.json is stale: run go generate ./pipelines")
	}
}

// The schema accepts every example and every file the loader accepts in
// its tests, and refuses the mistakes an editor should underline.
func TestSchemaChecksFiles(t *testing.T) {
	c := jsonschema.NewCompiler()
	sch, err := c.Compile("../../../docs/pipeline.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, src []byte) error {
		var v any
		if err := yaml.Unmarshal(src, &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return sch.Validate(doc)
	}
	examples, _ := filepath.Glob("../../../examples/pipelines/*.yaml")
	if len(examples) < 5 {
		t.Fatalf("%d examples", len(examples))
	}
	for _, path := range examples {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(path, src); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	const ok = "pipelines:\n  - name: p\n    source: {topics: [t], subscription: s, type: Key_Shared}\n    handler: {plugin: /bin/p, instances: \"${N:-2}\", timeout: 1m30s}\n"
	if err := check("ok", []byte(ok)); err != nil {
		t.Errorf("a valid file: %v", err)
	}
	if err := check("x-", []byte("x-defaults: &d {anything: 1}\n"+ok)); err != nil {
		t.Errorf("a top-level x- key: %v", err)
	}
	for _, c := range []struct{ old, new string }{
		{"name: p", "name: p\n    nme: q"},                 // unknown field
		{"instances: \"${N:-2}\"", "instances: many"},      // wrong type
		{"instances: \"${N:-2}\"", "instances: -1"},        // negative
		{"timeout: 1m30s", "timeout: 90"},                  // duration without a unit
		{"type: Key_Shared", "type: round_robin"},          // unknown type
		{"plugin: /bin/p", "plugin: /bin/p, package: ./p"}, // two handlers
		{"plugin: /bin/p,", ""},                            // no handler (and no steps)
		{"topics: [t],", "topics: [t], pattern: t.*,"},     // topics and pattern
		{"subscription: s,", ""},                           // required field
	} {
		bad := strings.Replace(ok, c.old, c.new, 1)
		if err := check(c.new, []byte(bad)); err == nil {
			t.Errorf("the schema accepts\n%s", bad)
		}
	}
}

// docs/pipelines.md has a row for every field, so a field added to the
// types is documented for users, not only in the schema.
func TestEveryFieldIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/pipelines.md")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(typ reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft == reflect.TypeFor[pipelines.Pipeline]() || ft == reflect.TypeFor[[]pipelines.Pipeline]():
				paths = append(paths, prefix+name)
				walk(reflect.TypeFor[pipelines.Pipeline](), "")
			case ft.Kind() == reflect.Struct:
				walk(ft, prefix+name+".")
			default:
				paths = append(paths, prefix+name)
			}
		}
	}
	walk(reflect.TypeFor[pipelines.File](), "")
	if len(paths) < 30 {
		t.Fatalf("only %d fields: %v", len(paths), paths)
	}
	documented := func(p string) bool {
		if bytes.Contains(doc, []byte("`"+p+"`")) {
			return true
		}
		// A row "`section.*`" stands for a section documented elsewhere.
		for i := strings.LastIndexByte(p, '.'); i > 0; i = strings.LastIndexByte(p[:i], '.') {
			if bytes.Contains(doc, []byte("`"+p[:i]+".*`")) {
				return true
			}
		}
		return false
	}
	for _, p := range paths {
		if !documented(p) {
			t.Errorf("docs/pipelines.md does not document `%s` (a row, or `section.*` for a section documented elsewhere)", p)
		}
	}
}

// docs/pipelines.md's table of a pipeline's fields says what each field
// declares: its plain default and what its change does on reload.
func TestThePipelineTableAgreesWithTheDeclarations(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/pipelines.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| field | default | on reload | meaning |")
	if !ok {
		t.Fatal("docs/pipelines.md has no table with an \"on reload\" column")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = []string{strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])}
	}
	for _, f := range pipelines.PipelineFields() {
		row, ok := rows[f.Path]
		if !ok {
			t.Errorf("no row for %s", f.Path)
			continue
		}
		if row[1] != string(f.Reload) {
			t.Errorf("%s: the table says %q on reload, the field declares %q", f.Path, row[1], f.Reload)
		}
		if f.Default != "" && row[0] != "`"+f.Default+"`" {
			t.Errorf("%s: the table's default is %s, the field declares `%s`", f.Path, row[0], f.Default)
		}
	}
}
