//go:build !linux

package rawsock

import (
	"io"
	"net"
	"syscall"
)

// Wrap returns nc: raw system calls are wired up on Linux only.
func Wrap(nc net.Conn) io.ReadWriter { return nc }

// Write is write(2), for a non-blocking socket's descriptor.
func Write(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	if err != nil {
		if e, ok := err.(syscall.Errno); ok {
			return 0, e
		}
		return 0, syscall.EIO
	}
	return n, 0
}
