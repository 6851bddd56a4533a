package testkit

import (
	"context"
	"testing"
	"time"
)

// Eventually waits until cond holds, looking every 5 ms, and fails the
// test saying what it waited for once within has passed. Tests wait on a
// condition this way instead of sleeping.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Context is a context for a test that ends after d, or with the test.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
