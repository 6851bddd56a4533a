package pipelines_test

import (
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// Stateful picks the pipeline that keeps state: the one named, or the
// only one, and says why when there is none to pick.
func TestStatefulPicksThePipelineThatKeepsState(t *testing.T) {
	kept := func(name string, on bool) pipelines.Pipeline {
		var p pipelines.Pipeline
		p.Name, p.State.Enabled = name, on
		return p
	}
	one := &pipelines.File{Pipelines: []pipelines.Pipeline{kept("a", false), kept("b", true)}}
	two := &pipelines.File{Pipelines: []pipelines.Pipeline{kept("a", true), kept("b", true)}}
	none := &pipelines.File{Pipelines: []pipelines.Pipeline{kept("a", false)}}
	for _, c := range []struct {
		f          *pipelines.File
		name, want string
		err        string
	}{
		{one, "", "b", ""},
		{one, "b", "b", ""},
		{two, "a", "a", ""},
		{one, "a", "", "has pipeline a, which keeps no state"},
		{one, "c", "", "has no pipeline c"},
		{none, "", "", "has no pipeline that keeps state"},
		{two, "", "", "has several pipelines that keep state (a, b): name one"},
	} {
		p, err := c.f.Stateful(c.name)
		switch {
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("Stateful(%q): %v, want %q", c.name, err, c.err)
		case c.err == "" && (err != nil || p.Name != c.want):
			t.Errorf("Stateful(%q): %v, %v; want pipeline %s", c.name, p, err, c.want)
		}
	}
}
