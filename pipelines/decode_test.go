package pipelines

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Kinds no field uses yet (a telemetry section may add them) decode too.
func TestDecodeFloatsAndPointers(t *testing.T) {
	var v struct {
		Ratio float64 `yaml:"ratio"`
		On    *bool   `yaml:"on"`
		Off   *int    `yaml:"off"`
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("ratio: ${R}\non: true\n"), &doc); err != nil {
		t.Fatal(err)
	}
	d := &decoder{file: "f", lookup: func(string) (string, bool) { return "0.25", true }, at: map[string]pos{}}
	d.value(doc.Content[0], reflect.ValueOf(&v).Elem(), "", 0)
	if len(d.errs) > 0 || v.Ratio != 0.25 || v.On == nil || !*v.On || v.Off != nil {
		t.Errorf("%+v, %v", v, d.errs)
	}
	if err := yaml.Unmarshal([]byte("ratio: .nan\n"), &doc); err != nil {
		t.Fatal(err)
	}
	d.value(doc.Content[0], reflect.ValueOf(&v).Elem(), "", 0)
	if len(d.errs) != 1 || d.errs[0].Path != "ratio" {
		t.Errorf("NaN: %v", d.errs)
	}
}
