package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/streamrun/streamrun/pipelines"
)

// A dry run says what Reload would do with a new set of pipelines,
// without doing it: for the control API's "what would this file change"
// before anyone applies it.

// ErrNotRunning refuses a reload or a dry run while Run is not running
// its pipelines (before they all started, or once it stops).
var ErrNotRunning = errors.New("the host is not running its pipelines")

// Action is what a reload does to one pipeline as a whole.
type Action string

// The actions of a reload.
const (
	ActionUnchanged Action = "unchanged"
	ActionChanged   Action = "changed"
	ActionAdded     Action = "added"
	ActionRemoved   Action = "removed"
)

// PipelineChange is what a reload would do to one pipeline.
type PipelineChange struct {
	Pipeline string
	Action   Action
	// Effects are the change classes of docs/reload.md a changed
	// pipeline goes through, in the order handler, flow, source.
	Effects []pipelines.Reload
	// Fields are the fields that differ, each with its declared effect.
	Fields []pipelines.Change
	// Binary: the handler's program differs though no field does (new
	// content at the same path, a Go package whose build differs).
	Binary bool
}

// DryRun reports what Reload(ctx, ps...) would do to each pipeline, by
// name, the running ones that ps drops included, and changes nothing. It
// checks ps as Reload does and resolves each handler as Reload would (a
// Go package is built, through the build cache), so a file Reload would
// refuse for its pipelines or handlers is refused here with the same
// error. Starting the new instances, opening producers and subscribing
// are not tried: those can still refuse the reload itself. It fails when
// Run is not running.
func (h *Host) DryRun(ctx context.Context, ps ...pipelines.Pipeline) ([]PipelineChange, error) {
	if err := checkPipelines(ps); err != nil {
		return nil, err
	}
	// Under reloadMu the running pipelines' applied configurations hold
	// still.
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	h.mu.Lock()
	lv, current := h.live, h.pipes
	h.mu.Unlock()
	if lv == nil {
		return nil, fmt.Errorf("runtime: dry run: %w", ErrNotRunning)
	}
	byName := map[string]*pipeline{}
	for _, p := range current {
		byName[p.name] = p
	}
	var out []PipelineChange
	for _, cfg := range ps {
		old, ok := byName[cfg.Name]
		delete(byName, cfg.Name)
		to := newPipeline(h, cfg)
		err := to.prepare(ctx)
		to.hardCancel()
		if err != nil {
			return nil, fmt.Errorf("runtime: reload would be refused: pipeline %s: %w", cfg.Name, err)
		}
		if !ok {
			out = append(out, PipelineChange{Pipeline: cfg.Name, Action: ActionAdded})
			continue
		}
		out = append(out, changeOf(old, to))
	}
	for name := range byName {
		out = append(out, PipelineChange{Pipeline: name, Action: ActionRemoved})
	}
	slices.SortFunc(out, func(a, b PipelineChange) int { return strings.Compare(a.Pipeline, b.Pipeline) })
	return out, nil
}

// changeOf is what a reload from old to to does, as diff decides it.
func changeOf(old, to *pipeline) PipelineChange {
	c := diff(old.applied, to.cfg, old.binary, to.binary)
	pc := PipelineChange{Pipeline: old.name, Action: ActionUnchanged, Fields: old.applied.Changes(to.cfg),
		Binary: old.binary != to.binary}
	if c.none() {
		return pc
	}
	pc.Action = ActionChanged
	if c.handler {
		pc.Effects = append(pc.Effects, pipelines.ReloadHandler)
	}
	if c.flow {
		pc.Effects = append(pc.Effects, pipelines.ReloadFlow)
	}
	if c.source {
		pc.Effects = append(pc.Effects, pipelines.ReloadSource)
	}
	return pc
}
