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

// Writev2 writes a, then b when all of a went, for a non-blocking
// socket's descriptor: two write(2)s where Linux has one writev(2).
func Writev2(fd uintptr, a, b []byte) (int, syscall.Errno) {
	n, e := Write(fd, a)
	if e != 0 || n < len(a) || len(b) == 0 {
		return n, e
	}
	k, e := Write(fd, b)
	if e != 0 {
		// What went of a went: report it, the error comes again next time.
		return n, 0
	}
	return n + k, 0
}

// BuffersWriter writes gathered buffers by raw writev(2) on Linux.
type BuffersWriter struct{}

// NewBuffersWriter returns nil: write to the conn itself.
func NewBuffersWriter(net.Conn) *BuffersWriter { return nil }

// WriteBuffers is never called: NewBuffersWriter returns nil.
func (*BuffersWriter) WriteBuffers([][]byte) error { return nil }
