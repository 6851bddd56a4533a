package pipelinetest

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

const schemaFile = "../docs/pipelinetest.schema.json"

// TestSchemaNamesEveryField: docs/pipelinetest.schema.json, written by
// hand, has every field the loader reads and none it does not, type by
// type.
func TestSchemaNamesEveryField(t *testing.T) {
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Properties  map[string]any `json:"properties"`
		Definitions map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		def string
		typ reflect.Type
	}{
		{"", reflect.TypeFor[File]()},
		{"case", reflect.TypeFor[Case]()},
		{"input", reflect.TypeFor[Input]()},
		{"fault", reflect.TypeFor[Fault]()},
		{"expect", reflect.TypeFor[Expect]()},
		{"topic_outputs", reflect.TypeFor[TopicOutputs]()},
		{"message", reflect.TypeFor[Message]()},
	} {
		props := sch.Properties
		if c.def != "" {
			props = sch.Definitions[c.def].Properties
		}
		var inSchema, inGo []string
		for k := range props {
			inSchema = append(inSchema, k)
		}
		for i := range c.typ.NumField() {
			name, _, _ := strings.Cut(c.typ.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				inGo = append(inGo, name)
			}
		}
		sort.Strings(inSchema)
		sort.Strings(inGo)
		if !slices.Equal(inSchema, inGo) {
			t.Errorf("%s (%q in the schema): schema has %v, the Go type %v", c.typ.Name(), c.def, inSchema, inGo)
		}
	}
}

// TestSchemaChecksTestFiles: the schema accepts every example test file
// and refuses the mistakes an editor should underline.
func TestSchemaChecksTestFiles(t *testing.T) {
	sch, err := jsonschema.NewCompiler().Compile(schemaFile)
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
	files, err := Find([]string{"../examples"})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(path, src); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	const ok = "pipeline_file: p.yaml\ntimeout: 10s\ncases:\n  - name: c\n    inputs:\n      - {text: a, outcome: ack}\n    faults:\n      - {crash: 1}\n    expect:\n      outputs:\n        - {topic: out, order: any, messages: [{text: A}]}\n"
	if err := check("ok", []byte(ok)); err != nil {
		t.Fatalf("a valid file: %v", err)
	}
	for _, c := range []struct{ old, new string }{
		{"timeout: 10s", "timeut: 10s"},                        // unknown field
		{"timeout: 10s", "timeout: 10"},                        // a duration without a unit
		{"outcome: ack", "outcome: acked"},                     // not an outcome
		{"{text: a,", "{text: a, base64: YQ==,"},               // two payloads
		{"{crash: 1}", "{crash: 1, hang: 1}"},                  // two faults in one
		{"order: any", "order: sorted"},                        // not an order
		{"{topic: out, order: any, ", "{order: any, "},         // no topic
		{"    inputs:\n      - {text: a, outcome: ack}\n", ""}, // no inputs
	} {
		bad := strings.Replace(ok, c.old, c.new, 1)
		if bad == ok {
			t.Fatalf("%q is not in the valid file", c.old)
		}
		if check(c.new, []byte(bad)) == nil {
			t.Errorf("the schema accepts %q in place of %q", c.new, c.old)
		}
	}
}
