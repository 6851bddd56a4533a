package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/runtime"
)

// runner runs the pipelines of a set of files: load reads and checks
// them, run connects (or starts the embedded broker) and runs what load
// returned. load has no side effects, so a reload (SIGHUP, a changed file)
// calls it again and gets the same checks and errors as a start; a
// handler package's change shows in runtime.HashPackage.
type runner struct {
	cfg       runConfig
	cmd       cmdIO
	log       *slog.Logger
	stdout    io.Writer
	stderr    io.Writer
	lookupEnv func(string) (string, bool)
	// stop ends the host's run as a signal would; set by run.
	stop context.CancelFunc
}

// loaded is what the files say, checked and merged.
type loaded struct {
	// conn is the connection settings every file agrees on (ServiceURL
	// "": the embedded broker).
	conn connSettings
	// pipelines of every file, in file order.
	pipelines []pipelines.Pipeline
	// fileOf names the file each pipeline comes from, by name.
	fileOf map[string]string
	// telemetry is the files' telemetry section.
	telemetry pipelines.Telemetry
}

// load reads every file and checks them together: each file on its own
// (as pipelines.Load does), pipeline names unique across the files, and
// the same connection settings (service URL, TLS, auth, operation
// retries) in every file that sets them.
func (r *runner) load() (*loaded, error) {
	l := &loaded{fileOf: map[string]string{}}
	var connFrom, telemetryFrom string
	var errs []error
	for _, path := range r.cfg.files {
		f, err := loadPipelineFile(path, r.lookupEnv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range f.Pipelines {
			if other, dup := l.fileOf[p.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: pipeline %q is also defined in %s: names must be unique across the files", path, p.Name, other))
				continue
			}
			l.fileOf[p.Name] = path
			l.pipelines = append(l.pipelines, p)
		}
		if err := l.addTelemetry(f.Telemetry, path, &telemetryFrom); err != nil {
			errs = append(errs, err)
		}
		conn := connSettings{f.ServiceURL, f.TLS, f.Auth, f.OperationRetries}
		if conn == (connSettings{}) {
			continue // says nothing about the connection
		}
		if connFrom == "" {
			l.conn, connFrom = conn, path
			continue
		}
		if conn.ServiceURL != l.conn.ServiceURL {
			errs = append(errs, fmt.Errorf("%s: service_url %q differs from %q in %s: one run talks to one cluster", path, conn.ServiceURL, l.conn.ServiceURL, connFrom))
		} else if conn != l.conn {
			errs = append(errs, fmt.Errorf("%s: tls, auth or operation_retries differ from %s: one run has one connection", path, connFrom))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return l, nil
}

// connSettings are the parts of a file that say how to reach the
// cluster.
type connSettings struct {
	ServiceURL       string
	TLS              pipelines.TLS
	Auth             pipelines.Auth
	OperationRetries pipelines.OperationRetries
}

// poolOptions are the client options the files' connection settings ask
// for.
func (l *loaded) poolOptions() pool.Options {
	c := &l.conn
	return pool.Options{
		ServiceURL: c.ServiceURL,
		Token:      c.Auth.Token,
		TLS: pool.TLSOptions{
			CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile,
			SkipHostnameVerification: c.TLS.SkipHostnameVerification, InsecureSkipVerify: c.TLS.Insecure,
		},
		OperationRetries: pool.OperationRetries{
			Attempts: c.OperationRetries.Attempts, Delay: c.OperationRetries.Delay, Timeout: c.OperationRetries.Timeout,
		},
	}
}

// keyShared reports whether a pipeline reads with a KeyShared
// subscription.
func (l *loaded) keyShared() bool {
	for _, p := range l.pipelines {
		if p.WithDefaults().Source.Type == pipelines.KeyShared {
			return true
		}
	}
	return false
}

// run runs the pipelines until ctx ends (or, with --until-drained, until
// the input is processed) and returns the exit status.
func (r *runner) run(ctx context.Context) int {
	rl := r.newReloader()
	defer rl.close()
	l, err := r.load()
	if err != nil {
		// FILE:LINE:COL: field: what is wrong, a line each, as validate.
		fmt.Fprintf(r.stderr, "%v\n%s: nothing started\n", err, r.cmd.prefix())
		return exitUsage
	}
	var in *inputFeed
	if r.cfg.input != "" {
		if in, err = openInput(r.cfg, l); err != nil {
			return r.cmd.fail(usagef("%v", err))
		}
		defer in.close()
	}

	po := l.poolOptions()
	if r.cfg.url != "" {
		po.ServiceURL = r.cfg.url
	}
	if l.keyShared() {
		// The broker dispatches an entry whole, by its first key: outputs
		// (and --input) for KeyShared pipelines must not mix keys in one.
		po.Producer.Batching.ByKey = true
	}
	po.Logger = r.log.With("component", "pool")
	if po.ServiceURL == "" {
		b, err := r.startBroker(ctx)
		if err != nil {
			return r.cmd.fail(fmt.Errorf("start the embedded broker: %w", err))
		}
		defer func() {
			if err := b.Close(); err != nil {
				r.log.Warn("close the embedded broker", "err", err)
			}
		}()
		po.ServiceURL = b.ServiceURL()
	}
	client, err := pool.New(ctx, po)
	if err != nil {
		if interrupted(ctx) {
			return r.cmd.interrupted()
		}
		return r.cmd.fail(fmt.Errorf("connect to %s: %w", po.ServiceURL, err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Close(cctx); err != nil {
			r.log.Warn("close the client", "err", err)
		}
	}()

	w := newWatch(l)
	var printer *outputPrinter
	if r.cfg.print {
		if printer, err = startPrinter(ctx, client, l, w, r.stdout, r.log); err != nil {
			if interrupted(ctx) {
				return r.cmd.interrupted()
			}
			return r.cmd.fail(fmt.Errorf("subscribe to the outputs: %w", err))
		}
		defer printer.close()
	}

	tel, err := startHostTelemetry(ctx, l.telemetry, r.cfg.telemetryAddr, r.log.With("component", "telemetry"))
	if err != nil {
		r.log.Error("set up telemetry", "err", err)
		return 1
	}
	defer tel.close(10 * time.Second)
	if in != nil {
		in.tr = tel.tracing
	}
	ho := runtime.Options{
		Client:          client,
		Logger:          r.log.With("component", "runtime"),
		ShutdownTimeout: r.cfg.shutdownTimeout,
		Build:           runtime.BuildOptions{CacheDir: r.cfg.handlerCache},
		Hooks:           runtime.Hooks{Output: w.output},
	}
	tel.apply(&ho)
	host, err := runtime.New(ctx, ho)
	if err != nil {
		return r.cmd.fail(fmt.Errorf("start the host: %w", err))
	}
	if err := tel.serve(host); err != nil {
		r.log.Error("serve telemetry", "err", err)
		_ = host.Close(ctx)
		return 1
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	r.stop = stopRun
	runErr := make(chan error, 1)
	go func() { runErr <- host.Run(runCtx, l.pipelines...) }()
	rl.start(runCtx, host, l)

	// The host's goroutine ends Run; everything below ends with it.
	done := make(chan struct{})
	side := make(chan error, 1)
	go func() {
		side <- r.sideWork(runCtx, done, host, client, in, w, printer)
	}()
	err = <-runErr
	close(done)
	if serr := <-side; serr != nil && err == nil {
		err = serr
	}
	r.logTotals(host)
	if in != nil && printer != nil {
		fmt.Fprintf(r.stdout, "streamrun: %d messages in, %d outputs printed\n", in.sent.Load(), printer.total())
	}
	if err != nil {
		return r.cmd.fail(err)
	}
	if interrupted(ctx) {
		return r.cmd.interrupted()
	}
	r.log.Info("stopped")
	return exitOK
}

// sideWork is what runs beside the host: the status lines, feeding
// --input once every pipeline runs and, with --until-drained, stopping
// the host once the input is processed. It returns when done closes (Run
// returned), after the feeding stopped: a failure to publish the input.
func (r *runner) sideWork(runCtx context.Context, done <-chan struct{}, host *runtime.Host, client *pool.Client,
	in *inputFeed, w *watch, printer *outputPrinter) error {
	var status <-chan time.Time
	if r.cfg.status > 0 {
		t := time.NewTicker(r.cfg.status)
		defer t.Stop()
		status = t.C
	}
	st := newStatus(r.log)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	feedCtx, stopFeed := context.WithCancel(runCtx)
	defer stopFeed()
	waiting := in != nil // to feed the input
	feeding := false
	fed := make(chan error, 1)
	untilDrained := r.cfg.untilDrained
	var failure error
	for {
		select {
		case <-done:
			if feeding {
				stopFeed()
				<-fed
			}
			return failure
		case <-status:
			st.report(host)
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
			if waiting && allRunning(host) {
				waiting, feeding = false, true
				go func() { fed <- in.feed(feedCtx, client, w) }()
			}
			if untilDrained && in.finished() && w.drained(host, printer) {
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
		if p.State != runtime.StateHealthy && p.State != runtime.StateDegraded {
			return false
		}
	}
	return true
}

// startBroker starts the embedded broker in this process and says so on
// stdout.
func (r *runner) startBroker(ctx context.Context) (*broker.Cluster, error) {
	opts := broker.Options{
		Listen: r.cfg.listen,
		HTTP:   r.cfg.httpAddr,
		Memory: r.cfg.memory,
		Logger: r.log.With("component", "broker"),
	}
	where := "data=memory"
	if !r.cfg.memory {
		opts.DataDir = r.cfg.dataDir
		if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		where = "data=" + opts.DataDir
	}
	b, err := broker.Start(ctx, opts)
	if errors.Is(err, syscall.EADDRINUSE) && (!r.cfg.listenSet || !r.cfg.httpSet) {
		// A Pulsar or a broker already running here does not stop a run:
		// the default addresses give way to free ports.
		opts.Listen = freePort(opts.Listen, r.cfg.listenSet)
		opts.HTTP = freePort(opts.HTTP, r.cfg.httpSet)
		b, err = broker.Start(ctx, opts)
	}
	if err != nil {
		return nil, err
	}
	admin := b.AdminURL()
	if admin == "" {
		admin = "off"
	}
	fmt.Fprintf(r.stdout, "streamrun: no service_url in %s: embedded broker started in this process, service_url=%s admin_url=%s %s\n",
		strings.Join(r.cfg.files, ", "), b.ServiceURL(), admin, where)
	return b, nil
}

// freePort is addr with port 0 (a free port), unless it was given or is
// "-" (off).
func freePort(addr string, given bool) string {
	if given || addr == "-" {
		return addr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, "0")
}

// logTotals logs every pipeline's totals once the run is over.
func (r *runner) logTotals(h *runtime.Host) {
	for _, s := range h.Stats() {
		r.log.Info("pipeline totals", "pipeline", s.Pipeline, "received", s.Received, "acked", s.Acked,
			"retried", s.Retried, "dead_lettered", s.DeadLettered, "dropped", s.Dropped, "handed_back", s.HandedBack)
	}
}
