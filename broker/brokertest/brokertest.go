// Package brokertest is the test kit: it starts embedded brokers for
// tests (Start), picks the broker a test runs against, embedded or Apache
// Pulsar (Target, Embedded), waits on conditions (Eventually, Context),
// keeps logs to show when a test fails (LogWriter), builds the example
// plugins (BuildPlugins) and reads a benchmark's CPU time (CPUTime).
package brokertest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/streamrun/streamrun/broker"
)

// Start starts a cluster for a test: in memory, on free loopback ports
// (the admin API too), logging through t.Log, closed when the test ends.
// opts adjust the options after those defaults.
func Start(t testing.TB, opts ...func(*broker.Options)) *broker.Cluster {
	t.Helper()
	o := broker.Options{
		Listen: "127.0.0.1:0",
		HTTP:   "127.0.0.1:0",
		Memory: true,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	for _, f := range opts {
		f(&o)
	}
	c, err := broker.Start(context.Background(), o)
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

// testWriter sends log lines to t.Log, so they show with the failing test.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
