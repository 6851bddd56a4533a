package pipelines

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSeveralStateful is in Stateful's error when the file has several
// pipelines that keep state and none was named.
var ErrSeveralStateful = errors.New("name one")

// Stateful is the pipeline of f that keeps state (State.Enabled): the one
// called name, or, with name "", the only one; `streamrun state` reads
// its changelog. The error, a phrase to follow the file's name ("has no
// pipeline x"), says why there is none to pick.
func (f *File) Stateful(name string) (*Pipeline, error) {
	var stateful []*Pipeline
	for i := range f.Pipelines {
		p := &f.Pipelines[i]
		if name != "" && p.Name == name {
			if !p.State.Enabled {
				return nil, fmt.Errorf("has pipeline %s, which keeps no state", name)
			}
			return p, nil
		}
		if p.State.Enabled {
			stateful = append(stateful, p)
		}
	}
	switch {
	case name != "":
		return nil, fmt.Errorf("has no pipeline %s", name)
	case len(stateful) == 0:
		return nil, errors.New("has no pipeline that keeps state")
	case len(stateful) > 1:
		names := make([]string, len(stateful))
		for i, p := range stateful {
			names[i] = p.Name
		}
		return nil, fmt.Errorf("has several pipelines that keep state (%s): %w", strings.Join(names, ", "), ErrSeveralStateful)
	}
	return stateful[0], nil
}
