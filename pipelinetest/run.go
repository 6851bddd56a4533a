package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// Options configure how cases run. The zero value works.
type Options struct {
	// LookupEnv supplies ${VAR} to the runs. Default os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger receives the logs of each case's broker and host. Default:
	// none (a failing case says what went wrong itself).
	Logger *slog.Logger
	// HandlerCache is where handlers given as a Go package are built and
	// cached, as streamrun.Options.HandlerCache. Default
	// runtime.DefaultHandlerCacheDir().
	HandlerCache string
	// Run, when set, selects the cases whose names it matches, as go
	// test -run does. Default nil: every case.
	Run *regexp.Regexp
}

// Result is how a case went.
type Result struct {
	File, Case string
	// Failures say what did not match, each a line or a few ("outputs to
	// x: ..."); none when the case passed.
	Failures []string
	Took     time.Duration
}

// Passed reports whether the case passed.
func (r Result) Passed() bool { return len(r.Failures) == 0 }

// Run runs every case of f, one after the other, calling report with
// each result as it comes, and returns them. An error is a problem with
// the pipelines the cases could not run for (a *FileError: the pipeline
// file as the host checks it); a case that fails is a Result.
//
// The handlers given as a Go package are built (or found in the cache)
// first, outside every case's timeout: a build under load takes longer
// than a case.
func (f *File) Run(ctx context.Context, o Options, report func(Result)) ([]Result, error) {
	f.build(ctx, o)
	var out []Result
	for i := range f.Cases {
		if o.Run != nil && !o.Run.MatchString(f.Cases[i].Name) {
			continue
		}
		r, err := f.RunCase(ctx, i, o)
		if err != nil {
			return out, err
		}
		if report != nil {
			report(r)
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// build builds the handlers given as a Go package into the cache, so
// that the cases find them there. A failure is left for the case to
// report: its start fails the same way.
func (f *File) build(ctx context.Context, o Options) {
	for _, p := range f.Pipeline.Pipelines {
		if p.Handler.Package == "" {
			continue
		}
		_, _ = runtime.BuildHandler(ctx, p.Handler.Package, runtime.BuildOptions{CacheDir: o.HandlerCache})
	}
}

// RunCase runs case i of f: a broker in memory of its own, the
// pipelines through streamrun.Start (the handlers' real processes, built
// as `streamrun run` builds them), the state seeded, the inputs
// published, the faults done, then the checks once every input is
// settled and every output received (or the timeout passed). The
// timeout includes building a handler package not built yet (Run builds
// them before its cases).
func (f *File) RunCase(ctx context.Context, i int, o Options) (Result, error) {
	c := &f.Cases[i]
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	timeout := f.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	start := time.Now()
	cr := &caseRun{f: f, c: c, o: o, log: o.Logger, timeout: timeout,
		seen: map[msgKey][]settled{}, ids: make([]msgKey, len(c.Inputs)), fired: make([]bool, len(c.Faults)),
		published: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := cr.run(ctx)
	res := Result{File: f.Path, Case: c.Name, Failures: cr.failures, Took: time.Since(start)}
	var fe *FileError
	if errors.As(err, &fe) {
		return res, err
	}
	if err != nil {
		res.Failures = append([]string{err.Error()}, res.Failures...)
	}
	return res, nil
}

// msgKey names a message a pipeline received: its topic (without a
// partition) and id.
type msgKey struct {
	pipeline, topic string
	id              pulsarwire.MessageID
}

func keyOf(pipeline, topic string, id pulsarwire.MessageID) msgKey {
	id.BatchSize = 0 // not part of the identity
	return msgKey{pipeline, fullTopic(topic), id}
}

// settled is an outcome a message came to, and why.
type settled struct {
	outcome, reason string
}

// caseRun is one case running.
type caseRun struct {
	f       *File
	c       *Case
	o       Options
	log     *slog.Logger
	timeout time.Duration

	mu        sync.Mutex
	seen      map[msgKey][]settled // by the message hook
	ids       []msgKey             // each input's, once receipted
	fired     []bool               // each fault's
	published chan struct{}        // closed once every input is receipted

	outputs  []*collector
	failures []string
}

func (cr *caseRun) fail(format string, args ...any) {
	cr.failures = append(cr.failures, fmt.Sprintf(format, args...))
}

func (cr *caseRun) run(ctx context.Context) error {
	pf := cr.pipelineFile()
	b, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", HTTP: "-", Memory: true,
		Transactions: exactlyOnce(pf), Logger: cr.log.With("component", "broker")})
	if err != nil {
		return fmt.Errorf("start the broker: %w", err)
	}
	defer b.Close()
	client, err := pool.New(ctx, pool.Options{ServiceURL: b.ServiceURL(), Logger: cr.log.With("component", "pool"),
		// KeyShared pipelines need producers batching by key; the rest
		// do not mind.
		Producer: pool.ProducerOptions{Batching: pool.BatchingOptions{ByKey: true}}})
	if err != nil {
		return fmt.Errorf("connect to the broker: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = client.Close(cctx)
	}()
	changelog := ""
	for _, p := range pf.Pipelines {
		if p.State.Enabled {
			changelog = p.ChangelogTopic()
		}
	}
	if err := cr.seed(ctx, client, changelog); err != nil {
		return err
	}
	collecting, stopCollecting := context.WithCancel(ctx)
	defer stopCollecting()
	var collectors sync.WaitGroup
	defer collectors.Wait()
	for i, to := range cr.c.Expect.Outputs {
		col, err := collect(ctx, collecting, client, to.Topic, i, cr.log, &collectors)
		if err != nil {
			return err
		}
		cr.outputs = append(cr.outputs, col)
	}

	// The input topics exist before the pipelines subscribe, so that a
	// pattern finds them at once rather than at its next refresh.
	for _, in := range cr.c.Inputs {
		if _, err := client.Producer(ctx, in.Topic); err != nil {
			return fmt.Errorf("create the input topic %s: %w", in.Topic, err)
		}
	}

	so := streamrun.Options{
		Pipelines:    []pipelines.File{pf},
		Client:       client,
		LookupEnv:    cr.o.LookupEnv,
		Logger:       cr.log,
		HandlerCache: cr.o.HandlerCache,
		Notices:      io.Discard,
		Hooks:        runtime.Hooks{Message: cr.message},
	}
	if len(cr.c.Faults) > 0 {
		so.Intercept = cr.intercept
	}
	r, err := streamrun.Start(ctx, so)
	var filesErr *streamrun.FilesError
	if errors.As(err, &filesErr) {
		return &FileError{fmt.Errorf("%s: %w", cr.f.PipelineFile, err)}
	}
	if err != nil {
		return fmt.Errorf("start the pipelines: %w", err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		r.Stop()
		return r.Wait()
	}
	defer stop()
	if err := cr.running(ctx, r); err != nil {
		return err
	}
	if err := cr.publish(ctx, r); err != nil {
		return err
	}
	waitErr := cr.wait(ctx, r)
	if err := stop(); err != nil && ctx.Err() == nil {
		cr.fail("the run failed: %v", err)
	}
	stopCollecting()
	collectors.Wait()
	if waitErr != nil {
		cr.fail("%v", waitErr)
	}
	cr.checkOutcomes()
	cr.checkFaults()
	for i, col := range cr.outputs {
		cr.failures = append(cr.failures, compareOutputs(cr.c.Expect.Outputs[i], col.got())...)
	}
	if cr.c.Expect.State != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		vals, err := runtime.ReadState(sctx, client, changelog)
		if err != nil {
			return fmt.Errorf("read the state after: %w", err)
		}
		cr.failures = append(cr.failures, compareState(cr.c.Expect.State, vals)...)
	}
	return nil
}

// pipelineFile is the file to run: the pipelines named, with a hang's
// shorter handler timeout.
func (cr *caseRun) pipelineFile() pipelines.File {
	pf := *cr.f.Pipeline
	pf.Pipelines = slices.Clone(pf.Pipelines)
	hang := time.Duration(0)
	for _, ft := range cr.c.Faults {
		if ft.Hang != 0 {
			t := ft.Timeout
			if t == 0 {
				t = DefaultHangTimeout
			}
			if hang == 0 || t < hang {
				hang = t
			}
		}
	}
	if hang > 0 {
		for i := range pf.Pipelines {
			if own := pf.Pipelines[i].WithDefaults().Handler.Timeout; own < hang {
				continue
			}
			pf.Pipelines[i].Handler.Timeout = hang
		}
	}
	return pf
}

func exactlyOnce(pf pipelines.File) bool {
	for i := range pf.Pipelines {
		if pf.Pipelines[i].ExactlyOnce() {
			return true
		}
	}
	return false
}

// seed writes the case's state to the changelog, as the pipeline's own
// changes are written, before the pipeline reads it back at start.
func (cr *caseRun) seed(ctx context.Context, client *pool.Client, changelog string) error {
	keys := make([]string, 0, len(cr.c.State))
	for k := range cr.c.State {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := valueBytes(cr.c.State[k]) // checked by Load
		if _, err := client.Publish(ctx, changelog, pool.Message{Key: k, Payload: v}); err != nil {
			return fmt.Errorf("seed the state of key %q: %w", k, err)
		}
	}
	return nil
}

// running waits until every pipeline runs.
func (cr *caseRun) running(ctx context.Context, r *streamrun.Run) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		hs := r.Host().Health()
		up := len(hs) > 0
		for _, h := range hs {
			switch h.State {
			case runtime.StateHealthy, runtime.StateDegraded:
			case runtime.StateFailed:
				return fmt.Errorf("pipeline %s failed at start: %s", h.Pipeline, h.Reason)
			default:
				up = false
			}
		}
		if up {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pipelines did not start within %v", cr.timeout)
		case <-tick.C:
		}
	}
}

// publish publishes the inputs in order through the run (so that its
// drain counts them) and waits for their receipts.
func (cr *caseRun) publish(ctx context.Context, r *streamrun.Run) error {
	errs := make([]error, len(cr.c.Inputs))
	var wg sync.WaitGroup
	for i := range cr.c.Inputs {
		in := &cr.c.Inputs[i]
		m, err := in.message()
		if err != nil {
			return fmt.Errorf("input %d: %w", i+1, err)
		}
		p := cr.f.reader(in.Topic)
		wg.Add(1)
		r.Publish(ctx, in.Topic, m, func(id pulsarwire.MessageID, err error) {
			defer wg.Done()
			if err != nil {
				errs[i] = fmt.Errorf("publish input %d: %w", i+1, err)
				return
			}
			cr.mu.Lock()
			cr.ids[i] = keyOf(p.Name, in.Topic, id)
			cr.mu.Unlock()
		})
	}
	wg.Wait()
	close(cr.published)
	return errors.Join(errs...)
}

// message hears each message's outcome (runtime.Hooks.Message).
func (cr *caseRun) message(pipeline string, m *subscribe.Message, o runtime.Outcome, reason string) {
	k := keyOf(pipeline, m.Topic, m.ID)
	cr.mu.Lock()
	cr.seen[k] = append(cr.seen[k], settled{outcomeName(o), reason})
	cr.mu.Unlock()
}

func outcomeName(o runtime.Outcome) string {
	switch o {
	case runtime.Acked:
		return OutcomeAck
	case runtime.Retried:
		return OutcomeRetry
	case runtime.DeadLettered:
		return OutcomeDeadLetter
	case runtime.Dropped:
		return OutcomeDrop
	case runtime.Filtered:
		return OutcomeFilter
	}
	return o.String()
}

// intercept does the case's faults (runtime.Options.Intercept): each
// once, on the first call of a batch holding its input.
func (cr *caseRun) intercept(ctx context.Context, call runtime.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
	select {
	case <-cr.published: // the inputs' ids are known
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ft, ok := cr.faultFor(call)
	if !ok || call.Pid == 0 {
		return next(ctx)
	}
	switch {
	case ft.Crash != 0:
		if err := syscall.Kill(call.Pid, syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("fault crash: kill %d: %w", call.Pid, err)
		}
		return next(ctx)
	case ft.Hang != 0:
		if err := syscall.Kill(call.Pid, syscall.SIGSTOP); err != nil {
			return nil, fmt.Errorf("fault hang: stop %d: %w", call.Pid, err)
		}
		res, err := next(ctx)
		// The host kills what it takes for hung; should it not have, the
		// process must not stay stopped.
		_ = syscall.Kill(call.Pid, syscall.SIGCONT)
		return res, err
	default:
		if _, err := next(ctx); err != nil {
			return nil, err
		}
		return nil, &host.ResponseError{Plugin: call.Pipeline, Index: -1, Problem: "a garbled answer (streamrun test's fault garbage)"}
	}
}

// faultFor is the fault to do on call, marked done; false when none.
func (cr *caseRun) faultFor(call runtime.Call) (Fault, bool) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for i, ft := range cr.c.Faults {
		if cr.fired[i] {
			continue
		}
		want := cr.ids[max(ft.Crash, ft.Hang, ft.Garbage)-1]
		for _, m := range call.Messages {
			if keyOf(call.Pipeline, m.Topic, m.ID) == want {
				cr.fired[i] = true
				return ft, true
			}
		}
	}
	return Fault{}, false
}

// wait waits until every input is settled (or retried, where a retry is
// expected), the run drained and every expected output received; an
// error says what it still waited for at the timeout.
func (cr *caseRun) wait(ctx context.Context, r *streamrun.Run) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting := cr.waitingFor(ctx, r)
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %v waiting for %s", cr.timeout, waiting)
		case <-tick.C:
		}
	}
}

// waitingFor says what the case still waits for, "" for nothing.
func (cr *caseRun) waitingFor(ctx context.Context, r *streamrun.Run) string {
	retry := false
	cr.mu.Lock()
	for i, in := range cr.c.Inputs {
		seen := cr.seen[cr.ids[i]]
		if in.Outcome == OutcomeRetry {
			retry = true
			if !slices.ContainsFunc(seen, func(s settled) bool { return s.outcome == OutcomeRetry }) {
				cr.mu.Unlock()
				return fmt.Sprintf("input %d to be retried", i+1)
			}
			continue
		}
		if len(seen) == 0 || seen[len(seen)-1].outcome == OutcomeRetry {
			cr.mu.Unlock()
			return fmt.Sprintf("input %d to be settled", i+1)
		}
	}
	cr.mu.Unlock()
	// A message retried for ever keeps the run from draining: with a
	// retry expected, an input's settlement (after its outputs'
	// receipts) is what says its outputs are out.
	if !retry && !r.Drained() {
		return "every pipeline to settle what was published to it"
	}
	for _, col := range cr.outputs {
		if n, err := col.c.Backlog(ctx); err != nil || n > 0 {
			return "the outputs to " + col.topic + " to be received"
		}
	}
	return ""
}

// checkFaults fails the case for each fault not done: its input was
// never handed to a handler process, so the case showed nothing of it.
func (cr *caseRun) checkFaults() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for i, ft := range cr.c.Faults {
		if !cr.fired[i] {
			cr.fail("fault %d (%s) was not done: no call to a handler process held input %d", i+1, ft, max(ft.Crash, ft.Hang, ft.Garbage))
		}
	}
}

func (ft Fault) String() string {
	switch {
	case ft.Crash != 0:
		return fmt.Sprintf("crash: %d", ft.Crash)
	case ft.Hang != 0:
		return fmt.Sprintf("hang: %d", ft.Hang)
	}
	return fmt.Sprintf("garbage: %d", ft.Garbage)
}

// checkOutcomes compares each input's outcome with the one expected.
func (cr *caseRun) checkOutcomes() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	for i, in := range cr.c.Inputs {
		seen := cr.seen[cr.ids[i]]
		if p := outcomeProblem(in, seen); p != "" {
			cr.fail("input %d: %s", i+1, p)
		}
	}
}

// outcomeProblem says how seen (the outcomes in order) differs from
// what in expects, "" when it does not.
func outcomeProblem(in Input, seen []settled) string {
	if len(seen) == 0 {
		return "never settled (no outcome)"
	}
	var got []string
	for _, s := range seen {
		got = append(got, s.String())
	}
	told := strings.Join(got, ", then ")
	reasonOK := func(s settled) bool { return in.Reason == "" || mustMatch(in.Reason, s.reason) }
	switch last := seen[len(seen)-1]; {
	case in.Outcome == OutcomeRetry:
		for _, s := range seen {
			if s.outcome == OutcomeRetry && reasonOK(s) {
				return ""
			}
		}
		return fmt.Sprintf("want a retry%s, got %s", reasonWanted(in.Reason), told)
	case last.outcome == OutcomeRetry:
		return fmt.Sprintf("not settled: %s", told)
	case in.Outcome != "" && (last.outcome != in.Outcome || !reasonOK(last)):
		return fmt.Sprintf("want %s%s, got %s", in.Outcome, reasonWanted(in.Reason), told)
	}
	return ""
}

func (s settled) String() string {
	if s.reason == "" {
		return s.outcome
	}
	return fmt.Sprintf("%s (%q)", s.outcome, s.reason)
}

func reasonWanted(re string) string {
	if re == "" {
		return ""
	}
	return fmt.Sprintf(" with a reason matching %q", re)
}
