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
	if res := windowsFor(inst, items); res != nil {
		return res, nil
	}
	if w.keyed != nil {
		if w.keyed.eo {
			if live, ok := liveItems(items); !ok {
				return w.callLive(ctx, inst, items, live)
			}
		}
		es, err := w.keyed.entries(items)
		if err != nil {
			return stateFailed(items, err), nil
		}
		res, err := w.callWith(ctx, inst, items, es)
		if err == nil {
			w.keyed.apply(items, res)
			w.keyed.recycle(es)
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

// liveItems are the items of a call under exactly_once with keyed state
// whose messages were not superseded (delivered again: the consumer
// asked for everything again after an abort, or lost its connection);
// ok: all of them. A superseded message is handed back when it settles
// (committer.join), its copy handled instead; in the call it would only
// lead the handler to answer its key's later messages on a change that
// is taken back, and a copy among them, not superseded, would be
// retried, which aborts the transaction and asks for everything again:
// with messages flowing in, the next batch took superseded messages and
// copies again, and every commit interval aborted (docs/reliability.md).
// Left out, the call holds messages of one delivery only: one asking
// for everything again after it starts supersedes them all.
func liveItems(items []*item) (live []*item, ok bool) {
	first := -1
	for i, it := range items {
		if it.m.Superseded() {
			first = i
			break
		}
	}
	if first < 0 {
		return items, true
	}
	live = append(make([]*item, 0, len(items)-1), items[:first]...)
	for _, it := range items[first+1:] {
		if !it.m.Superseded() {
			live = append(live, it)
		}
	}
	return live, false
}

// callLive calls inst with live, the items of items not superseded, and
// answers the others with a retry that is never acted on: they are
// handed back when they settle.
func (w *worker) callLive(ctx context.Context, inst instance, items, live []*item) ([]plugin.Result, error) {
	res := make([]plugin.Result, len(items))
	var got []plugin.Result
	if len(live) > 0 {
		es, err := w.keyed.entries(live)
		if err != nil {
			got = stateFailed(live, err)
		} else if got, err = w.callWith(ctx, inst, live, es); err != nil {
			return nil, err
		} else {
			w.keyed.apply(live, got)
		}
	}
	j := 0
	for i, it := range items {
		if j < len(live) && live[j] == it {
			res[i] = got[j]
			j++
			continue
		}
		res[i] = plugin.Result{Outcome: plugin.OutcomeRetry, Reason: "delivered again before it was handled"}
	}
	return res, nil
}

// windowsFor encodes the incremental windows' messages among items in
// the form inst reads (window_compact.go). An add and fire in one is for
// an instance of contract version 5 only: made for one that was started
// since (a reload or restart of an older binary, or a slot not yet
// rolled), the call does not go; every item of it is handed back,
// unsent, and res says so (the windows make an add and then a fire of
// that window).
func windowsFor(inst instance, items []*item) (res []plugin.Result) {
	compact := compactInstance(inst)
	for _, it := range items {
		f := it.win
		if f == nil || f.wp == nil {
			continue
		}
		if !compact && f.add != nil && f.fire > 0 {
			res = make([]plugin.Result, len(items))
			for i, it := range items {
				if it.win != nil {
					it.win.unsent = true
				}
				res[i] = plugin.Result{Outcome: plugin.OutcomeRetry, RetryDelay: time.Millisecond,
					Reason: "a window's add and fire in one, for an instance of a contract version before 5"}
			}
			return res
		}
		windowForm(it, compact)
	}
	return nil
}
