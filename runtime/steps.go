package runtime

import (
	"context"
	"fmt"
	"strconv"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/steps"
)

// This file runs a pipeline's steps (package steps): those before the
// handler on each message as its batch reaches the worker, those after
// it on each output of the handler's answer, and, in a pipeline without
// a handler, the steps alone, whose "instance" (passInstance) publishes
// each message that passed them as one output.

// stages are a pipeline's compiled steps.
type stages struct {
	before, after *steps.Chain // nil when there are none
	// output is where a message that no route sent elsewhere goes, in a
	// pipeline without a handler: its one output.
	output string
}

// stepsEnv is the host's expression environment, made once.
func (h *Host) stepsEnv() (*steps.Env, error) {
	h.envOnce.Do(func() { h.env, h.envErr = steps.NewEnv(steps.Options{}) })
	return h.env, h.envErr
}

// compileStages compiles cfg's steps; nil when it has none.
func (h *Host) compileStages(cfg *pipelines.Pipeline) (*stages, error) {
	if len(cfg.Steps) == 0 {
		return nil, nil
	}
	env, err := h.stepsEnv()
	if err != nil {
		return nil, err
	}
	cs, err := cfg.CompileSteps(env)
	if err != nil {
		return nil, fmt.Errorf("steps: %w", err)
	}
	st := &stages{}
	if len(cs.Before) > 0 {
		st.before = steps.NewChain(env, cs.Before)
	}
	if len(cs.After) > 0 {
		st.after = steps.NewChain(env, cs.After)
	}
	if len(cfg.Outputs) > 0 {
		st.output = cfg.Outputs[0]
	}
	return st, nil
}

// runBefore runs the steps before the handler over items and returns
// those that go on to it, each with the message as the steps left it
// (item.sm) and the topic a route chose (item.topic). The others are
// settled here: filtered and dropped ones acknowledged, the rest
// dead-lettered.
func (w *worker) runBefore(b *batch, items []*item) []*item {
	c := w.stages.before
	r := c.NewRunner()
	sms := make([]steps.Message, len(items))
	kept := items[:0:0]
	type stopped struct {
		it *item
		v  steps.Verdict
	}
	var out []stopped
	for i, it := range items {
		windowJSON(it) // the steps read a window as JSON
		m := it.m
		sm := &sms[i]
		*sm = steps.Message{Payload: m.Payload, Key: m.Key, OrderingKey: m.OrderingKey, Properties: m.Properties,
			Topic: m.Topic, PublishTime: m.PublishTime, EventTime: m.EventTime, ID: &m.ID, RedeliveryCount: m.RedeliveryCount}
		v := r.Run(sm)
		if v.Outcome == steps.Pass {
			it.sm, it.topic = sm, v.Topic
			kept = append(kept, it)
			continue
		}
		out = append(out, stopped{it, v})
	}
	// The steps' events go on the batch's span before any of its messages
	// is settled: settling the last one ends the span.
	w.out.stepsRan(b, w.id, c, r.Counts())
	r.Flush()
	for _, s := range out {
		switch s.v.Outcome {
		case steps.Filtered:
			w.out.filtered(s.it, c.Steps()[s.v.Step].Name)
		case steps.Dropped:
			w.out.dropped(s.it, s.v.Err)
		default:
			w.out.deadLetter(s.it, s.v.Reason)
		}
	}
	return kept
}

// runAfter runs the steps after the handler over each output of res,
// the answers for items: a filtered output is not published, a routed
// one goes to its new topic, and a dead letter (or a drop) makes its
// input's outcome, none of its outputs published.
func (w *worker) runAfter(b *batch, items []*item, res []plugin.Result) {
	c := w.stages.after
	r := c.NewRunner()
	for i := range res {
		rs := &res[i]
		if rs.Outcome != plugin.OutcomeAck || len(rs.Outputs) == 0 {
			continue
		}
		m := items[i].m
		kept := rs.Outputs[:0]
	outputs:
		for _, o := range rs.Outputs {
			sm := steps.Message{Payload: o.Payload, Key: o.Key, OrderingKey: string(o.OrderingKey), Properties: o.Properties,
				Topic: o.Topic, PublishTime: m.PublishTime, EventTime: o.EventTime, ID: &m.ID, RedeliveryCount: m.RedeliveryCount}
			v := r.Run(&sm)
			if v.Outcome == steps.Pass && v.Topic != "" {
				if err := checkRouted(v.Topic); err != nil {
					v = steps.Verdict{Outcome: steps.DeadLetter, Reason: err.Error()}
				}
			}
			switch v.Outcome {
			case steps.Pass:
				o.Payload, o.Key, o.Properties, o.EventTime = sm.Payload, sm.Key, sm.Properties, sm.EventTime
				if sm.OrderingKey != string(o.OrderingKey) {
					o.OrderingKey = []byte(sm.OrderingKey)
				}
				if v.Topic != "" {
					o.Topic = v.Topic
				}
				kept = append(kept, o)
				continue
			case steps.Filtered:
				continue
			case steps.Dropped:
				*rs = plugin.Result{Outcome: plugin.OutcomeDrop, Reason: v.Err.Error()}
			default:
				*rs = plugin.Result{Outcome: plugin.OutcomeDeadLetter, Reason: v.Reason}
			}
			kept = nil
			break outputs
		}
		if rs.Outcome == plugin.OutcomeAck {
			rs.Outputs = kept
		}
	}
	w.out.stepsRan(b, w.id, c, r.Counts())
	r.Flush()
}

// passInstance is the handler of a pipeline of steps alone: each message
// (as the steps left it) is one output, to the topic a route chose or the
// pipeline's output. It runs in the host's process, has no process of
// its own and cannot crash.
type passInstance struct{ output string }

// passStarter starts passInstances.
func passStarter(output string) starter {
	return func(context.Context, int) (instance, error) { return passInstance{output: output}, nil }
}

func (pi passInstance) ProcessBatch(_ context.Context, b host.Batch) ([]plugin.Result, error) {
	items, ok := b.(callBatch)
	if !ok {
		return nil, fmt.Errorf("a pipeline of steps alone was called with %T", b)
	}
	res := make([]plugin.Result, len(items))
	outs := make([]plugin.Output, len(items))
	for i, it := range items {
		sm, topic := it.sm, it.topic
		if topic == "" {
			topic = pi.output
		}
		if err := checkRouted(topic); err != nil {
			res[i] = plugin.Result{Outcome: plugin.OutcomeDeadLetter, Reason: err.Error()}
			continue
		}
		o := &outs[i]
		*o = plugin.Output{Topic: topic, Key: sm.Key, Properties: sm.Properties, Payload: sm.Payload, EventTime: sm.EventTime}
		if sm.OrderingKey != "" {
			o.OrderingKey = []byte(sm.OrderingKey)
		}
		res[i] = plugin.Result{Outcome: plugin.OutcomeAck, Outputs: outs[i : i+1 : i+1]}
	}
	return res, nil
}

// checkRouted refuses a topic a route's expression gave that is no
// topic name: the message is dead-lettered with why.
func checkRouted(topic string) error {
	if topic == "" {
		return fmt.Errorf("no topic to publish to: the route gave none")
	}
	if _, err := pulsarwire.ParseTopic(topic); err != nil {
		return fmt.Errorf("route gave %s: %w", strconv.Quote(topic), err)
	}
	return nil
}

func (passInstance) Close(context.Context) error { return nil }
func (passInstance) Kill()                       {}
func (passInstance) Pid() int                    { return 0 }
func (passInstance) Exited() <-chan struct{}     { return nil }
func (passInstance) ExitStatus() string          { return "" }

// filtered acknowledges it, which filter step name kept out.
func (p *pipeline) filtered(it *item, name string) {
	reason := ""
	if p.h.opts.Hooks.Message != nil { // the only reader of the reason
		reason = "filtered by step " + name
	}
	p.ack(it, Filtered, reason)
}

// dropped acknowledges it: a step's expression failed on it and the step
// says drop.
func (p *pipeline) dropped(it *item, err error) {
	p.log.Debug("a step dropped a message", "id", it.id(), "err", err)
	p.ack(it, Dropped, err.Error())
}

// stepsRan records on b's "process" span what each step of c did with
// its messages: an event a step.
func (p *pipeline) stepsRan(b *batch, instance int, c *steps.Chain, counts []steps.Counts) {
	p.tr.stepsRan(b, instance, c, counts)
}

// stepStats are the counts of every step of the pipeline, in order.
func (p *pipeline) stepStats() []StepStats {
	st := p.stages.Load()
	if st == nil {
		return nil
	}
	var out []StepStats
	for _, c := range []*steps.Chain{st.before, st.after} {
		if c == nil {
			continue
		}
		for i, n := range c.Totals() {
			s := c.Steps()[i]
			out = append(out, StepStats{Name: s.Name, Kind: s.Kind.String(), After: c == st.after, Counts: n})
		}
	}
	return out
}

// StepStats are what one step of a pipeline did since the pipeline (or
// its last reload that changed its steps) started.
type StepStats struct {
	Name string
	// Kind is filter, map, route or dead_letter_if.
	Kind string
	// After: the step acts on the handler's outputs.
	After bool
	steps.Counts
}
