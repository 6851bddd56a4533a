//go:build !linux

package host

import (
	"io"
	"net"
)

// channelIO returns what the carrier reads and writes conn through: conn
// itself where raw system calls are not wired up (rawchannel_linux.go).
func channelIO(conn net.Conn) io.ReadWriter { return conn }
