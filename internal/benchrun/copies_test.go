package benchrun

import (
	"fmt"
	"testing"
)

// Copies reaches the identity handler's config and what a run waits for.
func TestCopiesMakeTheIdentityHandlersOutputs(t *testing.T) {
	o := Options{Handler: HandlerOptions{InProcess: true, Identity: []string{"x"}, BatchSize: 1, Instances: 1, Copies: 3}}
	ps, _, err := o.pipelineSet([]string{"a"}, []string{"a-out"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ps[0].Handler.Config); got != "map[copies:3 output:a-out]" {
		t.Errorf("config %s, want map[copies:3 output:a-out]", got)
	}
	if n := o.Handler.outputsPerInput(); n != 3 {
		t.Errorf("outputs per input %d, want 3", n)
	}
	o.Handler.Copies = 0
	if ps, _, _ = o.pipelineSet([]string{"a"}, []string{"a-out"}); fmt.Sprint(ps[0].Handler.Config) != "map[output:a-out]" || o.Handler.outputsPerInput() != 1 {
		t.Errorf("without copies: config %v, outputs per input %d", ps[0].Handler.Config, o.Handler.outputsPerInput())
	}
}

// A run with Copies receives that many outputs of each message, exactly
// once (runOutputs fails otherwise), on the embedded broker.
func TestCopiesArriveExactlyOnce(t *testing.T) {
	r := runOutputs(t, "", 300, 3, true)
	if r.Conditions.Handler.OutputsPerInput != 3 {
		t.Errorf("conditions say %d outputs an input, want 3", r.Conditions.Handler.OutputsPerInput)
	}
}
