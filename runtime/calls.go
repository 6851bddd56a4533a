package runtime

import (
	"context"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/subscribe"
)

// The pipeline's side of a worker's calls to its instances: what hooks,
// metrics and traces hear of each call, in one place.

// calling is the context of a call of b's messages to instance: the
// batch's "process" span starts here and the call runs under it.
func (p *pipeline) calling(ctx context.Context, b *batch, instance int) context.Context {
	p.tr.startProcess(b, instance)
	return p.tr.processCtx(ctx, b)
}

// called is told how a call of size messages of b went (err nil: the
// handler answered; a hang is an errHung).
func (p *pipeline) called(b *batch, instance, size int, took time.Duration, err error) {
	if f := p.h.opts.Hooks.Handled; f != nil {
		f(p.name, instance, size, took, err)
	}
	p.met.handled(size, took, err)
	if err != nil && p.hard.Err() == nil {
		p.tr.handlerFailed(b, instance, err)
	}
}

// call hands items to inst and returns its answer, through
// Options.Intercept when there is one.
func (w *worker) call(ctx context.Context, inst instance, items []*item) ([]plugin.Result, error) {
	if w.keyed != nil {
		res, err := w.callWith(ctx, inst, items, w.keyed.entries(items))
		if err == nil {
			w.keyed.apply(items, res)
		}
		return res, err
	}
	if es := windowAddEntries(items); es != nil {
		return w.callWith(ctx, inst, items, es)
	}
	if w.intercept == nil {
		return inst.ProcessBatch(ctx, callBatch(items))
	}
	msgs := make([]*subscribe.Message, len(items))
	for i, it := range items {
		msgs[i] = it.m
	}
	c := Call{Pipeline: w.pipeline, Instance: w.id, Pid: inst.Pid(), Messages: msgs}
	return w.intercept(ctx, c, func(ctx context.Context) ([]plugin.Result, error) {
		return inst.ProcessBatch(ctx, callBatch(items))
	})
}

// callWith is call for a batch that goes with keyed state: its keys'
// values, or the accumulators of incremental windows' adds.
func (w *worker) callWith(ctx context.Context, inst instance, items []*item, state []plugin.StateEntry) ([]plugin.Result, error) {
	b := stateBatch{callBatch: callBatch(items), state: state}
	if w.intercept == nil {
		return inst.ProcessBatch(ctx, b)
	}
	msgs := make([]*subscribe.Message, len(items))
	for i, it := range items {
		msgs[i] = it.m
	}
	c := Call{Pipeline: w.pipeline, Instance: w.id, Pid: inst.Pid(), Messages: msgs}
	return w.intercept(ctx, c, func(ctx context.Context) ([]plugin.Result, error) {
		return inst.ProcessBatch(ctx, b)
	})
}
