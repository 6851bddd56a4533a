package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	out := f.topic + "-out"
	if err := b.createTopic(ctx, out); err != nil {
		return nil, err
	}
	h, kind, err := f.handler(out)
	if err != nil {
		return nil, err
	}
	typ, _ := subscribe.ParseType(f.subType) // checked
	ptyp, err := pipelines.ParseSubscriptionType(f.subType)
	if err != nil {
		return nil, usagef("--subscription-type: %v", err)
	}
	p := pipelines.Pipeline{
		Name: benchPipelineName,
		Source: pipelines.Source{
			Topics: []string{f.topic}, Subscription: f.subscription,
			Type: ptyp, ReceiverQueue: f.receiverQueue,
		},
		Handler: h,
		Outputs: []string{out},
	}
	b.cond.OutputTopic, b.cond.Subscription, b.cond.SubscriptionType, b.cond.ReceiverQueue = out, f.subscription, typ.String(), f.receiverQueue
	b.cond.Handler = &benchrun.Handler{Kind: kind, Plugin: h.Plugin, Package: h.Package, BatchSize: f.batchSize, Instances: f.instances}

	cons, err := subscribe.New(ctx, b.client, subscribe.Options{Topics: []string{out}, Subscription: "bench-out", ReceiverQueue: 5000})
	if err != nil {
		return nil, fmt.Errorf("subscribe to the output %s: %w", out, err)
	}
	defer b.closeConsumer(cons)
	stopHost, err := b.startHost(ctx, p, kind == "in-process")
	if err != nil {
		return nil, err
	}
	m := benchrun.NewMeter()
	pub, err := b.newPublisher(ctx, f.topic, m)
	if err != nil {
		return nil, errors.Join(err, stopHost())
	}
	res, err := b.measureReceiving(ctx, "pipeline", m, pub, cons)
	return res, errors.Join(err, stopHost())
}

// handler is the pipeline's handler the flags ask for, and its kind.
func (f *benchFlags) handler(out string) (pipelines.Handler, string, error) {
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

// startHost runs the pipeline on a host sharing the bench's client, and
// waits until it consumes. The returned function stops it.
func (b *bench) startHost(ctx context.Context, p pipelines.Pipeline, inProcess bool) (stop func() error, err error) {
	log, err := b.f.logger(b.cmd.stderr, slog.LevelWarn)
	if err != nil {
		return nil, err
	}
	opts := runtime.Options{Client: b.client, Logger: log}
	if inProcess {
		opts.LocalHandlers = map[string]func() plugin.Handler{p.Name: identityHandler}
	}
	host, err := runtime.New(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("pipeline host: %w", err)
	}
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- host.Run(hctx, p) }()
	stop = func() error {
		cancel()
		if err := <-done; err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		return nil
	}
	// Starting may build a package and start plugin processes.
	deadline := time.Now().Add(2 * time.Minute)
	for host.Ready() != nil {
		select {
		case err := <-done:
			cancel()
			if err == nil {
				err = errors.New("stopped before it was ready")
			}
			return nil, fmt.Errorf("pipeline: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			rerr := host.Ready()
			return nil, errors.Join(fmt.Errorf("pipeline not ready after 2m: %w", rerr), stop())
		}
	}
	return stop, nil
}
