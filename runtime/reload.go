package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

// This file is change without a restart: Host.Reload applies a new set of
// pipelines to a running host, and a changed handler binary is rolled out
// one instance at a time (see docs/reload.md).

// live is what Reload needs of a running host.
type live struct {
	ctx      context.Context // Run's: a drain under way ends with it
	failed   chan *pipeline  // a running pipeline failed for good
	watchers sync.WaitGroup
}

// watch tells Run when p fails, until p is stopped.
func (lv *live) watch(p *pipeline) {
	lv.watchers.Go(func() {
		select {
		case <-p.failed:
			select {
			case lv.failed <- p:
			case <-p.stopped:
			}
		case <-p.stopped:
		}
	})
}

// handlerID names the program a pipeline's instances run: its binary and
// a hash of the binary's content. A new path or a new hash is a new
// version of the handler. Zero for an in-process handler.
type handlerID struct {
	path string
	hash string
}

// identify hashes the binary at path.
func identify(path string) (handlerID, error) {
	f, err := os.Open(path)
	if err != nil {
		return handlerID{}, fmt.Errorf("handler binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return handlerID{}, fmt.Errorf("handler binary %s: %w", path, err)
	}
	return handlerID{path: path, hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// change is what differs between a running pipeline and its new
// configuration (both with defaults), and so what a reload does to it.
type change struct {
	// handler: how an instance is started differs (the binary's path or
	// content, the package, args, env or config): the instances are
	// replaced by new ones, one at a time.
	handler bool
	// flow: the batching (batch size and wait, timeout, in-flight
	// bounds), the number of instances, the outputs, the error policy or
	// the steps differ: the pipeline drains, then runs on with the new
	// settings, keeping its subscription and instances.
	flow bool
	// source: the subscription differs: the pipeline drains, closes its
	// consumer and subscribes as the new source says.
	source bool
}

func (c change) none() bool { return c == change{} }

func (c change) String() string {
	var parts []string
	if c.handler {
		parts = append(parts, "handler")
	}
	if c.flow {
		parts = append(parts, "batching")
	}
	if c.source {
		parts = append(parts, "source")
	}
	if len(parts) == 0 {
		return "unchanged"
	}
	return strings.Join(parts, "+")
}

// diff says what differs between old and next, running oldID and
// nextID: what each changed field declares its change does
// (pipelines.Reload), and a new binary a new handler.
func diff(old, next pipelines.Pipeline, oldID, nextID handlerID) change {
	c := change{handler: oldID != nextID}
	for _, f := range old.Changes(next) {
		switch f.Reload {
		case pipelines.ReloadHandler:
			c.handler = true
		case pipelines.ReloadFlow:
			c.flow = true
		case pipelines.ReloadSource:
			c.source = true
		case pipelines.ReloadIdentity:
			// Pipelines are matched by name: never two names here.
		default:
			// Undeclared (TestEveryFieldIsDeclared fails): all of it.
			c.handler, c.flow, c.source = true, true, true
		}
	}
	return c
}

// Reload applies ps, a new set of pipelines, to the running host, by
// name:
//
//   - an unchanged pipeline is not touched (its consumer, batches and
//     instances go on as they were);
//   - a removed one drains and stops as at shutdown: it takes no new
//     message, finishes its batches (or hands them back at
//     Options.ShutdownTimeout) and acknowledges what it processed;
//   - a new one starts;
//   - a changed one is changed in place: a new handler binary (a new
//     path, or new content at the same path, or a Go package whose build
//     differs), args, env or config is rolled out one instance at a time,
//     the new instance started and answering (its Init) before the old
//     one takes no more batches, while messages keep flowing; a change
//     of batching, instances, outputs or error policy drains the
//     pipeline's batches and goes on with the new settings on the same
//     subscription and instances; a change of source drains it and
//     subscribes anew.
//
// The broker connections are the client's and stay open throughout.
// Invalid pipelines, a handler that does not build or start, or a
// producer or subscription that cannot be opened refuse the reload
// before anything changes: the running pipelines go on as they were,
// and the error says why. Reload returns once everything is applied, the
// last old instance of a rolled-out handler stopped. ctx bounds building
// and starting; a drain once begun ends when it is done or when Run
// stops. It fails when Run is not running.
func (h *Host) Reload(ctx context.Context, ps ...pipelines.Pipeline) error {
	if err := checkPipelines(ps); err != nil {
		return err
	}
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	h.mu.Lock()
	lv, current := h.live, h.pipes
	h.mu.Unlock()
	if lv == nil {
		return fmt.Errorf("runtime: reload: %w", ErrNotRunning)
	}
	t0 := time.Now()
	pl, err := h.plan(ctx, lv, current, ps)
	if err != nil {
		return fmt.Errorf("runtime: reload refused: %w", err)
	}
	err = h.apply(ctx, lv, pl)
	attrs := []any{"took", time.Since(t0).Round(time.Millisecond), "unchanged", pl.unchanged,
		"changed", len(pl.changed), "added", len(pl.added), "removed", len(pl.removed)}
	if err != nil {
		h.log.Error("reload applied, but not all of it", append(attrs, "err", err)...)
		return err
	}
	h.log.Info("pipelines reloaded", attrs...)
	return nil
}

// plan is a reload prepared: everything that can fail without touching
// the running pipelines has been done.
type plan struct {
	next      []*pipeline // the pipelines after the reload, sorted by name
	added     []*pipeline // opened, not running
	removed   []*pipeline
	changed   []changed
	unchanged int
}

// changed is a running pipeline and what it becomes.
type changed struct {
	p, to *pipeline // to is prepared: its starter and binary
	what  change
	// fresh holds instances of the new handler started ahead, by slot:
	// the first of a rolled-out handler, and the slots a pipeline grows
	// by.
	fresh map[int]instance
}

// plan resolves the new set against the running one: new pipelines are
// opened (handler built and started, producers, subscription), changed
// ones prepared (handler built, the first new instance started). On an
// error all of that is undone.
func (h *Host) plan(ctx context.Context, lv *live, current []*pipeline, ps []pipelines.Pipeline) (pl *plan, err error) {
	pl = &plan{}
	defer func() {
		if err != nil {
			pl.undo(h)
		}
	}()
	byName := map[string]*pipeline{}
	for _, p := range current {
		byName[p.name] = p
	}
	for _, cfg := range ps {
		old, ok := byName[cfg.Name]
		delete(byName, cfg.Name)
		to := newPipeline(h, cfg)
		if !ok {
			pl.added = append(pl.added, to)
			if err := to.open(ctx); err != nil {
				return pl, fmt.Errorf("pipeline %s: %w", to.name, err)
			}
			pl.next = append(pl.next, to)
			continue
		}
		if err := to.prepare(ctx); err != nil {
			return pl, fmt.Errorf("pipeline %s: %w", to.name, err)
		}
		what := diff(old.applied, to.cfg, old.binary, to.binary)
		pl.next = append(pl.next, old)
		if what.none() {
			pl.unchanged++
			continue
		}
		c := changed{p: old, to: to, what: what, fresh: map[int]instance{}}
		pl.changed = append(pl.changed, c)
		if err := to.openOutputs(ctx); err != nil {
			return pl, fmt.Errorf("pipeline %s: %w", to.name, err)
		}
		first := len(old.supervisors())
		if what.handler {
			first = 0
		}
		for i := first; i < to.cfg.Handler.Instances; i++ {
			sctx, cancel := context.WithTimeout(ctx, h.opts.PluginStartTimeout)
			inst, err := to.start(sctx, i)
			cancel()
			if err != nil {
				return pl, fmt.Errorf("pipeline %s: start instance %d: %w", to.name, i, err)
			}
			c.fresh[i] = inst
			if what.handler && i == 0 && !what.flow && !what.source {
				// A roll-out starts the others one at a time.
				break
			}
		}
	}
	for _, p := range byName {
		pl.removed = append(pl.removed, p)
	}
	slices.SortFunc(pl.next, func(a, b *pipeline) int { return strings.Compare(a.name, b.name) })
	return pl, nil
}

// undo stops what plan opened or started.
func (pl *plan) undo(h *Host) {
	deadline := time.Now().Add(closeGrace)
	for _, p := range pl.added {
		p.stop(deadline)
	}
	for _, c := range pl.changed {
		for _, inst := range c.fresh {
			inst.Kill()
		}
	}
}

// apply carries out a plan: removed pipelines drain and stop, new ones
// run, changed ones change in place, side by side.
func (h *Host) apply(ctx context.Context, lv *live, pl *plan) error {
	h.mu.Lock()
	// Health and Stats show the removed ones until they have stopped.
	h.pipes = slices.SortedFunc(slices.Values(slices.Concat(pl.next, pl.removed)),
		func(a, b *pipeline) int { return strings.Compare(a.name, b.name) })
	h.mu.Unlock()
	var wg sync.WaitGroup
	deadline := time.Now().Add(h.opts.ShutdownTimeout)
	for _, p := range pl.removed {
		wg.Go(func() { p.stop(deadline) })
	}
	for _, p := range pl.added {
		p.run()
		lv.watch(p)
	}
	errs := make([]error, len(pl.changed))
	for i, c := range pl.changed {
		wg.Go(func() {
			c.p.log.Info("reloading the pipeline", "change", c.what.String())
			if c.what.flow || c.what.source {
				errs[i] = c.p.rebuild(lv.ctx, c)
			} else {
				errs[i] = c.p.roll(ctx, c)
			}
		})
	}
	wg.Wait()
	h.mu.Lock()
	h.pipes = pl.next
	h.mu.Unlock()
	return errors.Join(errs...)
}

// roll rolls c's new handler out over the running pipeline one instance
// at a time: each new instance is started (and has answered its Init)
// before the old one in its slot takes no more calls; the old one
// finishes the calls it has, then is closed. Batches keep flowing. If a
// new instance fails to start, the slots already rolled go back to the
// old handler and the error is returned.
func (p *pipeline) roll(ctx context.Context, c changed) error {
	old := p.start
	sups := p.supervisors()
	for i, s := range sups {
		inst := c.fresh[i]
		if inst == nil {
			sctx, cancel := context.WithTimeout(ctx, p.h.opts.PluginStartTimeout)
			var err error
			inst, err = c.to.start(sctx, i)
			cancel()
			if err != nil {
				p.log.Error("a new instance of the handler did not start; going back to the old one", "instance", i, "err", err)
				for j := range i {
					if back, err := old(ctx, j); err == nil {
						sups[j].replace(ctx, old, back)
					}
				}
				return fmt.Errorf("pipeline %s: start instance %d: %w", p.name, i, err)
			}
		}
		pid := s.replace(ctx, c.to.start, inst)
		p.log.Info("handler instance replaced", "instance", i, "old_pid", pid, "pid", inst.Pid())
	}
	// p.cfg, which the running flow reads, keeps its handler fields: only
	// starting an instance uses them, through the new starter.
	p.start, p.binary, p.applied = c.to.start, c.to.binary, c.to.cfg
	return nil
}

// rebuild drains the pipeline (no new message taken; every batch
// received finished and settled), applies c (a new handler's instances,
// more or fewer instances, a new subscription, new batching) and lets it
// run again. The drain ends early only when Run stops (ctx), which then
// stops the pipeline as it is.
func (p *pipeline) rebuild(ctx context.Context, c changed) error {
	if err := p.drain(ctx); err != nil {
		for _, inst := range c.fresh {
			inst.Kill()
		}
		return fmt.Errorf("pipeline %s: drain: %w", p.name, err)
	}
	to := c.to
	var srcErr error
	if c.what.source {
		var fatal error
		srcErr, fatal = p.resubscribe(ctx, to)
		if fatal != nil {
			for _, inst := range c.fresh {
				inst.Kill()
			}
			p.fail(fatal)
			return fatal
		}
		if srcErr != nil {
			to.cfg.Source = p.cfg.Source // subscribed as before
		}
		if p.keyed != nil || to.cfg.State.Enabled {
			if err := p.rekey(ctx, to); err != nil {
				for _, inst := range c.fresh {
					inst.Kill()
				}
				p.fail(err)
				return err
			}
		}
		if p.win != nil || to.win != nil {
			if err := p.rewindow(ctx, to); err != nil {
				for _, inst := range c.fresh {
					inst.Kill()
				}
				p.fail(err)
				return err
			}
		}
	}
	sups := p.supervisors()
	n := to.cfg.Handler.Instances
	var closing []*supervisor
	if len(sups) > n {
		closing = sups[n:]
		sups = sups[:n:n]
	}
	for i := range n {
		if i >= len(sups) {
			s := p.newSupervisor(i)
			s.start = to.start
			s.startMu.Lock()
			s.mu.Lock()
			s.setLocked(c.fresh[i])
			s.mu.Unlock()
			s.startMu.Unlock()
			sups = append(sups, s)
			continue
		}
		if c.what.handler {
			sups[i].replace(ctx, to.start, c.fresh[i])
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	for _, s := range closing {
		s.close(cctx)
	}
	cancel()
	p.supMu.Lock()
	p.sups = sups
	p.supMu.Unlock()
	// Nothing runs now that reads the configuration: the receive loop
	// and the workers have returned and every message is settled.
	p.cfg, p.applied = to.cfg, to.cfg
	p.start, p.binary = to.start, to.binary
	p.stages.Store(to.stages.Load())
	p.layout()
	p.flow()
	return srcErr
}

// rekey makes the keyed state of p, drained and subscribed as to's
// source says, that of to's configuration, read back from the changelog
// it names, as a restart with the new file would: a changed changelog
// (by default named after the subscription), TTL, cache bound or
// guarantee takes effect, state turned on is read back, and state turned
// off is dropped. The state in memory, which may be of another
// changelog, is let go with its spill: every change of it is in its
// changelog, and the drain left nothing in flight. Read back even when
// nothing of it changed: between closing and subscribing again another
// host may have held the subscription and changed the state.
func (p *pipeline) rekey(ctx context.Context, to *pipeline) error {
	if p.keyed != nil {
		p.keyed.close()
		p.keyed = nil
	}
	if !to.cfg.State.Enabled {
		return nil
	}
	s := p.newKeyedState(to.cfg)
	p.readAt = p.cons.Resubscribed()
	if to.cfg.Guarantee == pipelines.ExactlyOnce {
		// Subscribed anew: take the changelog as at start (state_fence.go).
		if err := p.fenceTopics(ctx, []string{s.topic}); err != nil {
			s.close()
			return err
		}
	}
	if err := s.restore(ctx, p.client, to.cfg.Source.Subscription); err != nil {
		s.close()
		return err
	}
	p.keyed = s
	return nil
}

// rewindow makes the windows of p, drained and subscribed as to's source
// says, those of to's configuration, read back from the changelog it
// names, as a restart with the new file would: a window block or
// changelog that changed with the source takes effect, and the windows
// in memory, which may be of another changelog, are let go (their
// messages are acknowledged and in their changelog; the drain left
// nothing in flight).
func (p *pipeline) rewindow(ctx context.Context, to *pipeline) error {
	p.win = nil
	if to.win == nil {
		return nil
	}
	// newWindower and restore read the pipeline's configuration: nothing
	// else reads it while the pipeline is drained.
	p.cfg = to.cfg
	w := newWindower(p)
	p.readAt = p.cons.Resubscribed()
	if to.cfg.Guarantee == pipelines.ExactlyOnce {
		if err := p.fenceTopics(ctx, []string{w.topic}); err != nil {
			return err
		}
	}
	w.letGo(p.readAt)
	if err := w.restore(ctx); err != nil {
		return err
	}
	p.win = w
	return nil
}

// drain stops receiving and waits until every batch received is
// finished and every message settled, or ctx ends (the pipeline is then
// half stopped: stop completes it).
func (p *pipeline) drain(ctx context.Context) error {
	p.state.Store(StateReloading)
	p.recvCancel()
	<-p.recvDone
	done := make(chan struct{})
	go func() {
		p.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.eo != nil {
		p.eo.commitNow()
	}
	if err := p.credits.waitAll(ctx); err != nil {
		return err
	}
	if p.eo != nil {
		p.eo.stop(ctx)
	}
	return nil
}

// resubscribe closes the pipeline's consumer, its acknowledgements sent,
// and subscribes as to's source says. If that fails it subscribes as
// before, and says why in srcErr; fatal when that fails too.
func (p *pipeline) resubscribe(ctx context.Context, to *pipeline) (srcErr, fatal error) {
	cctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	if err := p.cons.Close(cctx); err != nil {
		p.log.Warn("close consumer", "err", err)
	}
	cancel()
	err := p.subscribeAs(ctx, to)
	if err == nil {
		return nil, nil
	}
	p.log.Error("subscribing as the new source says failed; subscribing as before", "err", err)
	srcErr = fmt.Errorf("pipeline %s: new source: %w", p.name, err)
	if err := p.subscribeAs(ctx, p); err != nil {
		return srcErr, fmt.Errorf("subscribe: %w", err)
	}
	return srcErr, nil
}
