// Package brokertest is the test kit: it starts embedded brokers for
// tests (Start), picks the broker a test runs against, embedded or Apache
// Pulsar (Target, Embedded, TargetB), talks to its admin API (AdminDo,
// CreatePartitioned), waits on conditions (Eventually, Context), keeps
// logs to show when a test fails (LogWriter), names topics (TopicName),
// builds the example plugins (BuildPlugins) and reads a benchmark's CPU
// time (CPUTime). Every cluster it starts carries a fault set (Faults).
// The helpers that need no broker are internal/testkit's, for tests
// inside this module that want no broker (plugin/host); this
// package is the entry point for the rest, and the only one for the
// modules outside (interop, bench).
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/faults"
)

// Start starts a cluster for a test: in memory, on free loopback ports
// (the admin API too), with an empty fault set (Faults), logging through
// t.Log, closed when the test ends. opts adjust the options after those
// defaults.
func Start(t testing.TB, opts ...func(*broker.Options)) *broker.Cluster {
	t.Helper()
	c, err := StartMain(context.Background(), testWriter{t}, slog.LevelInfo, opts...)
	if err != nil {
		t.Fatalf("brokertest: start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("brokertest: close: %v", err)
		}
	})
	return c
}

// StartMain starts a cluster that outlives single tests: for a TestMain,
// or a benchmark's broker started once per run. Like Start it is in
// memory, on free loopback ports (the admin API too), with an empty fault
// set (Faults), and opts adjust the
// options after those defaults; it logs to log from level up, and the
// caller closes it.
func StartMain(ctx context.Context, log io.Writer, level slog.Level, opts ...func(*broker.Options)) (*broker.Cluster, error) {
	o := broker.Options{
		Listen: "127.0.0.1:0",
		HTTP:   "127.0.0.1:0",
		Memory: true,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: level})),
	}
	new(faults.Set).Install(&o)
	for _, f := range opts {
		f(&o)
	}
	return broker.Start(ctx, o)
}

// Faults returns the fault set of a cluster started by Start or
// StartMain (or given its own by an option), and fails the test when the
// cluster has none: "fail the next 3 lookups of this topic".
func Faults(t testing.TB, c *broker.Cluster) *faults.Set {
	t.Helper()
	s, ok := c.Interceptor().(*faults.Set)
	if !ok {
		t.Fatalf("brokertest: the cluster has no fault set (its interceptor is %T)", c.Interceptor())
	}
	return s
}

// testWriter sends log lines to t.Log, so they show with the failing test.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
