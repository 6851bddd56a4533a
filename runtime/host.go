package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/steps"
)

// Host runs pipelines: it owns the broker connections (through one
// pool.Client), the consumers and the producers, and the handler
// instances the batches go to.
type Host struct {
	opts      Options
	log       *slog.Logger
	client    *pool.Client
	ownClient bool
	met       *hostMetrics // nil when not measured

	mu      sync.Mutex
	started bool
	pipes   []*pipeline // sorted by name, once Run has them
	closed  bool
	live    *live // while Run runs its pipelines and takes reloads

	reloadMu sync.Mutex // one Reload at a time, and none while Run stops

	// The steps' expression environment, made for the first pipeline
	// with steps (stepsEnv).
	envOnce sync.Once
	env     *steps.Env
	envErr  error
}

// New returns a Host. Without Options.Client it opens a pool.Client
// with Options.Pool, connecting before it returns (under the pool's
// OperationRetries, while ctx allows), so a wrong service URL, TLS
// setting or token shows at once.
func New(ctx context.Context, opts Options) (*Host, error) {
	opts = opts.withDefaults()
	h := &Host{opts: opts, log: opts.Logger, client: opts.Client}
	if h.client == nil {
		po := opts.Pool
		if po.Logger == nil {
			po.Logger = opts.Logger.With("component", "pool")
		}
		c, err := pool.New(ctx, po)
		if err != nil {
			return nil, fmt.Errorf("runtime: connect: %w", err)
		}
		h.client, h.ownClient = c, true
	}
	met, err := newHostMetrics(opts.MeterProvider, h)
	if err != nil {
		_ = h.closeClientCtx(ctx)
		return nil, err
	}
	h.met = met
	return h, nil
}

// Client is the host's connection pool.
func (h *Host) Client() *pool.Client { return h.client }

// Run runs the pipelines until ctx ends, then stops them gracefully (see
// Options.ShutdownTimeout) and returns nil. It returns an error, having
// stopped everything, when the pipelines are invalid, when one cannot
// start (its handler does not build, start or accept its config, an
// output producer cannot be opened, subscribing fails), or when one
// fails for good while running (its consumer gives up). A handler that
// crashes is not such a failure: it is restarted, reported in Health,
// and the rest runs on.
//
// A Host runs once; when it opened its own client, Run closes it.
func (h *Host) Run(ctx context.Context, ps ...pipelines.Pipeline) error {
	h.mu.Lock()
	if h.started || h.closed {
		h.mu.Unlock()
		return errors.New("runtime: a Host runs once")
	}
	h.started = true
	h.mu.Unlock()
	defer h.closeClient()

	if err := checkPipelines(ps); err != nil {
		return err
	}
	var pipes []*pipeline
	for _, cfg := range ps {
		pipes = append(pipes, newPipeline(h, cfg))
	}
	slices.SortFunc(pipes, func(a, b *pipeline) int { return strings.Compare(a.name, b.name) })
	h.mu.Lock()
	h.pipes = pipes
	h.mu.Unlock()

	// Start every pipeline's handler before any runs, so that a mistake
	// in the last one stops the host before the first has taken a
	// message.
	for i, p := range pipes {
		if err := p.openHandler(ctx); err != nil {
			h.stopAll(pipes[:i+1])
			if ctx.Err() != nil {
				return nil // stopped while starting: not a failure
			}
			p.fail(err)
			p.state.Store(StateFailed)
			return p.err()
		}
	}
	// Then each subscribes and runs on its own: a subscription may wait
	// (an Exclusive one another host holds), and while it waits the
	// others must run, or what the broker sent ahead to them would wait
	// in their queues.
	lv := &live{ctx: ctx, failed: make(chan *pipeline)}
	defer lv.watchers.Wait()
	sctx, cancelSubs := context.WithCancel(ctx)
	defer cancelSubs()
	var subs sync.WaitGroup
	for _, p := range pipes {
		lv.watch(p)
		subs.Go(func() {
			if err := p.openSource(sctx); err != nil {
				if sctx.Err() == nil {
					p.fail(err)
				}
				return
			}
			p.run()
		})
	}
	// Reloads wait until every pipeline runs: a reload reaches into the
	// consumers.
	liveSet := make(chan struct{})
	go func() {
		defer close(liveSet)
		subs.Wait()
		h.mu.Lock()
		if sctx.Err() == nil {
			h.live = lv
		}
		h.mu.Unlock()
	}()
	// The stop waits for the subscriptions first (stopAll reads what
	// they set).
	endSubs := func() {
		cancelSubs()
		subs.Wait()
		<-liveSet
	}
	h.log.Info("host running", "pipelines", len(pipes))

	var err error
	select {
	case <-ctx.Done():
		h.log.Info("stopping", "timeout", h.opts.ShutdownTimeout)
	case p := <-lv.failed:
		err = p.err()
		h.log.Error("stopping: a pipeline failed", "pipeline", p.name, "err", err)
	}
	endSubs()
	// A reload under way finishes first; none starts after this.
	h.reloadMu.Lock()
	h.mu.Lock()
	h.live = nil
	pipes = h.pipes
	h.mu.Unlock()
	h.reloadMu.Unlock()
	h.stopAll(pipes)
	for _, p := range pipes {
		if p.err() != nil {
			p.state.Store(StateFailed)
		}
	}
	return err
}

// stopAll stops pipes side by side within the shutdown timeout, then
// flushes the producers.
func (h *Host) stopAll(pipes []*pipeline) {
	deadline := time.Now().Add(h.opts.ShutdownTimeout)
	var wg sync.WaitGroup
	for _, p := range pipes {
		wg.Go(func() { p.stop(deadline) })
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), closeGrace))
	defer cancel()
	if err := h.client.Flush(ctx); err != nil {
		h.log.Warn("flush producers", "err", err)
	}
}

func checkPipelines(ps []pipelines.Pipeline) error {
	if len(ps) == 0 {
		return errors.New("runtime: no pipeline to run")
	}
	f := pipelines.File{Pipelines: ps}
	if err := f.Validate(); err != nil {
		return fmt.Errorf("runtime: invalid pipelines: %w", err)
	}
	return nil
}

// Health reports the health of every pipeline, by name; empty before
// Run.
func (h *Host) Health() []PipelineHealth {
	h.mu.Lock()
	pipes := h.pipes
	h.mu.Unlock()
	out := make([]PipelineHealth, 0, len(pipes))
	for _, p := range pipes {
		out = append(out, p.health())
	}
	return out
}

// Stats reports every pipeline's running totals, by name; empty before
// Run.
func (h *Host) Stats() []Stats {
	h.mu.Lock()
	pipes := h.pipes
	h.mu.Unlock()
	out := make([]Stats, 0, len(pipes))
	for _, p := range pipes {
		out = append(out, p.snapshot())
	}
	return out
}

// Close releases a Host that will not Run (or has run): it closes the
// client the host opened. Run does the same when it returns.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	running := h.started && !h.closed
	h.mu.Unlock()
	if running {
		return nil // Run closes it
	}
	return h.closeClientCtx(ctx)
}

func (h *Host) closeClient() {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	_ = h.closeClientCtx(ctx)
}

func (h *Host) closeClientCtx(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.met.close()
	if !h.ownClient {
		return nil
	}
	return h.client.Close(ctx)
}
