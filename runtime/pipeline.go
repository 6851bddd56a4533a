package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/steps"
	"github.com/streamrun/streamrun/subscribe"
)

// pipeline runs one pipelines.Pipeline: a consumer, a receive loop that
// forms batches, one worker per instance slot, and the settling of every
// message (see the package doc for the rules).
type pipeline struct {
	h      *Host
	cfg    pipelines.Pipeline // with defaults
	name   string
	log    *slog.Logger
	client *pool.Client
	start  starter
	cons   *subscribe.Consumer
	// binary is the handler's program, applied the configuration as
	// last applied (with defaults), which a reload compares with the new
	// one; both only change under Host.reloadMu.
	binary  handlerID
	applied pipelines.Pipeline

	ordered bool // route by key to keep each key's order
	running bool // run was called
	lanes   []lane
	queues  []chan *batch // one per slot when ordered, else one shared
	supMu   sync.Mutex
	sups    []*supervisor // one per instance slot; guarded by supMu (a reload changes it)
	credits *credits
	// awaiting counts the messages whose outputs are all published and
	// not all acknowledged yet: when it reaches every credit, nothing
	// moves until the open output batches go out (caughtUp).
	awaiting atomic.Int64
	stats    counters
	// deadLetters are the reasons of its dead letters, counted.
	deadLetters deadLetterReasons
	retries     retryCounts
	// stages are its steps (nil when it has none), set at open and by a
	// reload while Stats may read them from any goroutine.
	stages atomic.Pointer[stages]
	tr     *tracing // nil when not traced
	met    *metrics // nil when not measured
	// keyed is the pipeline's keyed state, nil when it keeps none.
	keyed *keyedState
	// readAt is the consumer's Resubscribed count when keyed state or
	// the windows were last read back (state_regain.go); only the
	// receive loop reads it while the pipeline runs.
	readAt uint64
	// admitOK and admitAcked are admit's answers, reused from batch to
	// batch by the receive loop, the only caller.
	admitOK, admitAcked []bool
	// win keeps the pipeline's open windows, nil when it has none.
	win *windower
	// changelogProducers are the changelog producers opened with
	// fencing (state_fence.go), nil until then.
	changelogProducers atomic.Pointer[[]*pool.Producer]
	// takenAtRegain: a read back found the changelog fenced by another
	// host (state_regain.go); until the next takeChangelog.
	takenAtRegain atomic.Bool

	redo redoQueue // messages whose outputs failed, settled off the connection goroutines
	// eo commits the transactions of an exactly_once pipeline; nil for
	// at_least_once. Made by layout, started by flow, stopped by the
	// drain or stop once every message settled.
	eo *committer

	recvCtx    context.Context // ends when the pipeline stops receiving
	recvCancel context.CancelFunc
	recvDone   chan struct{}
	// hard ends at the shutdown deadline (or when the pipeline fails to
	// start): handler calls and publishing are abandoned and what is left
	// is handed back to the broker.
	hard       context.Context
	hardCancel context.CancelFunc
	workers    sync.WaitGroup
	settler    sync.WaitGroup
	stopRedo   chan struct{}

	state  atomic.Value // State
	paused atomic.Bool  // the flow runs paused (cfg.Paused), for Health

	tapAllowed atomic.Bool // cfg.Tap, as the flow runs
	tapMu      sync.Mutex  // changes taps
	taps       atomic.Pointer[taps]
	failMu     sync.Mutex
	failErr    error
	failed     chan struct{} // closed when the pipeline fails for good

	stopOnce sync.Once
	stopped  chan struct{} // closed when stop has returned
}

// lane is a batch being formed. Messages of one key always go to the same
// lane when order is kept.
type lane struct {
	items []*item
	first time.Time // when its first message arrived
}

// item is one message in the host's hands. What a handler gets of it is
// read from m as its batch is sent (callBatch, message.go).
type item struct {
	m       *subscribe.Message
	b       *batch
	crashes int // handler panics on this message
	// sm is the message as the steps before the handler left it, what
	// the handler is given; nil when the pipeline has no such steps.
	// topic is where a route step sent it ("" none).
	sm    *steps.Message
	topic string

	// changed: its answer changed its key's state (written to the
	// changelog with its outputs).
	changed bool
	pending atomic.Int32          // outputs without a receipt yet
	outErr  atomic.Pointer[error] // the first output that failed
	// ep is the transaction its effects went into (exactly_once), until
	// that ends; nil otherwise.
	ep *epoch
	// win is the window it is, when it is one (window.go): made by the
	// host, answered back to the windows instead of acknowledged.
	win *windowFire
	// pendingChange is its state change while its transaction has not
	// committed (exactly_once), under the keyed state's mu.
	pendingChange *pendingChange
	// entry is its key's value in the keyed state's memory as the last
	// call's keyedState.entries found it, valid while the store's gen is
	// entryGen: where apply puts its change.
	entry    *cachedValue
	entryGen uint64
	// guard is the hash of its key a keyGuard holds it under, once
	// guardSet (worker_keys.go).
	guard    uint64
	guardSet bool
}

// batch is a group of messages sent to a handler together.
type batch struct {
	items  []*item
	size   int
	formed time.Time
	left   atomic.Int32 // messages not settled yet
	span   trace.Span   // its "process" span, nil when not traced
	// root: no message of the batch carried a context, so span is a root
	// and its sampling decision covers every message of the batch.
	root bool
	// untraced: a root batch the sampler decided against, so nothing of
	// it is traced or carried on (docs/telemetry.md, "Sampling and cost").
	untraced bool
	// loose is the root "process" span of the messages without a context
	// in a batch whose span continues another message's trace, when the
	// root decision made for them sampled them; nil otherwise.
	loose trace.Span
}

func newPipeline(h *Host, cfg pipelines.Pipeline) *pipeline {
	if _, local := h.opts.LocalHandlers[cfg.Name]; local {
		cfg = cfg.InProcess()
	} else {
		cfg = cfg.WithDefaults()
	}
	p := &pipeline{
		h:        h,
		cfg:      cfg,
		applied:  cfg,
		name:     cfg.Name,
		log:      h.log.With("pipeline", cfg.Name),
		client:   h.client,
		stopRedo: make(chan struct{}),
		failed:   make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	p.state.Store(StateStarting)
	p.tr = newTracing(h.opts.TracerProvider, cfg.Name, cfg.Source.Subscription)
	if cfg.State.Enabled {
		p.keyed = p.newKeyedState(cfg)
	}
	if cfg.Window.Type != "" {
		p.win = newWindower(p)
	}
	p.met = h.met.forPipeline(p)
	p.retries.m = map[retryKey]uint32{}
	p.redo.kick = make(chan struct{}, 1)
	p.hard, p.hardCancel = context.WithCancel(context.Background())
	p.layout()
	for i := range cfg.Handler.Instances {
		p.sups = append(p.sups, p.newSupervisor(i))
	}
	return p
}

// newKeyedState makes the keyed state cfg asks for.
func (p *pipeline) newKeyedState(cfg pipelines.Pipeline) *keyedState {
	s := newKeyedState(cfg.ChangelogTopic(), cfg.State.TTL, cfg.ExactlyOnce(), int64(cfg.State.CacheBytes), p.h.opts.StateDir, p.log)
	s.lost = func(err error) {
		p.fail(fmt.Errorf("%w; a restart reads the state back from the changelog", err))
	}
	return s
}

// layout makes what the batching of p.cfg needs: the lanes, the queues to
// the workers, the credits, and the receive loop's context. A reload
// lays it out again once the pipeline has drained.
func (p *pipeline) layout() {
	hc := &p.cfg.Handler
	p.ordered = p.cfg.Source.Type.KeepsOrder()
	p.credits = newCredits(hc.MaxInFlight)
	nq := 1
	if p.ordered {
		nq = hc.Instances
	}
	p.lanes = make([]lane, nq)
	p.queues = make([]chan *batch, nq)
	for i := range p.queues {
		// Every batch holds at least one credit, so a queue this long
		// never blocks the receive loop: credits are the bound.
		p.queues[i] = make(chan *batch, hc.MaxInFlight)
	}
	p.recvCtx, p.recvCancel = context.WithCancel(context.Background())
	p.recvDone = make(chan struct{})
	p.eo = nil
	if p.cfg.ExactlyOnce() {
		p.eo = newCommitter(p)
	}
}

// prepare resolves the handler: the binary its instances run (built
// first when it is a Go package) and how to start one.
func (p *pipeline) prepare(ctx context.Context) error {
	cfg := &p.cfg
	st, err := p.h.compileStages(cfg)
	if err != nil {
		return err
	}
	p.stages.Store(st)
	if !cfg.HasHandler() {
		p.start, p.binary = passStarter(st.output), handlerID{}
		return nil
	}
	config, err := handlerConfig(cfg.Handler)
	if err != nil {
		return err
	}
	if newHandler, local := p.h.opts.LocalHandlers[p.name]; local {
		if newHandler == nil {
			return fmt.Errorf("LocalHandlers[%q] is nil", p.name)
		}
		p.start = localStarter(cfg, newHandler, config)
		p.binary = handlerID{}
		return nil
	}
	bo := p.h.opts.Build
	if bo.Logger == nil {
		bo.Logger = p.log
	}
	cmd, id, err := resolvePlugin(ctx, cfg.Handler, bo)
	if err != nil {
		return err
	}
	if cfg.Handler.Script != "" {
		p.log.Info("running the handler script", "script", cmd.args[0], "python", cmd.path)
	}
	p.start = pluginStarter(p.h, cfg, cmd, config, p.log)
	p.binary = id
	return nil
}

// handlerConfig is h.Config as the JSON a handler's Init is given, nil
// for none.
func handlerConfig(h pipelines.Handler) ([]byte, error) {
	if len(h.Config) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h.Config)
	if err != nil {
		return nil, fmt.Errorf("handler config: %w", err)
	}
	return b, nil
}

// resolvePlugin resolves a handler run as a plugin process: the command
// that runs it (its binary, its script's interpreter, or its Go package
// built first with bo) and its identity, which tells a changed handler
// at a reload.
func resolvePlugin(ctx context.Context, h pipelines.Handler, bo BuildOptions) (pluginCommand, handlerID, error) {
	switch {
	case h.Plugin != "":
		id, err := identify(h.Plugin)
		return pluginCommand{path: h.Plugin}, id, err
	case h.Script != "":
		cmd, err := scriptCommand(h)
		if err != nil {
			return pluginCommand{}, handlerID{}, err
		}
		// A script's identity is its file's: an edited script is rolled out.
		id, err := identify(h.Script)
		return cmd, id, err
	}
	b, err := BuildHandler(ctx, h.Package, bo)
	if err != nil {
		return pluginCommand{}, handlerID{}, err
	}
	return pluginCommand{path: b.Path}, handlerID{path: b.Path, hash: b.Hash}, nil
}

// openOutputs opens the producers of the outputs the pipeline names.
func (p *pipeline) openOutputs(ctx context.Context) error {
	cfg := &p.cfg
	for _, t := range cfg.Outputs {
		if _, err := p.client.Producer(ctx, t); err != nil {
			return fmt.Errorf("open producer for output %s: %w", t, err)
		}
	}
	// Under exactly_once the changelogs are opened once the subscription
	// is held (state_fence.go): a Shared producer would wait while
	// another host holds them.
	if p.keyed != nil && !p.fences() {
		if _, err := p.client.Producer(ctx, p.keyed.topic); err != nil {
			return fmt.Errorf("open producer for the state changelog %s: %w", p.keyed.topic, err)
		}
	}
	if p.win != nil {
		for _, t := range []string{p.win.topic, cfg.Window.LateTopic} {
			if t == "" || t == p.win.topic && p.fences() {
				continue
			}
			if _, err := p.client.Producer(ctx, t); err != nil {
				return fmt.Errorf("open producer for the windows' %s: %w", t, err)
			}
		}
	}
	return nil
}

// newSupervisor makes the supervisor of instance slot i; open gives it
// its starter.
func (p *pipeline) newSupervisor(i int) *supervisor {
	s := newSupervisor(i, p.start, p.h.opts.Restart, p.h.opts.PluginStartTimeout, p.hard, p.log)
	s.crashed = func() { p.stats.crashes.Add(1) }
	if w := p.win; w != nil && w.incr {
		s.started = func(inst instance) { w.compact.Store(compactInstance(inst)) }
	}
	s.restarted = func(cause error) {
		p.stats.restarts.Add(1)
		if f := p.h.opts.Hooks.Restarted; f != nil {
			f(p.name, i, cause)
		}
	}
	return s
}

// newWorker makes the dispatcher of the instance slot s supervises.
func (p *pipeline) newWorker(s *supervisor) *worker {
	hc := &p.cfg.Handler
	limit := max(hc.MaxBatchesInFlight, 1)
	w := &worker{
		id: s.id, sup: s, out: p, log: p.log,
		limit: limit, timeout: hc.Timeout, maxCrashes: p.cfg.ErrorPolicy.MaxCrashes, stages: p.stages.Load(),
		hard: p.hard, abort: p.recvCtx.Done(),
		order:    make(chan *sent, limit),
		pipeline: p.name, intercept: p.h.opts.Intercept, keyed: p.keyed,
	}
	switch {
	case limit > 1:
	case p.keyedOverlaps(w.stages):
		w.limit, w.guard = keyedOverlap, newKeyGuard()
		w.order = make(chan *sent, keyedOverlap)
	case p.windowOverlaps(w.stages):
		w.limit = keyedOverlap
		w.order = make(chan *sent, keyedOverlap)
	}
	// Slow until an answer shows otherwise: no more than steadyBatches go
	// to a handler not yet timed.
	w.took.Store(int64(hc.Timeout))
	return w
}

// keyedOverlap is how many batches of a keyed-state pipeline an instance
// works on at once, none of them sharing a key (keyGuard): the next one
// is sent while the last is out, so that the host's reading and applying
// of the state, and its reading of the answers, no longer stand between
// the plugin's batches (docs/benchmarks/keyed-state.md).
const keyedOverlap = 2

// keyedOverlaps says whether p's workers send a batch while another is
// out when their keys differ: with keyed state at least once, and no
// steps before the handler (which may change a message's key after the
// guard has looked at it). Under exactly_once, a change is tracked with
// its transaction and taken back in order (state_exactly.go), and the
// worker keeps one batch at a time.
func (p *pipeline) keyedOverlaps(st *stages) bool {
	return p.keyed != nil && !p.keyed.eo && p.win == nil && (st == nil || st.before == nil)
}

// windowOverlaps says whether p's workers send a batch while another is
// out: with windows at least once, whose items are calls of windows
// (fires and adds) that never share a window, since the windows make at
// most one call a window at a time (window.go, window_incr.go), so that
// the order of each window's calls holds without a guard. Under
// exactly_once a fire's fired mark goes in its batch's transaction
// (settleIn), one batch at a time; steps before the handler are kept
// to one at a time too, as for keyed state.
func (p *pipeline) windowOverlaps(st *stages) bool {
	return p.win != nil && p.eo == nil && (st == nil || st.before == nil)
}

// open prepares the handler, opens the output producers, starts every
// instance and subscribes, in that order, so that nothing is received
// before the handler can take it.
func (p *pipeline) open(ctx context.Context) error {
	if err := p.openHandler(ctx); err != nil {
		return err
	}
	return p.openSource(ctx)
}

// openHandler is open up to the subscription: what a mistake in the
// pipeline's file makes fail.
func (p *pipeline) openHandler(ctx context.Context) error {
	if err := p.prepare(ctx); err != nil {
		return err
	}
	if err := p.openOutputs(ctx); err != nil {
		return err
	}
	if p.eo != nil {
		if err := p.eo.check(ctx); err != nil {
			return err
		}
	}
	for _, s := range p.sups {
		s.start = p.start
	}
	errs := make([]error, len(p.sups))
	var wg sync.WaitGroup
	for i, s := range p.sups {
		wg.Go(func() { errs[i] = s.startFirst(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// openSource subscribes (and reads keyed state back), the rest of open.
// It may wait long: an Exclusive subscription another host holds is
// asked for again until that host lets go.
func (p *pipeline) openSource(ctx context.Context) error {
	if err := p.subscribeAs(ctx, p); err != nil {
		return err
	}
	p.readAt = p.cons.Resubscribed()
	if err := p.takeChangelog(ctx); err != nil {
		_ = p.cons.Close(context.WithoutCancel(ctx))
		return err
	}
	if p.keyed != nil {
		// After subscribing: on an Exclusive subscription, once any host
		// before is gone, every change it acknowledged is in the changelog.
		if err := p.keyed.restore(ctx, p.client, p.cfg.Source.Subscription); err != nil {
			_ = p.cons.Close(context.WithoutCancel(ctx))
			return err
		}
	}
	if p.win != nil {
		// After subscribing, as keyed state is read back.
		p.win.letGo(p.readAt)
		if err := p.win.restore(ctx); err != nil {
			_ = p.cons.Close(context.WithoutCancel(ctx))
			return err
		}
	}
	return nil
}

// subscribeAs opens the pipeline's consumer as src's source says (src is
// p itself, or the pipeline a reload makes of it).
func (p *pipeline) subscribeAs(ctx context.Context, src *pipeline) error {
	so, err := src.subscribeOptions()
	if err != nil {
		return err
	}
	cons, err := subscribe.New(ctx, p.client, so)
	if err != nil {
		return err
	}
	p.cons = cons
	return nil
}

// run starts the pipeline's goroutines.
func (p *pipeline) run() {
	p.running = true
	p.settler.Go(p.redoLoop)
	p.flow()
}

// flow starts the receive loop and the workers, as laid out.
func (p *pipeline) flow() {
	for i, s := range p.supervisors() {
		q := p.queues[0]
		if p.ordered {
			q = p.queues[i]
		}
		w := p.newWorker(s)
		p.workers.Go(func() { w.run(q) })
		p.workers.Go(w.publish)
	}
	paused := p.cfg.Paused
	p.paused.Store(paused)
	p.tapAllowed.Store(p.cfg.Tap)
	if !p.cfg.Tap {
		// A reload that takes the permission away closes the taps.
		p.tapMu.Lock()
		p.taps.Store(nil)
		p.tapMu.Unlock()
	}
	if p.eo != nil {
		p.eo.start()
	}
	go func() {
		defer close(p.recvDone)
		if paused {
			// Nothing is received until a reload resumes it; the consumer
			// keeps its subscription and what the broker sent ahead.
			defer p.closeQueues()
			<-p.recvCtx.Done()
			return
		}
		p.receive()
	}()
	p.state.Store(StateRunning)
	p.log.Info("pipeline running", "paused", p.cfg.Paused, "topics", p.cons.Topics(), "subscription", p.cfg.Source.Subscription,
		"type", p.cfg.Source.Type, "instances", len(p.supervisors()), "batch_size", p.cfg.Handler.BatchSize)
}

// fail records that the pipeline cannot go on; Run stops the host.
func (p *pipeline) fail(err error) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	if p.failErr != nil {
		return
	}
	p.failErr = fmt.Errorf("pipeline %s: %w", p.name, err)
	p.log.Error("pipeline failed", "err", err)
	close(p.failed)
}

func (p *pipeline) err() error {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	return p.failErr
}

// receive takes messages from the consumer while credits allow and
// forms batches: a batch goes to its worker when it holds BatchSize
// messages or its first message has waited BatchWait.
func (p *pipeline) receive() {
	defer p.closeQueues()
	if w := p.win; w != nil {
		defer w.pinLooks.Wait() // its looks at the mark-delete positions (window_exactly.go)
		if w.incr {
			defer w.startWriter()() // its changelog records (window_writer.go)
		}
	}
	hc := &p.cfg.Handler
	buf := make([]*subscribe.Message, max(hc.BatchSize, 64))
	for {
		if p.fencedOut() && !p.regained() {
			// Another host took the changelog (state_fence.go): nothing
			// is received, placed or fired until the subscription comes
			// back and the changelog is read back.
			select {
			case <-p.recvCtx.Done():
				return
			case <-time.After(fencedPoll):
			}
			continue
		}
		n := p.credits.try(len(buf))
		if n == 0 {
			// Nothing more can join the batches being formed: send them.
			p.flush(time.Time{})
			var err error
			if p.win != nil {
				// The windows acknowledge their messages from this loop,
				// once their changelog records have receipts: have them
				// sent now, and wait for one, or a tick.
				p.win.starved.Store(true) // before: what the writer adds after is sent too
				p.client.SendOpenBatches()
				ok := p.win.wait(p.recvCtx)
				p.win.starved.Store(false)
				if !ok {
					return
				}
				if p.regained() {
					// Nothing received, and the windows hold every
					// credit: read them back before they move on.
					if rerr := p.regain(); rerr != nil {
						if p.recvCtx.Err() == nil {
							p.fail(rerr)
						}
						return
					}
				}
				p.windowTick(time.Now())
				continue
			} else {
				n, err = p.credits.acquire(p.recvCtx, len(buf))
			}
			if err != nil {
				return
			}
		}
		ctx, cancel := p.recvCtx, context.CancelFunc(nil)
		if due, ok := p.nextDue(); ok {
			ctx, cancel = context.WithDeadline(p.recvCtx, due)
		}
		got, err := p.cons.ReceiveBatch(ctx, buf[:n])
		if cancel != nil {
			cancel()
		}
		p.credits.release(n - got)
		if p.regained() {
			// Received after the consumer subscribed again: these come
			// again once the state is read back.
			p.credits.release(got)
			clear(buf[:got])
			got = 0
			if rerr := p.regain(); rerr != nil {
				if p.recvCtx.Err() == nil {
					p.fail(rerr)
				}
				return
			}
		}
		if got > 0 {
			p.route(buf[:got])
			clear(buf[:got])
		}
		switch {
		case err == nil:
		case p.recvCtx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
		default:
			p.fail(fmt.Errorf("receive: %w", err))
			return
		}
		if p.win != nil {
			p.windowTick(time.Now())
		}
		p.flush(time.Now())
	}
}

// windowTick places what the windows learnt and puts the windows due in
// their lanes.
func (p *pipeline) windowTick(now time.Time) {
	for _, it := range p.win.process(now) {
		p.place(it, now)
	}
}

// route puts received messages into their lanes.
func (p *pipeline) route(ms []*subscribe.Message) {
	now := time.Now()
	if p.keyed != nil {
		ms = p.admit(ms)
	}
	p.stats.received.Add(int64(len(ms)))
	if f := p.h.opts.Hooks.Received; f != nil {
		f(p.name, len(ms))
	}
	if p.win != nil {
		p.win.take(ms, now)
		return
	}
	items := make([]item, len(ms))
	for i, m := range ms {
		it := &items[i]
		it.m = m
		p.place(it, now)
	}
}

// place puts it in its lane, and sends the lane's batch when it is full.
func (p *pipeline) place(it *item, now time.Time) {
	l := 0
	if len(p.lanes) > 1 {
		l = int(laneHash(it.m, p.keyed != nil) % uint32(len(p.lanes)))
	}
	ln := &p.lanes[l]
	if len(ln.items) == 0 {
		ln.first = now
	}
	ln.items = append(ln.items, it)
	if len(ln.items) >= p.cfg.Handler.BatchSize {
		p.dispatch(l, now)
	}
}

// admit leaves out of ms the copies of messages the host holds or has
// just acknowledged (keyedState.admit), giving their credits back.
func (p *pipeline) admit(ms []*subscribe.Message) []*subscribe.Message {
	if cap(p.admitOK) < len(ms) {
		p.admitOK, p.admitAcked = make([]bool, len(ms)), make([]bool, len(ms))
	}
	ok, acked := p.admitOK[:len(ms)], p.admitAcked[:len(ms)]
	p.keyed.admit(ms, ok, acked)
	kept := ms[:0]
	for i, m := range ms {
		if ok[i] {
			kept = append(kept, m)
			continue
		}
		p.log.Debug("state: a copy of a message in hand is left out", "id", m.ID.String(), "acked", acked[i])
		if acked[i] {
			_ = p.cons.Ack(context.Background(), m)
		}
		p.credits.release(1)
	}
	return kept
}

// laneHash picks the lane of a message: by ordering key, else key, else
// topic (or partition), so that each key's messages, and a topic's
// messages without a key, stay in one lane and in order. With byKey (a
// pipeline with keyed state) the ordering key is passed over: the key is
// what the state is kept by, and a key split over two lanes would have
// two instances change its value at once (docs/pipelines.md, "Keyed
// state"). Windows' fires carry no ordering key, so go by their key.
func laneHash(m *subscribe.Message, byKey bool) uint32 {
	var k string
	if !byKey {
		k = m.OrderingKey
	}
	if k == "" {
		k = m.Key
	}
	if k == "" {
		k = m.Topic
	}
	// FNV-1a
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h ^= uint32(k[i])
		h *= 16777619
	}
	return h
}

// nextDue is when the oldest batch being formed must go.
func (p *pipeline) nextDue() (time.Time, bool) {
	var due time.Time
	if p.win != nil {
		due = time.Now().Add(windowTick)
	}
	for i := range p.lanes {
		if ln := &p.lanes[i]; len(ln.items) > 0 {
			if d := ln.first.Add(p.cfg.Handler.BatchWait); due.IsZero() || d.Before(due) {
				due = d
			}
		}
	}
	return due, !due.IsZero()
}

// flush sends the batches whose wait is over by now; all of them when
// now is zero.
func (p *pipeline) flush(now time.Time) {
	for i := range p.lanes {
		ln := &p.lanes[i]
		if len(ln.items) == 0 {
			continue
		}
		if now.IsZero() || !now.Before(ln.first.Add(p.cfg.Handler.BatchWait)) {
			p.dispatch(i, now)
		}
	}
}

func (p *pipeline) dispatch(l int, now time.Time) {
	ln := &p.lanes[l]
	if now.IsZero() {
		now = time.Now()
	}
	b := &batch{items: ln.items, size: len(ln.items), formed: now}
	b.left.Store(int32(len(b.items)))
	for _, it := range b.items {
		it.b = b
	}
	ln.items = make([]*item, 0, p.cfg.Handler.BatchSize)
	p.queues[l] <- b
}

// closeQueues sends what is being formed and tells the workers that
// nothing more comes.
func (p *pipeline) closeQueues() {
	p.flush(time.Time{})
	for _, q := range p.queues {
		close(q)
	}
}

// stop stops the pipeline: no more receiving; the batches received are
// finished, their outputs published and their messages settled until
// deadline; then what is left is handed back, the consumer closed (its
// pending acknowledgements sent) and the instances closed.
func (p *pipeline) stop(deadline time.Time) {
	if !p.running {
		// Opened (or partly) but never run.
		p.hardCancel()
		if p.cons != nil {
			ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), closeGrace))
			_ = p.cons.Close(ctx)
			cancel()
		}
		p.closeInstances(deadline)
		if p.keyed != nil {
			p.keyed.close()
		}
		p.state.Store(StateStopped)
		p.stopOnce.Do(func() { close(p.stopped) })
		return
	}
	p.state.Store(StateStopping)
	p.recvCancel()
	<-p.recvDone
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := make(chan struct{})
	go func() {
		p.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
		// Every output is published and nothing more will be: what
		// waits in open batches would wait out the batching delay.
		p.client.SendOpenBatches()
		if p.eo != nil {
			p.eo.commitNow()
		}
	case <-ctx.Done():
	}
	if err := p.credits.waitAll(ctx); err != nil {
		p.log.Warn("shutdown timeout: handing messages back to the broker", "messages", p.credits.held())
	}
	if p.eo != nil {
		p.eo.stop(ctx)
	}
	p.hardCancel()
	if p.eo != nil {
		<-p.eo.done // a commit under way gives up with the hard stop
	}
	<-done
	close(p.stopRedo)
	p.settler.Wait()

	// The consumer and the instances get a little time of their own even
	// when the drain used all of it: closing sends the acknowledgements.
	cctx, ccancel := context.WithTimeout(context.Background(), max(time.Until(deadline), closeGrace))
	defer ccancel()
	if err := p.cons.Close(cctx); err != nil {
		p.log.Warn("close consumer", "err", err)
	}
	p.closeInstances(deadline)
	if p.keyed != nil {
		p.keyed.close() // its spill: the changelog has every value
	}
	if p.err() == nil {
		p.state.Store(StateStopped)
	}
	p.log.Info("pipeline stopped", "received", p.stats.received.Load(), "acked", p.stats.acked.Load(),
		"handed_back", p.stats.handedBack.Load())
	p.stopOnce.Do(func() { close(p.stopped) })
}

// supervisors are the pipeline's instance slots now.
func (p *pipeline) supervisors() []*supervisor {
	p.supMu.Lock()
	defer p.supMu.Unlock()
	return p.sups
}

// closeGrace is the least time closing the consumer and the instances
// gets after the drain.
const closeGrace = 2 * time.Second

func (p *pipeline) closeInstances(deadline time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), max(time.Until(deadline), closeGrace))
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range p.supervisors() {
		wg.Go(func() { s.close(ctx) })
	}
	wg.Wait()
}

// counters are a pipeline's running totals (see Stats).
type counters struct {
	received, processed, acked, retried, deadLettered, dropped, filtered atomic.Int64
	handedBack, crashes, restarts                                        atomic.Int64
	commits, aborts                                                      atomic.Int64 // exactly_once transactions
}

// retryKey names a message for the host's own count of its retries
// (retryKeyOf).
type retryKey struct {
	topic string
	id    pulsarwire.MessageID // BatchSize 0
}

// retryCounts counts retries by message where the broker does not
// (Exclusive and Failover keep no redelivery count). Bounded: when full
// it starts over, which at worst allows a message more retries.
type retryCounts struct {
	mu   sync.Mutex
	m    map[retryKey]uint32
	size atomic.Int64 // len(m), so that forgetting costs nothing while it is empty
}

const maxRetryCounts = 100_000

func (r *retryCounts) get(k retryKey) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[k]
}

func (r *retryCounts) set(k retryKey, n uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= maxRetryCounts {
		clear(r.m)
	}
	r.m[k] = n
	r.size.Store(int64(len(r.m)))
}

func (r *retryCounts) forget(k retryKey) {
	if r.size.Load() == 0 {
		return
	}
	r.mu.Lock()
	delete(r.m, k)
	r.size.Store(int64(len(r.m)))
	r.mu.Unlock()
}

// redoQueue holds messages whose outputs failed to publish. Receipts
// arrive on connection goroutines, which must not publish (a retry may
// become a dead letter), so the settler goroutine takes them.
type redoQueue struct {
	mu    sync.Mutex
	items []*item
	kick  chan struct{}
}

func (q *redoQueue) push(it *item) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *redoQueue) take() []*item {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

func (p *pipeline) redoLoop() {
	for {
		select {
		case <-p.redo.kick:
			for _, it := range p.redo.take() {
				err := *it.outErr.Load()
				p.log.Warn("publishing an output failed; the message is retried", "id", it.id(), "err", err)
				p.retry(it, 0, "publishing an output failed: "+err.Error())
			}
		case <-p.stopRedo:
			for _, it := range p.redo.take() {
				p.handBack(it)
			}
			return
		}
	}
}
