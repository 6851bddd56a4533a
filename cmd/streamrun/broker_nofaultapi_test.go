//go:build !faultapi

package main

import (
	"strings"
	"testing"
)

// A build without the faultapi tag (every release) has no fault API, and
// `--fault-api` says so before anything listens.
func TestBrokerFaultAPIIsNotInThisBuild(t *testing.T) {
	code, _, errs := runArgs("broker", "--memory", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--fault-api")
	if code != 2 || !strings.Contains(errs, "this build of streamrun has no fault API") || !strings.Contains(errs, "-tags faultapi") {
		t.Fatalf("broker --fault-api: exit %d, stderr %q", code, errs)
	}
}
