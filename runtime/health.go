package runtime

import (
	"context"
	"fmt"
	"time"
)

// State is a pipeline's condition, as Health reports it.
type State string

const (
	// StateStarting: building or starting the handler, opening producers,
	// subscribing.
	StateStarting State = "starting"
	// StateRunning is the internal state of a running pipeline; Health
	// reports it as StateHealthy or StateDegraded.
	StateRunning State = "running"
	// StateHealthy: running, and no instance keeps crashing.
	StateHealthy State = "healthy"
	// StateDegraded: running, but an instance of the handler keeps
	// crashing (RestartPolicy.DegradedAfter crashes within DegradedWindow,
	// or in a row without answering a batch). Messages still flow where
	// instances are up; the host goes on.
	StateDegraded State = "degraded"
	// StatePaused: running, and taking no messages (the pipeline's
	// paused field): its consumer, subscription and instances stay.
	StatePaused State = "paused"
	// StateReloading: draining its batches to take a new configuration
	// (see Host.Reload); it runs again once they are settled.
	StateReloading State = "reloading"
	// StateStopping: draining after Run's ctx ended.
	StateStopping State = "stopping"
	// StateStopped: stopped after a drain.
	StateStopped State = "stopped"
	// StateFailed: stopped because it could not go on (PipelineHealth.Reason
	// says why).
	StateFailed State = "failed"
)

// PipelineHealth is the health of one pipeline.
type PipelineHealth struct {
	Pipeline string
	State    State
	// Reason says why the pipeline is degraded or failed.
	Reason    string
	Instances []InstanceHealth
}

// InstanceHealth is the health of one instance slot of a pipeline's
// handler.
type InstanceHealth struct {
	// Instance is the slot's number, 0 to Instances-1; it is the plugin's
	// InstanceID, the same across restarts.
	Instance int
	// Up: a handler is running in the slot.
	Up bool
	// Pid of the plugin process; 0 while down or for an in-process
	// handler.
	Pid int
	// Since the current handler started.
	Since time.Time
	// Batches answered by the current handler.
	Batches int64
	// Restarts of the slot so far.
	Restarts int
	// Swaps: times the slot's handler was replaced by a new version of it
	// while running (see Host.Reload).
	Swaps int
	// CrashesInARow: failures (crash, hang, wrong answer, failed restart)
	// without a batch answered in between; 0 once the current handler
	// answered one.
	CrashesInARow int
	// LastError is the last failure, "" when none.
	LastError string
	// LastCrash is when it happened.
	LastCrash time.Time
	// NextStart is when a down slot starts its handler again.
	NextStart time.Time
}

// Healthy reports whether the pipeline is running without a handler that
// keeps crashing.
func (h PipelineHealth) Healthy() bool { return h.State == StateHealthy }

// health reports the pipeline's health now.
func (p *pipeline) health() PipelineHealth {
	out := PipelineHealth{Pipeline: p.name, State: p.state.Load().(State)}
	rp := p.h.opts.Restart
	now := time.Now()
	degraded := 0
	for _, s := range p.supervisors() {
		ih, bad, recent := s.health(now)
		if bad {
			degraded++
			if out.Reason == "" {
				out.Reason = fmt.Sprintf("instance %d keeps crashing (%d times in a row, %d in the last %v); last: %s",
					s.id, ih.CrashesInARow, recent, rp.DegradedWindow, ih.LastError)
			}
		}
		out.Instances = append(out.Instances, ih)
	}
	switch out.State {
	case StateRunning:
		out.State = StateHealthy
		if degraded > 0 {
			out.State = StateDegraded
		}
		if p.paused.Load() {
			out.State = StatePaused
		}
	case StateFailed:
		if err := p.err(); err != nil {
			out.Reason = err.Error()
		}
	}
	return out
}

// Stats are a pipeline's running totals, for metrics. For a window
// pipeline they count its inputs; its handler's calls (a window's fire or
// add) count in Processed alone (docs/runtime.md).
type Stats struct {
	Pipeline string
	// Received from the subscription.
	Received int64
	// Processed: answered by the handler (in a window pipeline, the
	// windows' calls).
	Processed int64
	// Acked after their outputs' receipts.
	Acked int64
	// Retried: handed back to the broker for a later delivery.
	Retried int64
	// DeadLettered: published to the dead-letter topic and acknowledged.
	DeadLettered int64
	// Dropped: acknowledged without output.
	Dropped int64
	// Filtered: acknowledged without output, kept out by a filter step.
	Filtered int64
	// HandedBack: left unacknowledged at shutdown (delivered again later).
	HandedBack int64
	// InFlight: received and not settled yet.
	InFlight int64
	// Crashes of the handler (crash, hang, wrong answer, failed restart).
	Crashes int64
	// Restarts of the handler.
	Restarts int64
	// Commits and Aborts of an exactly_once pipeline's transactions.
	Commits, Aborts int64
	// Steps: what each of the pipeline's steps did, in order.
	Steps []StepStats
	// DeadLetterReasons: why its messages were dead-lettered, the most
	// frequent first (at most 50 reasons; the rest count under "(other
	// reasons)").
	DeadLetterReasons []DeadLetterReason
}

func (p *pipeline) snapshot() Stats {
	c := &p.stats
	return Stats{
		Pipeline:     p.name,
		Received:     c.received.Load(),
		Processed:    c.processed.Load(),
		Acked:        c.acked.Load(),
		Retried:      c.retried.Load(),
		DeadLettered: c.deadLettered.Load(),
		Dropped:      c.dropped.Load(),
		Filtered:     c.filtered.Load(),
		HandedBack:   c.handedBack.Load(),
		InFlight: c.received.Load() - c.acked.Load() - c.retried.Load() - c.deadLettered.Load() -
			c.dropped.Load() - c.filtered.Load() - c.handedBack.Load(),
		Crashes:  c.crashes.Load(),
		Restarts: c.restarts.Load(),
		Commits:  c.commits.Load(),
		Aborts:   c.aborts.Load(),
		Steps:    p.stepStats(),

		DeadLetterReasons: p.deadLetters.list(),
	}
}

// Backlog asks the brokers for the backlog of pipeline's subscription, in
// entries (a batch counts once), as the streamrun.consumer.backlog metric
// reports it. It fails for a pipeline the host does not run, or one that
// is not running now (starting, reloading, stopping: its consumer is
// being opened or closed).
func (h *Host) Backlog(ctx context.Context, pipeline string) (int64, error) {
	p := h.pipelineNamed(pipeline)
	if p == nil {
		return 0, fmt.Errorf("runtime: backlog: no pipeline %q", pipeline)
	}
	if s := p.state.Load().(State); s != StateRunning {
		return 0, fmt.Errorf("runtime: backlog of %s: the pipeline is %s", pipeline, s)
	}
	return p.cons.Backlog(ctx)
}
