//go:build !faultapi

package main

import "github.com/streamrun/streamrun/broker"

// installFaultAPI refuses `--fault-api`: fault injection is test
// machinery, left out of this build; the fault campaign builds its own
// binary with it (go build -tags faultapi).
func installFaultAPI(*broker.Options) error {
	return usagef("--fault-api: this build of streamrun has no fault API (it is for fault campaigns; build with: go build -tags faultapi ./cmd/streamrun)")
}
