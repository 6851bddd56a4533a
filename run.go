package streamrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
)

// Run is a running set of pipeline files: the client (and the embedded
// broker when there is no service URL), the telemetry the files ask for,
// the host and its pipelines, the reloading, the input and the reading
// of the final outputs. Start makes one; Wait waits for its end.
type Run struct {
	opts  Options
	log   *slog.Logger
	files *Files

	broker *broker.Cluster // nil with a service URL
	client *pool.Client
	reach  *brokerReach // what the client waits for the broker on
	tel    *hostTelemetry
	host   *runtime.Host
	// running is host once it runs, for what reads it from other
	// goroutines (the readiness probe, the status lines).
	running atomic.Pointer[runtime.Host]
	w       *watch
	fo      *finalOutputs // nil without Options.FinalOutputs
	in      *inputFeed    // nil without Options.Input
	rl      *reloader

	stop    context.CancelFunc // ends the host's run
	closers []func()           // in the order opened
	ended   chan struct{}
	err     error
}

// Start reads the files and starts running them, as `streamrun run`
// does: it connects to their service URL (or starts the embedded broker
// when they name none), with their TLS, token and retries and, when a
// pipeline reads KeyShared, producers batching by key; sets up the
// telemetry they ask for; builds or finds every handler; and starts every
// pipeline. It returns once they run. ctx bounds the run: when it ends
// the run stops gracefully (see Wait).
//
// Bad files are a *FilesError and bad options an *OptionError, both
// before anything started. On any error, what was started is stopped.
func Start(ctx context.Context, o Options) (_ *Run, err error) {
	o = o.withDefaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	r := &Run{opts: o, log: o.Logger, ended: make(chan struct{})}
	defer func() {
		if err != nil {
			r.closeAll()
		}
	}()
	var watch time.Duration
	if o.Watch {
		watch = o.WatchInterval
	}
	r.rl = newReloader(r, o.ReloadOnSIGHUP, watch)
	r.closers = append(r.closers, r.rl.close)
	if r.files, err = load(o.Files, o.Pipelines, o.LookupEnv); err != nil {
		return nil, &FilesError{err}
	}
	if o.Input != nil {
		if r.in, err = openInput(*o.Input, r.files); err != nil {
			return nil, err
		}
	}

	// Telemetry and the status lines come first: while the broker cannot
	// be reached, /readyz and the status lines say so.
	getenv := func(k string) string { v, _ := o.LookupEnv(k); return v }
	if r.tel, err = startHostTelemetry(ctx, r.files.telemetry, o.TelemetryAddr, getenv, r.log.With("component", "telemetry")); err != nil {
		return nil, fmt.Errorf("set up telemetry: %w", err)
	}
	r.closers = append(r.closers, func() { r.tel.close(10 * time.Second) })
	if r.in != nil {
		r.in.tel = r.tel
	}
	r.reach = newBrokerReach()
	if err := r.tel.serve(r.ready); err != nil {
		return nil, fmt.Errorf("serve telemetry: %w", err)
	}
	if o.StatusInterval > 0 {
		r.closers = append(r.closers, r.statusLines(o.StatusInterval))
	}

	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	r.w = newWatch(r.files)
	if o.FinalOutputs != nil {
		if r.fo, err = startFinalOutputs(ctx, r.client, r.w, o.FinalOutputs, r.log); err != nil {
			return nil, fmt.Errorf("subscribe to the outputs: %w", err)
		}
		r.closers = append(r.closers, r.fo.close)
	}
	hooks := o.Hooks
	if user := hooks.Output; user != nil {
		hooks.Output = func(pipeline, topic string, err error) {
			r.w.output(pipeline, topic, err)
			user(pipeline, topic, err)
		}
	} else {
		hooks.Output = r.w.output
	}
	ho := runtime.Options{
		Client:          r.client,
		Logger:          r.log.With("component", "runtime"),
		ShutdownTimeout: o.ShutdownTimeout,
		Build:           runtime.BuildOptions{CacheDir: o.HandlerCache},
		StateDir:        o.Broker.stateDir(),
		LocalHandlers:   o.LocalHandlers,
		Hooks:           hooks,
		Intercept:       o.Intercept,
	}
	r.tel.apply(&ho)
	if r.host, err = runtime.New(ctx, ho); err != nil {
		return nil, fmt.Errorf("start the host: %w", err)
	}
	r.running.Store(r.host)

	runCtx, stopRun := context.WithCancel(ctx)
	r.stop = stopRun
	runErr := make(chan error, 1)
	go func() { runErr <- r.host.Run(runCtx, r.files.pipelines...) }()
	r.rl.start(runCtx, r.files)
	// The host's goroutine ends Run; everything beside it ends with it.
	done := make(chan struct{})
	side := make(chan error, 1)
	go func() { side <- r.sideWork(runCtx, done) }()
	go func() {
		err := <-runErr
		close(done)
		if serr := <-side; serr != nil && err == nil {
			err = serr
		}
		logTotals(r.log, r.host)
		stopRun()
		r.closeAll()
		r.err = err
		close(r.ended)
	}()
	return r, nil
}

// connect makes the run's client as the files say, starting the
// embedded broker when they name no service URL, or takes
// Options.Client.
func (r *Run) connect(ctx context.Context) (err error) {
	if c := r.opts.Client; c != nil {
		if r.files.KeyShared() && !c.Options().Producer.Batching.ByKey {
			return &OptionError{"Client", fmt.Errorf("a pipeline reads KeyShared, and the client's producers do not batch by key (pool.BatchingOptions.ByKey)")}
		}
		r.client = c
		return nil
	}
	po := r.files.ClientOptions()
	if r.opts.ServiceURL != "" {
		po.ServiceURL = r.opts.ServiceURL
	}
	po.Logger = r.log.With("component", "pool")
	r.reach.hook(&po)
	if po.ServiceURL == "" {
		if r.broker, err = r.startBroker(ctx); err != nil {
			return fmt.Errorf("start the embedded broker: %w", err)
		}
		r.closers = append(r.closers, func() {
			if err := r.broker.Close(); err != nil {
				r.log.Warn("close the embedded broker", "err", err)
			}
		})
		po.ServiceURL = r.broker.ServiceURL()
	}
	if r.client, err = pool.New(ctx, po); err != nil {
		return fmt.Errorf("connect to %s: %w", po.ServiceURL, err)
	}
	r.closers = append(r.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.client.Close(cctx); err != nil {
			r.log.Warn("close the client", "err", err)
		}
	})

	return nil
}

// ready is the run's readiness, for /readyz: not while the broker cannot
// be reached (the client retries connecting, a lookup, a subscription
// for want of it), nor before the host runs, nor while a pipeline is not
// consuming (runtime.Host.Ready).
func (r *Run) ready() error {
	if err := r.reach.err(); err != nil {
		return err
	}
	h := r.running.Load()
	if h == nil {
		return errors.New("starting: the pipelines do not run yet")
	}
	return h.Ready()
}

// statusLines logs the status lines every interval (see status) until
// the returned func is called, which waits for it to stop.
func (r *Run) statusLines(interval time.Duration) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		st := newStatus(r.log)
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				st.report(r.running.Load(), r.reach.unreachable())
			}
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}

// closeAll closes what was opened, the last first.
func (r *Run) closeAll() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// Wait waits for the run to end and returns why: nil after a graceful
// stop (ctx ended, Stop, or the input drained), else what failed (a
// pipeline that could not start or failed for good, the input that could
// not be published). Everything the run opened is closed when it
// returns.
func (r *Run) Wait() error {
	<-r.ended
	return r.err
}

// Stop begins the graceful stop; Wait waits for its end.
func (r *Run) Stop() { r.stop() }

// Host is the running host: its Health, Stats and Ready.
func (r *Run) Host() *runtime.Host { return r.host }

// Client is the run's connection pool. It stays the run's: closed when
// the run ends.
func (r *Run) Client() *pool.Client { return r.client }

// ServiceURL is the URL the run is connected to (the embedded broker's
// when it started one).
func (r *Run) ServiceURL() string { return r.client.Options().ServiceURL }

// Files are the files the run runs now (the last reload's).
func (r *Run) Files() *Files {
	r.rl.mu.Lock()
	defer r.rl.mu.Unlock()
	return r.rl.fs
}

// Reload reads the files again and applies them to the running host as
// SIGHUP does: unchanged pipelines go on untouched, changed ones change in
// place, removed ones drain and stop, new ones start (runtime.Host.Reload).
// Files that do not load, a change of the connection settings (which
// takes a restart), or pipelines the host refuses leave the run as it
// was, and the error says why.
func (r *Run) Reload(ctx context.Context) error { return r.rl.reload(ctx, "Reload") }

// Publish publishes m to topic through the run's client, as
// pool.Client.PublishAsync does; what has its receipt counts for Drained.
func (r *Run) Publish(ctx context.Context, topic string, m pool.Message, done func(pulsarwire.MessageID, error)) {
	full := fullTopic(topic)
	m, receipt := r.tel.send(topic, m, func(id pulsarwire.MessageID, err error) {
		if err == nil {
			r.w.add(full)
		}
		if done != nil {
			done(id, err)
		}
	})
	r.client.PublishAsync(ctx, topic, m, receipt)
}

// Drained reports whether everything published during the run (the
// input, what Publish published, the handlers' outputs) has been
// processed: every pipeline has settled (acknowledged, dead-lettered,
// dropped or filtered) as many messages as were published to its topics, and
// FinalOutputs, if set, has been called for every final output.
func (r *Run) Drained() bool { return r.w.drained(r.host, r.fo) }

// InputSent is how many lines of Options.Input have been published (with
// their receipts).
func (r *Run) InputSent() int64 {
	if r.in == nil {
		return 0
	}
	return r.in.sent.Load()
}

// notice tells the person who started the run.
func (r *Run) notice(line string) {
	if r.opts.Notices != nil {
		fmt.Fprintln(r.opts.Notices, line)
		return
	}
	r.log.Info(line)
}

// sideWork is what runs beside the host: publishing the input once every
// pipeline runs and, with UntilDrained, stopping the host once the input
// is processed. It returns when done closes (Run
// returned), after the publishing stopped: a failure to publish the
// input.
func (r *Run) sideWork(runCtx context.Context, done <-chan struct{}) error {
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	feedCtx, stopFeed := context.WithCancel(runCtx)
	defer stopFeed()
	in := r.in
	waiting := in != nil // to publish the input
	feeding := false
	fed := make(chan error, 1)
	untilDrained := r.opts.UntilDrained
	var failure error
	for {
		select {
		case <-done:
			if feeding {
				stopFeed()
				<-fed
			}
			return failure
		case err := <-fed:
			feeding = false
			if err != nil {
				if runCtx.Err() == nil {
					failure = err
					r.log.Error("publishing the input failed; stopping", "err", err)
					r.stop()
				}
				continue
			}
			r.log.Info("input published", "messages", in.sent.Load(), "topic", in.topic)
		case <-poll.C:
			if waiting && allRunning(r.host) {
				waiting, feeding = false, true
				go func() { fed <- in.feed(feedCtx, r.client, r.w) }()
			}
			if untilDrained && in.finished() && r.w.drained(r.host, r.fo) {
				untilDrained = false
				r.log.Info("input drained: stopping", "messages", in.sent.Load())
				r.stop()
			}
		}
	}
}

// allRunning reports whether every pipeline has started.
func allRunning(h *runtime.Host) bool {
	hs := h.Health()
	if len(hs) == 0 {
		return false
	}
	for _, p := range hs {
		if p.State != runtime.StateHealthy && p.State != runtime.StateDegraded && p.State != runtime.StatePaused {
			return false
		}
	}
	return true
}
