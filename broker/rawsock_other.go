//go:build !linux

package broker

import (
	"io"
	"net"
	"syscall"
)

// socketReader returns the reader the read loop uses for nc.
func socketReader(nc net.Conn) io.Reader { return nc }

// rawWrite is write(2), for a non-blocking socket.
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	if err != nil {
		if e, ok := err.(syscall.Errno); ok {
			return 0, e
		}
		return 0, syscall.EIO
	}
	return n, 0
}
