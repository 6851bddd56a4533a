package brokertest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/streamrun/streamrun/internal/testkit"
)

// The helpers that need no broker live in internal/testkit, where
// plugin/host's tests use them without starting one; they are here too,
// so that one package serves every test, the modules outside this one
// (interop, bench) included.

// Eventually waits until cond holds, looking every 5 ms, and fails the
// test saying what it waited for once within has passed. Tests wait on a
// condition this way instead of sleeping.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, within, what, cond)
}

// Context is a context for a test that ends after d, or with the test.
func Context(t testing.TB, d time.Duration) context.Context { return testkit.Context(t, d) }

// LogWriter is where a test's component (a broker, a client) logs: kept,
// and printed with the test's output only when the test fails. With
// STREAMRUN_TEST_LOG=1 it is the process's stderr, at once.
func LogWriter(t testing.TB, name string) io.Writer { return testkit.LogWriter(t, name) }

// SyncBuffer is a bytes.Buffer safe for concurrent use: a log or an
// output a test reads while something writes it.
type SyncBuffer = testkit.SyncBuffer

// Name is the test's name made safe for a topic or a subscription, with
// a random suffix, so that reruns against a long-lived Apache Pulsar never
// meet old state.
func Name(t testing.TB) string { return testkit.Name(t) }

// TopicName is a fresh persistent topic in public/default named Name(t).
func TopicName(t testing.TB) string { return testkit.TopicName(t) }

// BuildPlugins builds the module's example plugins (examples/plugins/...)
// into a new temporary directory and returns it; the caller removes it.
// It is for a TestMain, before any test runs, so it takes no testing.TB.
func BuildPlugins() (string, error) { return testkit.BuildPlugins() }
