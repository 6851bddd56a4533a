package pipelines_test

import (
	"errors"
	"fmt"

	"github.com/streamrun/streamrun/pipelines"
)

func ExampleParse() {
	src := []byte(`
pipelines:
  - name: shout
    source:
      topics: ["${IN:-orders}"]
      subscription: shout
      type: Key_Shared
    handler:
      plugin: /opt/handlers/uppercase
      instances: ${INSTANCES}
`)
	lookup := func(name string) (string, bool) {
		if name == "INSTANCES" {
			return "3", true
		}
		return "", false
	}
	f, err := pipelines.Parse("shout.yaml", src, lookup)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := f.Pipelines[0].WithDefaults()
	fmt.Println(p.Source.Topics, p.Source.Type, p.Handler.Instances, p.Handler.BatchSize)
	// Output: [orders] key_shared 3 100
}

func ExampleError() {
	src := []byte(`
pipelines:
  - name: shout
    source:
      topic: orders
      subscription: shout
    handler:
      plugin: /opt/handlers/uppercase
      timeout: 30
`)
	_, err := pipelines.Parse("shout.yaml", src, nil)
	var es pipelines.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			fmt.Printf("line %d, column %d, %s: %s\n", e.Line, e.Col, e.Path, e.Msg)
		}
	}
	fmt.Println(err)
	// Output:
	// line 5, column 7, pipelines[0].source.topic: unknown field (did you mean topics?)
	// line 9, column 16, pipelines[0].handler.timeout: 30: a duration needs a unit, such as 30s or 30ms
	// shout.yaml:5:7: pipelines[0].source.topic: unknown field (did you mean topics?)
	// shout.yaml:9:16: pipelines[0].handler.timeout: 30: a duration needs a unit, such as 30s or 30ms
}
