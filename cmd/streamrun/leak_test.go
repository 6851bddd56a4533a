package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The commands run in the test process (run, broker, produce, consume,
// bench ...) start brokers, hosts and readers on goroutines; every one of
// them ends when its command returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
