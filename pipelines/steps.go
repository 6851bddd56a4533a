package pipelines

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/streamrun/streamrun/steps"
)

// This file holds a pipeline's steps as the file writes them, their
// checks, and their compilation (package steps evaluates them).

// Step is one step of a pipeline (docs/pipelines.md, "Steps"): exactly
// one of Filter, Map, Route and DeadLetterIf, or, written as the plain
// word "handler" in the list, the place of the handler among the steps.
// Expressions are CEL (package steps lists what they see of a message).
type Step struct {
	// Name names the step in metrics, traces and dead-letter reasons:
	// letters, digits, '-', '_' and '.', unique among the pipeline's
	// steps. Default "<kind>-<index>", such as "filter-0".
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Filter keeps the messages for which this expression (a bool) is
	// true; the others are acknowledged and counted as filtered.
	Filter string `yaml:"filter,omitempty" json:"filter,omitempty"`
	// Map sets fields of the message from expressions.
	Map *MapStep `yaml:"map,omitempty" json:"map,omitempty"`
	// Route chooses the topic the message is published to.
	Route *RouteStep `yaml:"route,omitempty" json:"route,omitempty"`
	// DeadLetterIf sends the message to the dead-letter topic when this
	// expression (a bool) is true.
	DeadLetterIf string `yaml:"dead_letter_if,omitempty" json:"dead_letter_if,omitempty"`
	// Reason is the dead-letter reason of a DeadLetterIf step, an
	// expression giving a string. Default "dead_letter_if <name>".
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	// OnError is what becomes of a message on which one of the step's
	// expressions fails (a missing JSON field, a value of the wrong type,
	// the cost limit): dead_letter (with the error as the reason), drop
	// (acknowledged, nothing published) or skip (as if the step were not
	// there). Default dead_letter.
	OnError string `yaml:"on_error,omitempty" json:"on_error,omitempty"`
	// Handler marks the handler's place: the steps before it act on each
	// message before the handler, the steps after it on each of the
	// handler's outputs. Written "- handler" in the file. Without it,
	// every step comes before the handler.
	Handler bool `yaml:"-" json:"-"`
}

// HandlerMarker is how a pipeline file writes Step.Handler.
const HandlerMarker = "handler"

// fromScalar reads the scalar form of a step: the handler's place.
func (s *Step) fromScalar(v string) bool {
	if v != HandlerMarker {
		return false
	}
	*s = Step{Handler: true}
	return true
}

// MapStep sets fields of the message, each from an expression. Every
// expression sees the message as it was before the step.
type MapStep struct {
	// Payload becomes the payload: an expression giving bytes, a string
	// (its UTF-8 bytes), or a map or list (written as JSON).
	Payload string `yaml:"payload,omitempty" json:"payload,omitempty"`
	// Key becomes the key (a string). Before the handler of a pipeline
	// with keyed state, only with handler.instances 1: an instance is
	// picked by the key a message came with.
	Key string `yaml:"key,omitempty" json:"key,omitempty"`
	// OrderingKey becomes the ordering key (a string).
	OrderingKey string `yaml:"ordering_key,omitempty" json:"ordering_key,omitempty"`
	// Properties are set, by name, each from an expression giving a
	// string; the message's other properties stay.
	Properties map[string]string `yaml:"properties,omitempty" json:"properties,omitempty"`
	// EventTime becomes the event time: a timestamp, or an int of
	// milliseconds since the epoch.
	EventTime string `yaml:"event_time,omitempty" json:"event_time,omitempty"`
}

// RouteStep chooses the topic a message is published to: the topic To
// gives, else Default.
type RouteStep struct {
	// To is an expression giving the topic's name; "" means Default.
	To string `yaml:"to,omitempty" json:"to,omitempty"`
	// Default is the topic when To is not set or gives "".
	Default string `yaml:"default,omitempty" json:"default,omitempty"`
}

// keyBeforeState refuses a map step that sets the key before the handler
// of a pipeline with keyed state and several instances. The host gives a
// message to an instance by the key it came with (laneHash), before the
// steps run on the worker: two keys the step maps to one would reach two
// instances at once, each reading and changing that key's value from
// what it was (docs/pipelines.md, "Keyed state").
func (c *checker) keyBeforeState(p *Pipeline, marker int) {
	if !p.State.Enabled || p.Handler.Instances <= 1 {
		return
	}
	for i := range min(marker, len(p.Steps)) {
		if m := p.Steps[i].Map; m != nil && m.Key != "" {
			c.bad(fmt.Sprintf("steps[%d].map.key", i),
				"sets the key before the handler of a pipeline with keyed state and %d instances: "+
					"messages go to an instance by the key they came with, so two keys this maps to one would reach two instances at once, "+
					"each changing that key's value from what it was; use handler.instances: 1, "+
					"or set the key upstream (a pipeline of steps alone publishing to the topic this one reads)",
				p.Handler.Instances)
		}
	}
}

// Step kinds' names, as the file writes them.
const (
	kindFilter       = "filter"
	kindMap          = "map"
	kindRoute        = "route"
	kindDeadLetterIf = "dead_letter_if"
)

// kinds are the kinds s sets, by their names in the file.
func (s *Step) kinds() []string {
	var ks []string
	if s.Filter != "" {
		ks = append(ks, kindFilter)
	}
	if s.Map != nil {
		ks = append(ks, kindMap)
	}
	if s.Route != nil {
		ks = append(ks, kindRoute)
	}
	if s.DeadLetterIf != "" {
		ks = append(ks, kindDeadLetterIf)
	}
	return ks
}

// StepName is the name of step i of the pipeline: its Name, else its
// kind and index.
func (p *Pipeline) StepName(i int) string {
	s := &p.Steps[i]
	if s.Name != "" {
		return s.Name
	}
	k := s.kinds()
	if len(k) == 0 {
		return fmt.Sprintf("step-%d", i)
	}
	return fmt.Sprintf("%s-%d", k[0], i)
}

// HasHandler reports whether the pipeline runs a handler (a plugin, a
// package or a script); one without runs its steps alone.
func (p *Pipeline) HasHandler() bool {
	h := &p.Handler
	return h.Plugin != "" || h.Package != "" || h.Script != ""
}

// CompiledSteps are a pipeline's steps, compiled.
type CompiledSteps struct {
	// Before act on each message before the handler, or alone in a
	// pipeline without one.
	Before []steps.Step
	// After act on each output of the handler.
	After []steps.Step
}

// CompileSteps compiles the pipeline's steps in env. The error joins a
// *FieldError for each problem, at the expression's place (Offset).
func (p *Pipeline) CompileSteps(env *steps.Env) (CompiledSteps, error) {
	c := &checker{}
	cs := c.compileSteps(p, env)
	return cs, errors.Join(c.errs...)
}

func (c *checker) compileSteps(p *Pipeline, env *steps.Env) CompiledSteps {
	var cs CompiledSteps
	after := false
	for i := range p.Steps {
		s := &p.Steps[i]
		if s.Handler {
			after = true
			continue
		}
		st, ok := c.compileStep(p, i, env)
		if !ok {
			continue
		}
		if after {
			cs.After = append(cs.After, st)
		} else {
			cs.Before = append(cs.Before, st)
		}
	}
	return cs
}

// compileStep compiles step i.
func (c *checker) compileStep(p *Pipeline, i int, env *steps.Env) (steps.Step, bool) {
	s := &p.Steps[i]
	at := fmt.Sprintf("steps[%d]", i)
	ok := true
	expr := func(field, src string, want steps.Want) *steps.Expr {
		x, err := env.Compile(src, want)
		if err != nil {
			ok = false
			var ce *steps.CompileError
			if errors.As(err, &ce) {
				for _, pr := range ce.Problems {
					c.badAt(at+"."+field, pr.Offset, "%s", pr.Msg)
				}
			} else {
				c.bad(at+"."+field, "%v", err)
			}
		}
		return x
	}
	st := steps.Step{Name: p.StepName(i)}
	st.OnError, _ = parseOnError(s.OnError)
	switch k := s.kinds(); {
	case len(k) != 1:
		return st, false // reported by checkSteps
	case s.Filter != "":
		st.Kind, st.If = steps.Filter, expr(kindFilter, s.Filter, steps.WantBool)
	case s.DeadLetterIf != "":
		st.Kind, st.If = steps.DeadLetterIf, expr(kindDeadLetterIf, s.DeadLetterIf, steps.WantBool)
		if s.Reason != "" {
			st.Reason = expr("reason", s.Reason, steps.WantString)
		}
	case s.Route != nil:
		st.Kind, st.Default = steps.Route, s.Route.Default
		if s.Route.To != "" {
			st.To = expr("route.to", s.Route.To, steps.WantString)
		}
	case s.Map != nil:
		st.Kind = steps.Map
		m := s.Map
		for _, f := range []struct {
			name  string
			field steps.Field
			src   string
		}{{"payload", steps.FieldPayload, m.Payload}, {"key", steps.FieldKey, m.Key},
			{"ordering_key", steps.FieldOrderingKey, m.OrderingKey}, {"event_time", steps.FieldEventTime, m.EventTime}} {
			if f.src != "" {
				st.Set = append(st.Set, steps.Assign{Field: f.field, Expr: expr("map."+f.name, f.src, f.field.Want())})
			}
		}
		names := make([]string, 0, len(m.Properties))
		for n := range m.Properties {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			st.Set = append(st.Set, steps.Assign{Field: steps.FieldProperty, Name: n,
				Expr: expr("map.properties."+n, m.Properties[n], steps.WantString)})
		}
	}
	return st, ok
}

func parseOnError(s string) (steps.OnError, error) {
	switch squash(s) {
	case "", "deadletter":
		return steps.ErrorDeadLetter, nil
	case "drop":
		return steps.ErrorDrop, nil
	case "skip":
		return steps.ErrorSkip, nil
	}
	return 0, fmt.Errorf("%q: want dead_letter, drop or skip", s)
}

// checkSteps checks the steps' shape (a kind each, names, the handler's
// place, where messages go) and compiles their expressions in env.
func (c *checker) checkSteps(p *Pipeline, env func() (*steps.Env, error)) {
	if len(p.Steps) == 0 {
		return
	}
	names := map[string]int{}
	marker, routeBefore := -1, -1
	for i := range p.Steps {
		s := &p.Steps[i]
		at := fmt.Sprintf("steps[%d]", i)
		if s.Handler {
			switch {
			case marker >= 0:
				c.bad(at, "the handler's place is already steps[%d]", marker)
			case !p.HasHandler():
				c.bad(at, "marks the handler's place, but the pipeline has no handler (plugin, package or script)")
			}
			marker = i
			continue
		}
		switch k := s.kinds(); len(k) {
		case 0:
			c.bad(at, "set one of filter, map, route and dead_letter_if (or write handler for the handler's place)")
		case 1:
		default:
			c.bad(at, "%s exclude each other: one kind a step", strings.Join(k, " and "))
		}
		if s.Name != "" && !nameRE.MatchString(s.Name) {
			c.bad(at+".name", "%q: use letters, digits, '-', '_' and '.'", s.Name)
		}
		name := p.StepName(i)
		if j, dup := names[name]; dup {
			c.bad(at+".name", "%q is also the name of steps[%d]", name, j)
		}
		names[name] = i
		if s.Reason != "" && s.DeadLetterIf == "" {
			c.bad(at+".reason", "only for a dead_letter_if step")
		}
		if _, err := parseOnError(s.OnError); err != nil {
			c.bad(at+".on_error", "%v", err)
		}
		if m := s.Map; m != nil && m.Payload == "" && m.Key == "" && m.OrderingKey == "" && m.EventTime == "" && len(m.Properties) == 0 {
			c.bad(at+".map", "sets nothing: set payload, key, ordering_key, properties or event_time")
		}
		if r := s.Route; r != nil {
			if r.To == "" && r.Default == "" {
				c.bad(at+".route", "set to (an expression) or default (a topic), or both")
			}
			if r.Default != "" {
				c.topic(at+".route.default", r.Default)
			}
			if marker < 0 && routeBefore < 0 {
				routeBefore = i
			}
		}
	}
	if p.HasHandler() && marker < 0 {
		marker = len(p.Steps)
	}
	c.keyBeforeState(p, marker)
	if routeBefore >= 0 && routeBefore < marker {
		c.bad(fmt.Sprintf("steps[%d].route", routeBefore),
			"a route chooses where a message is published, which the handler decides: put it after the handler's place (- handler)")
	}
	if !p.HasHandler() && routeBefore < 0 && len(p.Outputs) != 1 {
		c.bad("outputs", "a pipeline without a handler publishes each message to its one output, or where a route step sends it: list one output or add a route")
	}
	e, err := env()
	if err != nil {
		c.bad("steps", "%v", err)
		return
	}
	c.compileSteps(p, e)
}
