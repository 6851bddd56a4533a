package main

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// The commands run in the test process (run, broker, produce, consume,
// bench ...) start brokers, hosts and readers on goroutines; every one of
// them ends when its command returns. The tests' own http.Get calls keep
// idle keep-alive connections to a broker that outlives them (Apache
// Pulsar), which are closed before the check: they are the test's, not a
// command's.
func TestMain(m *testing.M) {
	code := m.Run()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
