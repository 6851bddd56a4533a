//go:build faultapi

package main

import (
	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/faults"
)

// installFaultAPI serves the fault API (`--fault-api`) on the broker o
// configures. Only a build with the faultapi tag has it: the fault
// campaign's binary (campaign/main_test.go), never a release.
func installFaultAPI(o *broker.Options) error {
	new(faults.Set).InstallAPI(o)
	return nil
}
