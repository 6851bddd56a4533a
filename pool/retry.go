package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// Errors of the client itself. Server errors keep their pulsarwire
// sentinels (errors.Is(err, pulsarwire.ErrServiceNotReady), ...).
var (
	// ErrClosed: the client was closed while, or before, the operation ran.
	ErrClosed = errors.New("pool: client closed")
	// ErrRetriesExhausted: OperationRetries.Attempts ran out. The error is
	// a *RetryError, which also matches the last error's sentinels.
	ErrRetriesExhausted = errors.New("pool: retries exhausted")
	// ErrMessageTooLarge: a message is larger than the broker's
	// max_message_size.
	ErrMessageTooLarge = errors.New("pool: message too large")
)

// RetryError is returned when an operation still failed with "not now"
// after OperationRetries.Attempts tries. errors.Is matches both
// ErrRetriesExhausted and whatever the last error matches (for example
// pulsarwire.ErrServiceNotReady); errors.As finds the last
// *pulsarwire.ServerError.
type RetryError struct {
	// Op names the operation, e.g. "lookup persistent://public/default/t".
	Op       string
	Attempts int
	// Err is the last try's error.
	Err error
}

func (e *RetryError) Error() string {
	tries := "attempts"
	if e.Attempts == 1 {
		tries = "attempt"
	}
	return fmt.Sprintf("%s: gave up after %d %s: %v", e.Op, e.Attempts, tries, e.Err)
}

// RetryEvent describes an operation that failed with a retryable error
// and will be tried again: what Options.OnRetry receives.
type RetryEvent struct {
	Op      string        // what is retried, e.g. "create producer for persistent://public/default/t"
	Attempt int           // the attempt that just failed, from 1
	Limit   int           // OperationRetries.Attempts: 0 for no limit
	Delay   time.Duration // the wait before the next attempt
	Err     error         // the attempt's error (the server's, when it answered)
}

// Unreachable reports whether the attempt failed because the broker could
// not be reached (a connection that could not be opened or was lost, no
// answer in time), rather than because it answered "not now": a broker
// that answers is up, one that cannot be reached may stay down.
func (e RetryEvent) Unreachable() bool {
	_, answered := pulsarwire.ServerCode(e.Err)
	return !answered
}

// Unwrap gives ErrRetriesExhausted and the last error.
func (e *RetryError) Unwrap() []error { return []error{ErrRetriesExhausted, e.Err} }

// ConnectError is a failure to dial a broker or to complete the CONNECT
// handshake. It is retryable unless its cause is final (a TLS certificate
// that is not trusted or names another host, refused authentication).
type ConnectError struct {
	Addr string // the address dialed, host:port
	Err  error
	// Advertised: Addr is not a host of the service URL but one a
	// lookup answered, a broker's advertised address. When such a dial
	// fails, the broker most likely advertises an address only it or
	// its own network reaches (its --advertised-host, Apache Pulsar's
	// advertisedAddress).
	Advertised bool
}

// Error says, of an Advertised address, what most likely is wrong: the
// broker names an address for the topic that this client cannot reach.
func (e *ConnectError) Error() string {
	if e.Advertised {
		return fmt.Sprintf("connect to %s: %v (the broker names %s for this topic, and this client cannot reach it: "+
			"the broker's advertised host, `streamrun broker --advertised-host` or Apache Pulsar's advertisedAddress, must be a host clients reach)", e.Addr, e.Err, e.Addr)
	}
	return fmt.Sprintf("connect to %s: %v", e.Addr, e.Err)
}
func (e *ConnectError) Unwrap() error { return e.Err }

// Retryable reports whether an operation that failed with err may
// succeed if tried again: the server said "not now"
// (pulsarwire.Retryable), a request timed out, a connection dropped or
// could not be opened. Final server errors, TLS verification failures,
// exhausted retries, cancellation and a closed client are not.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var re *RetryError
	if errors.As(err, &re) || errors.Is(err, ErrClosed) || errors.Is(err, ErrMessageTooLarge) ||
		errors.Is(err, context.Canceled) || errors.Is(err, pulsarwire.ErrHTTP) {
		return false
	}
	if _, ok := pulsarwire.ServerCode(err); ok {
		return pulsarwire.Retryable(err)
	}
	if pulsarwire.Retryable(err) {
		return true
	}
	if finalTLSError(err) {
		return false
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.DeadlineExceeded)
}

// Do runs op until it succeeds, fails with an error that is not
// Retryable, or the attempts run out (then a *RetryError). Each try gets
// a context bounded by Timeout; a try that times out counts as
// retryable. Between tries it waits Delay. Zero fields take their
// defaults. Cancelling ctx stops it with ctx's error.
func (r OperationRetries) Do(ctx context.Context, name string, op func(ctx context.Context) error) error {
	return r.withDefaults().do(ctx, name, op, nil, retryHooks{})
}

// retryHooks are Options.OnRetry and Options.OnRetryEnd.
type retryHooks struct {
	retry, end func(RetryEvent)
}

func (r OperationRetries) do(ctx context.Context, name string, op func(ctx context.Context) error, log *slog.Logger, hooks retryHooks) (err error) {
	var timer *time.Timer
	var last *RetryEvent // the last retry, once there was one
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if last != nil && hooks.end != nil {
			ev := *last
			ev.Err, ev.Delay = err, 0
			hooks.end(ev)
		}
	}()
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, r.Timeout)
		err := op(tctx)
		timedOut := tctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctxEnded(ctx, name, err)
		}
		if timedOut && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: no answer in %s: %w", pulsarwire.ErrTimeout, r.Timeout, err)
		}
		if !Retryable(err) {
			return fmt.Errorf("%s: %w", name, err)
		}
		if r.Attempts > 0 && attempt >= r.Attempts {
			return &RetryError{Op: name, Attempts: attempt, Err: err}
		}
		ev := RetryEvent{Op: name, Attempt: attempt, Limit: r.Attempts, Delay: r.Delay, Err: err}
		last = &ev
		if log != nil {
			// A broker that cannot be reached may stay so: that is worth a
			// warning; one that answers "not now" is up and busy.
			level := slog.LevelInfo
			if ev.Unreachable() {
				level = slog.LevelWarn
			}
			log.Log(ctx, level, "retrying", "op", name, "attempt", attempt, "delay", r.Delay, "err", err)
		}
		if hooks.retry != nil {
			hooks.retry(ev)
		}
		if timer == nil {
			timer = time.NewTimer(r.Delay)
		} else {
			timer.Reset(r.Delay)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return ctxEnded(ctx, name, err)
		}
	}
}

// ctxEnded is op name's error once ctx ended: ctx's cause when it has one of
// its own (the client closed), else ctx's error and the last try's.
func ctxEnded(ctx context.Context, name string, last error) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%s: %w", name, cause)
	}
	return fmt.Errorf("%s: %w (last error: %v)", name, ctx.Err(), last)
}
