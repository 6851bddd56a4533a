//go:build !unix

package host

import (
	"net"
	"os"
)

// newChannel makes no batch channel where there are no Unix socket pairs:
// the host offers contract version 1 only, and batches go on gRPC.
func newChannel() (net.Conn, *os.File, error) { return nil, nil, nil }
