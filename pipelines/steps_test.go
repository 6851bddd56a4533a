package pipelines_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/steps"
)

const stepsHead = `pipelines:
  - name: p
    source: {topics: [in], subscription: s}
    outputs: [out]
    steps:
`

// An expression's problem is reported at its own line and column in the
// file, whatever YAML style holds the expression.
func TestStepExpressionErrorsPointInsideTheExpression(t *testing.T) {
	for _, tc := range []struct {
		name, steps, want string
	}{
		{"plain", `      - filter: json.amount >= 0 && nope
`, `f.yaml:6:37: pipelines[0].steps[0].filter: undeclared reference to 'nope'`},
		{"double quoted", `      - filter: "key == \"a\" && nope"
`, `f.yaml:6:34: pipelines[0].steps[0].filter: undeclared reference to 'nope'`},
		{"single quoted", `      - filter: 'key == ''a'' && nope'
`, `f.yaml:6:34: pipelines[0].steps[0].filter: undeclared reference to 'nope'`},
		{"literal block", `      - filter: |
          json.amount >= 0 &&
            nope
`, `f.yaml:8:13: pipelines[0].steps[0].filter: undeclared reference to 'nope'`},
		{"folded block", `      - dead_letter_if: >-
          json.amount < 0 ||
          json.total <
`, `f.yaml:8:23: pipelines[0].steps[0].dead_letter_if: Syntax error`},
		{"plain over two lines", `      - map:
          key: json.id +
            nope
`, `f.yaml:8:13: pipelines[0].steps[0].map.key: undeclared reference to 'nope'`},
		{"a property", `      - map:
          properties: {region: 'properties.region + nope'}
`, `f.yaml:7:53: pipelines[0].steps[0].map.properties.region: undeclared reference to 'nope'`},
		{"a type at the start of a block", `      - filter: |
          size(payload)
`, `f.yaml:7:11: pipelines[0].steps[0].filter: gives an int, want a bool`},
		{"route.to", `      - handler
      - route: {to: 'json.country', default: out}
`, `f.yaml:6:9: pipelines[0].steps[0]: marks the handler's place, but the pipeline has no handler`},
	} {
		_, err := pipelines.Parse("f.yaml", []byte(stepsHead+tc.steps), nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got\n%v\nwant\n%s...", tc.name, err, tc.want)
		}
	}
}

func TestStepsShapesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"two kinds", stepsHead + `      - {filter: 'true', dead_letter_if: 'false'}
`, `f.yaml:6:9: pipelines[0].steps[0]: filter and dead_letter_if exclude each other`},
		{"no kind", stepsHead + `      - {name: x}
`, `f.yaml:6:9: pipelines[0].steps[0]: set one of filter, map, route and dead_letter_if`},
		{"a word that is not handler", stepsHead + `      - filter
`, `f.yaml:6:9: pipelines[0].steps[0]: "filter": want a mapping (key: value lines), or handler`},
		{"on_error", stepsHead + `      - {filter: 'true', on_error: retry}
`, `f.yaml:6:36: pipelines[0].steps[0].on_error: "retry": want dead_letter, drop or skip`},
		{"reason without dead_letter_if", stepsHead + `      - {filter: 'true', reason: '"x"'}
`, `f.yaml:6:34: pipelines[0].steps[0].reason: only for a dead_letter_if step`},
		{"a map setting nothing", stepsHead + `      - map: {}
`, `f.yaml:6:14: pipelines[0].steps[0].map: sets nothing`},
		{"duplicate names", stepsHead + `      - {filter: 'true'}
      - {name: filter-0, filter: 'false'}
`, `f.yaml:7:16: pipelines[0].steps[1].name: "filter-0" is also the name of steps[0]`},
		{"route before the handler", `pipelines:
  - name: p
    source: {topics: [in], subscription: s}
    handler: {plugin: /bin/true}
    steps:
      - route: {default: out}
`, `f.yaml:6:16: pipelines[0].steps[0].route: a route chooses where a message is published, which the handler decides`},
		{"no handler, no output, no route", `pipelines:
  - name: p
    source: {topics: [in], subscription: s}
    steps:
      - filter: 'true'
`, `f.yaml:2:5: pipelines[0].outputs: a pipeline without a handler publishes each message to its one output`},
		{"no handler, a handler's config", `pipelines:
  - name: p
    source: {topics: [in], subscription: s}
    handler: {config: {a: 1}, batch_size: 10}
    outputs: [out]
    steps:
      - filter: 'true'
`, `f.yaml:4:23: pipelines[0].handler.config: only with a handler (plugin, package or script)`},
		{"a bad default topic", stepsHead + `      - route: {default: "a/b"}
`, `f.yaml:6:26: pipelines[0].steps[0].route.default: `},
	} {
		_, err := pipelines.Parse("f.yaml", []byte(tc.file), nil)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got\n%v\nwant\n%s...", tc.name, err, tc.want)
		}
	}
}

func TestStepsCompileBeforeAndAfterTheHandler(t *testing.T) {
	f, err := pipelines.Parse("f.yaml", []byte(`pipelines:
  - name: p
    source: {topics: [in], subscription: s}
    handler: {plugin: /bin/true}
    steps:
      - filter: json.amount >= 0
      - handler
      - route: {to: 'json.country == "de" ? "orders-de" : ""', default: orders}
        name: by-country
  - name: alone
    source: {topics: [in], subscription: t}
    outputs: [out]
    steps:
      - map: {payload: text.upperAscii()}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := newStepsEnv(t)
	cs, err := f.Pipelines[0].CompileSteps(env)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Before) != 1 || cs.Before[0].Name != "filter-0" || len(cs.After) != 1 || cs.After[0].Name != "by-country" {
		t.Errorf("before %+v, after %+v", cs.Before, cs.After)
	}
	if f.Pipelines[1].HasHandler() || !f.Pipelines[0].HasHandler() {
		t.Error("HasHandler")
	}
	if cs, err := f.Pipelines[1].CompileSteps(env); err != nil || len(cs.Before) != 1 {
		t.Errorf("%+v, %v", cs, err)
	}
}

func newStepsEnv(t *testing.T) *steps.Env {
	t.Helper()
	env, err := steps.NewEnv(steps.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// A map step that sets the key before the handler of a keyed-state
// pipeline with several instances is refused at the key's expression,
// saying why and what to do instead: the host picks a message's instance
// by the key it came with, so two keys mapped to one would have two
// instances change one value at once. With one instance, with the key
// set after the handler, with only the ordering key set, or without
// keyed state, the same steps are fine.
func TestAKeyMappedBeforeKeyedStateOnSeveralInstancesIsRefused(t *testing.T) {
	file := func(state string, instances int, steps string) string {
		return fmt.Sprintf(`pipelines:
  - name: p
    source: {topics: [in], subscription: s, type: exclusive}
    handler: {plugin: /bin/true, instances: %d}
    state: {enabled: %s}
    steps:
%s`, instances, state, steps)
	}
	keyFirst := `      - filter: 'true'
      - map: {key: '"all"'}
`
	_, err := pipelines.Parse("f.yaml", []byte(file("true", 2, keyFirst)), nil)
	want := `f.yaml:8:20: pipelines[0].steps[1].map.key: sets the key before the handler of a pipeline with keyed state and 2 instances`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got\n%v\nwant\n%s...", err, want)
	}
	for _, words := range []string{"two instances at once", "handler.instances: 1", "set the key upstream"} {
		if !strings.Contains(err.Error(), words) {
			t.Errorf("the error does not say %q: %v", words, err)
		}
	}
	for name, f := range map[string]string{
		"one instance":          file("true", 1, keyFirst),
		"no keyed state":        file("false", 2, keyFirst),
		"the key after handler": file("true", 2, "      - handler\n"+keyFirst),
		"the ordering key": file("true", 2, `      - map: {ordering_key: '"all"'}
`),
	} {
		if _, err := pipelines.Parse("f.yaml", []byte(f), nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
