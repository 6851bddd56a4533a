package benchrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// pipelineName is the pipeline's name, in logs.
const pipelineName = "bench"

// HandlerOptions are the handler of a pipeline run: a plugin binary, a
// Go package, the identity handler (as a plugin or in this process), or
// no handler but steps. One of Plugin, Package, InProcess and Steps at
// most; none: the identity handler as a plugin.
type HandlerOptions struct {
	// Plugin is a handler plugin binary.
	Plugin string
	// Package is a handler as a Go package, built once.
	Package string
	// Config is the config of the Plugin or Package handler; "{output}"
	// in any of its strings stands for the pipeline's output topic, which
	// the handler must publish to. Default nil: {"output": "{output}"}.
	Config map[string]any
	// Identity is the command that serves IdentityHandler as a plugin: a
	// binary and its arguments. Required unless Plugin, Package or Steps.
	Identity []string
	// InProcess runs IdentityHandler in this process, not as a plugin.
	InProcess bool
	// Steps: no handler, but a filter, a map and a route step in this
	// process.
	Steps bool
	// BatchSize is the most messages in a batch to the handler;
	// Instances the number of handler instances. Required.
	BatchSize, Instances int
	// ExactlyOnce runs the pipeline with guarantee exactly_once, a
	// transaction every CommitInterval (0: the pipeline's default); an
	// embedded broker gets transactions on. Default false: at least
	// once.
	ExactlyOnce    bool
	CommitInterval time.Duration
	// Copies is the outputs the identity handler makes of each message
	// (the same key and payload), and so the outputs a run waits for per
	// message published. Default 0: one.
	Copies int
	// State turns keyed state on (an Exclusive subscription and Keys
	// needed): the identity handler counts each key's messages in it
	// (identityConfig.Count), each pipeline with a changelog of its own,
	// INPUT-state. At the end, Pipeline reads every changelog back and
	// checks that each key's count went up by the messages published
	// with that key (Result.StateKeysChecked). RunCompare runs such a
	// pipeline against the same one without state.
	State bool
}

// Pipeline measures a pipeline end to end: publish to the input topic,
// the host passes each message through the handler to the output topic,
// and a consumer there measures the latency from publish time to the
// output's arrival. The pipeline runs through streamrun.Start, as
// `streamrun run` runs a file.
func (b *Bench) Pipeline(ctx context.Context) (*Result, error) {
	o := &b.o
	m := NewMeter()
	ins := o.topicNames()
	outs := make([]string, len(ins))
	for i, in := range ins {
		outs[i] = in + "-out"
		if err := b.createTopic(ctx, outs[i]); err != nil {
			return nil, err
		}
	}
	b.writes, b.outs = true, outs
	ps, kind, err := o.pipelineSet(ins, outs)
	if err != nil {
		return nil, err
	}
	h := ps[0].Handler
	b.cond.OutputTopic, b.cond.Subscription, b.cond.SubscriptionType, b.cond.ReceiverQueue = o.Topic+"-out", o.Subscription, ps[0].Source.Type.Name(), o.ReceiverQueue
	b.cond.Handler = &Handler{Kind: kind, Plugin: h.Plugin, Package: h.Package, BatchSize: o.Handler.BatchSize, Instances: o.Handler.Instances,
		Guarantee: string(ps[0].WithDefaults().Guarantee)}
	if o.Handler.Copies > 1 {
		b.cond.Handler.OutputsPerInput = o.Handler.Copies
	}
	if ps[0].ExactlyOnce() {
		b.cond.Handler.CommitInterval = ps[0].WithDefaults().CommitInterval.String()
	}
	if kind == "plugin" {
		b.cond.Handler.Config = o.Handler.config() // "{output}" as given
	}
	var counts *stateCounts
	if o.Handler.State {
		b.cond.Handler.State = true
		if counts, err = b.countsBefore(ctx, ps); err != nil {
			return nil, err
		}
	}

	cons, err := subscribe.New(ctx, b.client, subscribe.Options{Topics: outs, Subscription: "bench-out", ReceiverQueue: 5000})
	if err != nil {
		return nil, fmt.Errorf("subscribe to the outputs %s: %w", o.Topic+"-out", err)
	}
	defer b.closeConsumer(cons)
	host, stopHost, err := b.startHost(ctx, ps, kind == "in-process")
	if err != nil {
		return nil, err
	}
	pub, err := b.newPublisher(ctx, ins, m)
	if err != nil {
		return nil, errors.Join(err, stopHost())
	}
	cpu0 := handlerCPU(host)
	res, err := b.measureReceiving(ctx, "pipeline", m, pub, cons, o.Handler.outputsPerInput())
	if res != nil {
		res.HandlerRSSBytes = handlerRSS(host)
		res.HandlerCPUSeconds = (handlerCPU(host) - cpu0).Seconds()
	}
	err = errors.Join(err, stopHost())
	if counts != nil && err == nil && res != nil {
		// The host stopped: every change it made is in the changelogs.
		res.StateKeysChecked, err = counts.check(ctx, b, res.Sent)
	}
	return res, err
}

// pipelineSet is the pipelines of the run, one per input topic.
func (o *Options) pipelineSet(ins, outs []string) ([]pipelines.Pipeline, string, error) {
	ps := make([]pipelines.Pipeline, len(ins))
	var kind string
	for i := range ins {
		h, k, err := o.Handler.handler(outs[i])
		if err != nil {
			return nil, "", err
		}
		kind = k
		name := pipelineName
		if len(ins) > 1 {
			name += "-" + strconv.Itoa(i)
		}
		ps[i] = pipelines.Pipeline{
			Name: name,
			Source: pipelines.Source{
				Topics: []string{ins[i]}, Subscription: o.Subscription, Type: o.Type, ReceiverQueue: o.ReceiverQueue,
			},
			Handler: h,
			Outputs: []string{outs[i]},
		}
		if o.Handler.ExactlyOnce {
			ps[i].Guarantee, ps[i].CommitInterval = pipelines.ExactlyOnce, o.Handler.CommitInterval
		}
		if kind == "steps" {
			ps[i].Steps = benchSteps(outs[i])
		}
		if o.Handler.State {
			ps[i].State = pipelines.State{Enabled: true, Changelog: ins[i] + "-state"}
		}
	}
	return ps, kind, nil
}

// handlerCPU is the user and system CPU time the host's plugin
// processes used so far together, from /proc/PID/stat in clock ticks of
// 10 ms (0 without plugins or /proc).
func handlerCPU(host *runtime.Host) time.Duration {
	var sum time.Duration
	for _, p := range host.Health() {
		for _, ih := range p.Instances {
			if ih.Pid == 0 {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ih.Pid))
			if err != nil {
				continue
			}
			// The fields after the command, which is in parentheses and
			// may hold spaces: utime and stime are the 12th and 13th.
			s := string(b)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(f) < 13 {
				continue
			}
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			sum += time.Duration(ut+st) * 10 * time.Millisecond
		}
	}
	return sum
}

// handlerRSS is the resident set size of the host's plugin processes
// together, from /proc (0 without plugins or /proc).
func handlerRSS(host *runtime.Host) int64 {
	var sum int64
	for _, p := range host.Health() {
		for _, ih := range p.Instances {
			if ih.Pid == 0 {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ih.Pid))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
					sum += kb * 1024
				}
			}
		}
	}
	return sum
}

// benchSteps are the steps of `bench pipeline --steps`: a filter, a map
// and a route, each an expression per message, all of them passing every
// message on to out as the identity handler would (with its key
// prefixed).
func benchSteps(out string) []pipelines.Step {
	return []pipelines.Step{
		{Name: "filter", Filter: `key != "drop"`},
		{Name: "map", Map: &pipelines.MapStep{Key: `"k-" + key`}},
		{Name: "route", Route: &pipelines.RouteStep{To: `key == "k-urgent" ? "` + out + `-urgent" : ""`, Default: out}},
	}
}

// config is Config, or the default {"output": "{output}"} (with
// "copies" when Copies is over 1, "count" with State).
func (ho *HandlerOptions) config() map[string]any {
	if ho.Config == nil {
		c := map[string]any{"output": "{output}"}
		if ho.Copies > 1 {
			c["copies"] = ho.Copies
		}
		if ho.State {
			c["count"] = true
		}
		return c
	}
	return ho.Config
}

// outputsPerInput is the outputs a run waits for per message published.
func (ho *HandlerOptions) outputsPerInput() int64 { return int64(max(ho.Copies, 1)) }

// withOutput is a copy of v with "{output}" in every string replaced by
// out: each pipeline's handler gets a config of its own.
func withOutput(v any, out string) any {
	switch v := v.(type) {
	case string:
		return strings.ReplaceAll(v, "{output}", out)
	case []any:
		c := make([]any, len(v))
		for i := range v {
			c[i] = withOutput(v[i], out)
		}
		return c
	case map[string]any:
		c := make(map[string]any, len(v))
		for k := range v {
			c[k] = withOutput(v[k], out)
		}
		return c
	}
	return v
}

// handler is the pipeline's handler, and its kind.
func (ho *HandlerOptions) handler(out string) (pipelines.Handler, string, error) {
	if ho.Steps {
		return pipelines.Handler{BatchSize: ho.BatchSize, Instances: ho.Instances}, "steps", nil
	}
	h := pipelines.Handler{
		Config:    withOutput(ho.config(), out).(map[string]any),
		BatchSize: ho.BatchSize,
		Instances: ho.Instances,
	}
	switch {
	case ho.Plugin != "":
		abs, err := filepath.Abs(ho.Plugin)
		h.Plugin = abs
		return h, "plugin", err
	case ho.Package != "":
		h.Package = ho.Package
		if strings.HasPrefix(ho.Package, ".") {
			abs, err := filepath.Abs(ho.Package)
			if err != nil {
				return h, "", err
			}
			h.Package = abs
		}
		return h, "plugin", nil
	case len(ho.Identity) == 0:
		return h, "", errors.New("no command serves the identity handler")
	}
	// In process, the same handler is called directly.
	h.Plugin, h.Args = ho.Identity[0], ho.Identity[1:]
	if ho.InProcess {
		return h, "in-process", nil
	}
	return h, "plugin", nil
}

// startHost runs the pipelines on the bench's client, through the entry
// point of `streamrun run`, and waits until they consume. The returned
// function stops them.
func (b *Bench) startHost(ctx context.Context, ps []pipelines.Pipeline, inProcess bool) (host *runtime.Host, stop func() error, err error) {
	log := b.o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := streamrun.Options{Pipelines: []pipelines.File{{Pipelines: ps}}, Client: b.client, Logger: log}
	if inProcess {
		opts.LocalHandlers = map[string]func() plugin.Handler{}
		for _, p := range ps {
			opts.LocalHandlers[p.Name] = IdentityHandler
		}
	}
	r, err := streamrun.Start(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline host: %w", err)
	}
	ended := make(chan struct{})
	go func() {
		_ = r.Wait()
		close(ended)
	}()
	stop = func() error {
		r.Stop()
		if err := r.Wait(); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		return nil
	}
	// Starting may build a package and start plugin processes.
	deadline := time.Now().Add(2 * time.Minute)
	for r.Host().Ready() != nil {
		select {
		case <-ended:
			err := r.Wait()
			if err == nil {
				err = errors.New("stopped before it was ready")
			}
			return nil, nil, fmt.Errorf("pipeline: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			rerr := r.Host().Ready()
			return nil, nil, errors.Join(fmt.Errorf("pipeline not ready after 2m: %w", rerr), stop())
		}
	}
	return r.Host(), stop, nil
}
