package main

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
	"github.com/streamrun/streamrun/internal/benchrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// benchPipelineName is the pipeline's name, in logs.
const benchPipelineName = "bench"

// pipeline measures a pipeline end to end: publish to the input topic,
// the host passes each message through the handler to the output topic,
// and a consumer there measures the latency from publish time to the
// output's arrival.
func (b *bench) pipeline(ctx context.Context) (*benchrun.Result, error) {
	f := b.f
	m := benchrun.NewMeter()
	ins := f.topicNames()
	outs := make([]string, len(ins))
	for i, in := range ins {
		outs[i] = in + "-out"
		if err := b.createTopic(ctx, outs[i]); err != nil {
			return nil, err
		}
	}
	ps, kind, err := f.pipelineSet(ins, outs)
	if err != nil {
		return nil, err
	}
	h := ps[0].Handler
	b.cond.OutputTopic, b.cond.Subscription, b.cond.SubscriptionType, b.cond.ReceiverQueue = f.topic+"-out", f.subscription, ps[0].Source.Type.Name(), f.receiverQueue
	b.cond.Handler = &benchrun.Handler{Kind: kind, Plugin: h.Plugin, Package: h.Package, BatchSize: f.batchSize, Instances: f.instances}

	cons, err := subscribe.New(ctx, b.client, subscribe.Options{Topics: outs, Subscription: "bench-out", ReceiverQueue: 5000})
	if err != nil {
		return nil, fmt.Errorf("subscribe to the outputs %s: %w", f.topic+"-out", err)
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
	res, err := b.measureReceiving(ctx, "pipeline", m, pub, cons)
	if res != nil {
		res.HandlerRSSBytes = handlerRSS(host)
	}
	return res, errors.Join(err, stopHost())
}

// pipelineSet is the pipelines of the run, one per input topic.
func (f *benchFlags) pipelineSet(ins, outs []string) ([]pipelines.Pipeline, string, error) {
	ptyp, err := pipelines.ParseSubscriptionType(f.subType)
	if err != nil {
		return nil, "", usagef("--subscription-type: %v", err)
	}
	ps := make([]pipelines.Pipeline, len(ins))
	var kind string
	for i := range ins {
		var h pipelines.Handler
		if h, kind, err = f.handler(outs[i]); err != nil {
			return nil, "", err
		}
		name := benchPipelineName
		if len(ins) > 1 {
			name += "-" + strconv.Itoa(i)
		}
		ps[i] = pipelines.Pipeline{
			Name: name,
			Source: pipelines.Source{
				Topics: []string{ins[i]}, Subscription: f.subscription, Type: ptyp, ReceiverQueue: f.receiverQueue,
			},
			Handler: h,
			Outputs: []string{outs[i]},
		}
		if kind == "steps" {
			ps[i].Steps = benchSteps(outs[i])
		}
	}
	return ps, kind, nil
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

// handler is the pipeline's handler the flags ask for, and its kind.
func (f *benchFlags) handler(out string) (pipelines.Handler, string, error) {
	if f.steps {
		return pipelines.Handler{BatchSize: f.batchSize, Instances: f.instances}, "steps", nil
	}
	h := pipelines.Handler{
		Config:    map[string]any{"output": out},
		BatchSize: f.batchSize,
		Instances: f.instances,
	}
	switch {
	case f.plugin != "":
		abs, err := filepath.Abs(f.plugin)
		h.Plugin = abs
		return h, "plugin", err
	case f.pkg != "":
		h.Package = f.pkg
		if strings.HasPrefix(f.pkg, ".") {
			abs, err := filepath.Abs(f.pkg)
			if err != nil {
				return h, "", err
			}
			h.Package = abs
		}
		return h, "plugin", nil
	}
	// streamrun itself serves the identity handler (`streamrun bench
	// handler`); in process, the same handler is called directly.
	exe, err := os.Executable()
	if err != nil {
		return h, "", fmt.Errorf("find streamrun's own binary for the identity handler: %w", err)
	}
	h.Plugin, h.Args = exe, []string{"bench", "handler"}
	if f.inProcess {
		return h, "in-process", nil
	}
	return h, "plugin", nil
}

// startHost runs the pipelines on the bench's client, through the entry
// point of `streamrun run`, and waits until they consume. The returned
// function stops them.
func (b *bench) startHost(ctx context.Context, ps []pipelines.Pipeline, inProcess bool) (host *runtime.Host, stop func() error, err error) {
	log, err := b.f.logger(b.cmd.stderr, slog.LevelWarn)
	if err != nil {
		return nil, nil, err
	}
	opts := streamrun.Options{Pipelines: []pipelines.File{{Pipelines: ps}}, Client: b.client, Logger: log}
	if inProcess {
		opts.LocalHandlers = map[string]func() plugin.Handler{}
		for _, p := range ps {
			opts.LocalHandlers[p.Name] = identityHandler
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
