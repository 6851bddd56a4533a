package telemetry

import (
	"context"
	"log/slog"
	"net/url"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// guardedExporter is the OTLP exporter as the batch span processor sees
// it. A failed export is reported here, on the program's log, and not
// returned: the processor would hand it to OpenTelemetry's global error
// handler, which prints a plain line through the log package on every
// failure. And cut ends the exports in flight (and every later one) at
// once, which is how Tracing.Shutdown bounds the flush at exit: the
// processor's last export runs under a context of its own, which the
// bound on Shutdown does not reach.
type guardedExporter struct {
	inner  sdktrace.SpanExporter
	report *failureReport
	stop   context.Context
	cancel context.CancelCauseFunc
}

func newGuardedExporter(inner sdktrace.SpanExporter, r *failureReport) *guardedExporter {
	stop, cancel := context.WithCancelCause(context.Background())
	return &guardedExporter{inner: inner, report: r, stop: stop, cancel: cancel}
}

// cut ends the exports in flight and every later one with cause, and
// keeps their failures for one report at exit.
func (e *guardedExporter) cut(cause error) {
	e.report.exiting()
	e.cancel(cause)
}

func (e *guardedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(e.stop, func() { cancel(context.Cause(e.stop)) })()
	if err := e.inner.ExportSpans(ctx, spans); err != nil {
		e.report.failed(err, len(spans))
		return nil
	}
	e.report.exported()
	return nil
}

func (e *guardedExporter) Shutdown(ctx context.Context) error {
	defer e.cancel(nil) // releases stop's resources; exports are over
	return e.inner.Shutdown(ctx)
}

// failureReport says on a log that exports fail, without flooding it: a
// collector that is away fails every export (every 5 s, or at every full
// batch, while spans are made). The first failure is a WARN; later ones
// are counted and reported in the next WARN, at most one each every; the
// first export that works after a WARN is an INFO; and at exit (close)
// the failures not reported yet are.
type failureReport struct {
	log      *slog.Logger
	every    time.Duration
	endpoint string
	now      func() time.Time

	mu      sync.Mutex
	last    time.Time // of the last WARN; zero before the first
	warned  bool      // a WARN since the last export that worked
	quiet   int       // failed exports not reported yet
	lost    int       // spans of those
	lastErr error     // the last of those
	cut     bool      // the flush at exit was cut: the rest waits for close
	cutErr  error     // the first failure since (it says why)
}

func newFailureReport(log *slog.Logger, every time.Duration, endpoint string) *failureReport {
	return &failureReport{log: log, every: every, endpoint: endpoint, now: time.Now}
}

// failed reports an export of spans that failed with err.
func (r *failureReport) failed(err error, spans int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.quiet++
	r.lost += spans
	r.lastErr = err
	if r.cut {
		if r.cutErr == nil {
			r.cutErr = err
		}
		return
	}
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		return
	}
	r.warn(false)
	r.last = now
}

// warn logs the failures not reported yet and forgets them; r.mu held.
// The last one, at exit, says nothing of reports to come.
func (r *failureReport) warn(last bool) {
	attrs := []any{"endpoint", r.endpoint, "spans_lost", r.lost, "error", r.lastErr.Error()}
	if r.quiet > 1 {
		attrs = append(attrs, "failed_exports", r.quiet)
	}
	if !last {
		attrs = append(attrs, "reported_at_most_every", r.every.String())
	}
	r.log.Warn("traces not exported", attrs...)
	r.quiet, r.lost, r.lastErr, r.warned = 0, 0, nil, true
}

// exported notes an export that worked: after a WARN, an INFO says so,
// with the failures since that WARN.
func (r *failureReport) exported() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.warned {
		return
	}
	attrs := []any{"endpoint", r.endpoint}
	if r.quiet > 0 {
		attrs = append(attrs, "failed_exports", r.quiet, "spans_lost", r.lost)
	}
	r.log.Info("traces exported again", attrs...)
	r.quiet, r.lost, r.lastErr, r.warned = 0, 0, nil, false
}

// exiting says the flush at exit is being cut: the exports it ends are
// reported together, by close.
func (r *failureReport) exiting() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
}

// close reports the failures not reported yet: the program exits.
func (r *failureReport) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.quiet > 0 {
		if r.cutErr != nil {
			r.lastErr = r.cutErr
		}
		r.warn(true)
	}
}

// endpointForLog is where traces go, as a log may show it: without any
// user information the URL may carry.
func (c Config) endpointForLog() string {
	u := c.TracesEndpoint
	if u == "" {
		u = c.Endpoint
	}
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	pu.User = nil
	return pu.String()
}
