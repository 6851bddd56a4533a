package steps

import (
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Outcome is what the steps made of a message.
type Outcome uint8

const (
	// Pass: every step let it through (possibly changed): it goes on.
	Pass Outcome = iota
	// Filtered: a filter step's condition was false.
	Filtered
	// DeadLetter: a dead_letter_if step's condition was true, or an
	// expression failed on a step whose OnError is ErrorDeadLetter.
	DeadLetter
	// Dropped: an expression failed on a step whose OnError is ErrorDrop.
	Dropped
)

func (o Outcome) String() string {
	switch o {
	case Pass:
		return "pass"
	case Filtered:
		return "filtered"
	case DeadLetter:
		return "dead_letter"
	case Dropped:
		return "dropped"
	}
	return "unknown"
}

// Verdict is the outcome of running the steps over one message.
type Verdict struct {
	Outcome Outcome
	// Step is the index of the step that decided a message that did not
	// pass; -1 when it passed.
	Step int
	// Reason says why a message is dead-lettered.
	Reason string
	// Topic is the topic a route step chose; "" when none did.
	Topic string
	// Err is the expression's error when one failed (Dropped, DeadLetter
	// with an error as its reason, or a skipped step's).
	Err error
}

// Chain is a pipeline's compiled steps, run in order. It is safe for
// concurrent use through a Runner each.
type Chain struct {
	steps  []Step
	totals []totals
	max    int // Options.MaxSize of the env the steps were compiled in
}

type totals struct{ in, out, filtered, deadLettered, errors atomic.Int64 }

// Counts are what one step did, counted in messages.
type Counts struct {
	// In: messages the step was given; Out: messages it passed on.
	In, Out int64
	// Filtered by a filter step; DeadLettered by a dead_letter_if step
	// (or an error whose OnError dead-letters).
	Filtered, DeadLettered int64
	// Errors: messages on which one of its expressions failed, whatever
	// OnError then did.
	Errors int64
}

// NewChain makes a chain of steps compiled in env.
func NewChain(env *Env, steps []Step) *Chain {
	return &Chain{steps: steps, totals: make([]totals, len(steps)), max: env.opts.MaxSize}
}

// Steps are the chain's steps.
func (c *Chain) Steps() []Step { return c.steps }

// Totals are the counts of every step since the chain was made, in the
// order of the steps.
func (c *Chain) Totals() []Counts {
	out := make([]Counts, len(c.totals))
	for i := range c.totals {
		t := &c.totals[i]
		out[i] = Counts{In: t.in.Load(), Out: t.out.Load(), Filtered: t.filtered.Load(),
			DeadLettered: t.deadLettered.Load(), Errors: t.errors.Load()}
	}
	return out
}

// Runner runs a chain over messages, one at a time: one per goroutine.
// It counts what each step does until Flush adds the counts to the
// chain's totals, so that a batch costs the totals one update a step.
type Runner struct {
	c      *Chain
	act    activation
	counts []Counts
	vals   []assigned // a map step's values, before they are set
}

type assigned struct {
	b []byte
	s string
	t any // time.Time, boxed only for event times
}

// NewRunner makes a runner of c.
func (c *Chain) NewRunner() *Runner {
	return &Runner{c: c, counts: make([]Counts, len(c.steps)), act: activation{adapter: types.DefaultTypeAdapter}}
}

// Counts are what each step did since the last Flush.
func (r *Runner) Counts() []Counts { return r.counts }

// Flush adds the counts to the chain's totals and starts them over.
func (r *Runner) Flush() {
	for i := range r.counts {
		n, t := &r.counts[i], &r.c.totals[i]
		if n.In == 0 && n.Errors == 0 {
			continue
		}
		t.in.Add(n.In)
		t.out.Add(n.Out)
		t.filtered.Add(n.Filtered)
		t.deadLettered.Add(n.DeadLettered)
		t.errors.Add(n.Errors)
		*n = Counts{}
	}
}

// Run runs the steps over m, changing it as map steps say. The map it
// holds in Properties is replaced, never written, when a step sets a
// property.
func (r *Runner) Run(m *Message) Verdict {
	r.act.reset(m)
	v := Verdict{Step: -1}
	ownProps := false
	for i := range r.c.steps {
		s := &r.c.steps[i]
		n := &r.counts[i]
		n.In++
		small := r.small(m)
		var err error
		switch s.Kind {
		case Filter:
			var keep bool
			if keep, err = r.cond(s.If, small); err == nil && !keep {
				n.Filtered++
				return Verdict{Outcome: Filtered, Step: i, Topic: v.Topic}
			}
		case DeadLetterIf:
			var hit bool
			if hit, err = r.cond(s.If, small); err == nil && hit {
				n.DeadLettered++
				return Verdict{Outcome: DeadLetter, Step: i, Reason: r.reason(s, small), Topic: v.Topic}
			}
		case Map:
			err = r.mapStep(s, m, small, &ownProps)
		case Route:
			var t string
			if s.To != nil {
				t, err = r.str(s.To, small)
			}
			if err == nil {
				if t == "" {
					t = s.Default
				}
				v.Topic = t
			}
		}
		if err != nil {
			n.Errors++
			err = fmt.Errorf("step %s: %w", s.Name, describe(err))
			switch s.OnError {
			case ErrorDrop:
				return Verdict{Outcome: Dropped, Step: i, Err: err, Topic: v.Topic}
			case ErrorSkip:
				v.Err = err
			default:
				n.DeadLettered++
				return Verdict{Outcome: DeadLetter, Step: i, Reason: err.Error(), Err: err, Topic: v.Topic}
			}
		}
		n.Out++
	}
	return v
}

// cond evaluates a condition.
func (r *Runner) cond(x *Expr, small bool) (bool, error) {
	out, err := x.eval(&r.act, small)
	if err != nil {
		return false, err
	}
	return asBool(out)
}

// str evaluates an expression that gives a string.
func (r *Runner) str(x *Expr, small bool) (string, error) {
	out, err := x.eval(&r.act, small)
	if err != nil {
		return "", err
	}
	return asString(out)
}

// reason is a dead_letter_if step's reason: its expression's, else (or
// when that fails) one naming the step.
func (r *Runner) reason(s *Step, small bool) string {
	def := "dead_letter_if " + s.Name
	if s.Reason == nil {
		return def
	}
	why, err := r.str(s.Reason, small)
	if err != nil {
		return fmt.Sprintf("%s (its reason failed: %v)", def, describe(err))
	}
	return why
}

// mapStep evaluates every field of a map step over the message as it
// is, then sets them: nothing is set when one fails.
func (r *Runner) mapStep(s *Step, m *Message, small bool, ownProps *bool) error {
	r.vals = r.vals[:0]
	for _, a := range s.Set {
		out, err := a.Expr.eval(&r.act, small)
		if err != nil {
			return fmt.Errorf("%s: %w", a.label(), err)
		}
		var val assigned
		switch a.Field {
		case FieldPayload:
			val.b, err = asPayload(out)
		case FieldEventTime:
			var t time.Time
			t, err = asTime(out)
			val.t = t
		default:
			val.s, err = asString(out)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a.label(), err)
		}
		r.vals = append(r.vals, val)
	}
	for i, a := range s.Set {
		val := &r.vals[i]
		switch a.Field {
		case FieldPayload:
			m.Payload = val.b
		case FieldKey:
			m.Key = val.s
		case FieldOrderingKey:
			m.OrderingKey = val.s
		case FieldEventTime:
			m.EventTime = val.t.(time.Time)
		case FieldProperty:
			if !*ownProps {
				p := make(map[string]string, len(m.Properties)+len(s.Set))
				maps.Copy(p, m.Properties)
				m.Properties, *ownProps = p, true
			}
			m.Properties[a.Name] = val.s
		}
	}
	return nil
}

func (a *Assign) label() string {
	switch a.Field {
	case FieldPayload:
		return "payload"
	case FieldKey:
		return "key"
	case FieldOrderingKey:
		return "ordering_key"
	case FieldEventTime:
		return "event_time"
	}
	return "properties." + a.Name
}

// small reports whether m is within the sizes the expressions' cost
// estimates assumed, so that bounded expressions may run without the
// run-time tracker.
func (r *Runner) small(m *Message) bool {
	max := r.c.max
	if len(m.Payload) > max || len(m.Key) > max || len(m.OrderingKey) > max || len(m.Topic) > max {
		return false
	}
	if len(m.Properties) == 0 {
		return true
	}
	n := 0
	for k, v := range m.Properties {
		n += len(k) + len(v)
	}
	return n <= max
}

// describe words an evaluation's error for a reason or a log.
func describe(err error) error {
	var cancelled interpreter.EvalCancelledError
	if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
		return ErrCostLimit
	}
	return err
}

// ErrCostLimit is the error of an evaluation stopped at the cost limit.
var ErrCostLimit = errors.New("the expression reached its cost limit")
