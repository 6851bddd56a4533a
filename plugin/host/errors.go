package host

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrCrashed is matched (errors.Is) by every error that says the plugin
	// process is gone: it panicked, exited, was killed, or its connection
	// broke. The instance has been killed and its Exited channel is closed;
	// the batch in flight got no answer and should be retried on a fresh
	// instance. The error is a *CrashError.
	ErrCrashed = errors.New("plugin crashed")

	// ErrBadResponse is matched by an error saying that the plugin answered
	// a batch wrongly (a result missing, doubled, out of range, with an
	// unknown outcome, or an output without a topic). The batch got no
	// usable answer; the instance still runs but cannot be trusted: Kill it.
	// The error is a *ResponseError.
	ErrBadResponse = errors.New("plugin answered wrongly")

	// ErrInit is matched by an error from Init saying that the handler
	// refused its config or failed to set up. Starting it again with the
	// same config would fail the same way.
	ErrInit = errors.New("plugin init failed")

	// ErrClosed is returned by calls on an instance after Close or Kill.
	ErrClosed = errors.New("plugin instance closed")
)

// CrashError is the error of a call that failed because the plugin process
// crashed. It matches ErrCrashed.
type CrashError struct {
	// Plugin names the instance ("name" or "name/instance").
	Plugin string
	// Pid is the plugin process's id.
	Pid int
	// Panic is the handler's panic value when it panicked, "" otherwise.
	Panic string
	// Stack is the panicking goroutine's stack, "" when it did not panic.
	Stack string
	// Index is the position in the batch of the message that was being
	// handled when the handler panicked, -1 when unknown.
	Index int
	// MessageID is that message's id, "" when unknown.
	MessageID string
	// Exit is how the process ended ("signal: killed", "exit status 2"),
	// "" when that is not known.
	Exit string
	// Err is the transport error the call got, nil when the plugin told of
	// its panic itself.
	Err error
}

func (e *CrashError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %s (pid %d) crashed", e.Plugin, e.Pid)
	if e.Panic != "" {
		b.WriteString(": handler panicked")
		if e.Index >= 0 {
			fmt.Fprintf(&b, " on message %d (%s)", e.Index, e.MessageID)
		}
		fmt.Fprintf(&b, ": %s", e.Panic)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Exit != "" {
		fmt.Fprintf(&b, " [%s]", e.Exit)
	}
	return b.String()
}

func (e *CrashError) Is(target error) bool { return target == ErrCrashed }

// cause is the crash's cause in a few words, for the host's log.
func (e *CrashError) cause() string {
	if e.Panic != "" {
		return "panic: " + e.Panic
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return ""
}

func (e *CrashError) Unwrap() error { return e.Err }

// ResponseError is the error of a batch the plugin answered wrongly. It
// matches ErrBadResponse.
type ResponseError struct {
	// Plugin names the instance.
	Plugin string
	// Index is the position in the batch of the message the fault is about,
	// -1 when it is about the batch as a whole.
	Index int
	// MessageID is that message's id, "" for the batch as a whole.
	MessageID string
	// Problem says what is wrong.
	Problem string
}

func (e *ResponseError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("plugin %s answered wrongly: %s", e.Plugin, e.Problem)
	}
	return fmt.Sprintf("plugin %s answered wrongly for message %d (%s): %s", e.Plugin, e.Index, e.MessageID, e.Problem)
}

func (e *ResponseError) Is(target error) bool { return target == ErrBadResponse }
