package broker

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"unsafe"
)

// The socket's reads and flushHeld's writes are raw system calls: the
// socket is non-blocking, so neither waits (EAGAIN sends a read to the
// poller, as net.Conn does), and a system call the runtime sees costs the
// broker its monitor thread's hand-overs of the P and 20 µs polling
// whenever calls take long, which loopback reads and writes of 100 KiB
// entries do (docs/benchmarks.md, "2026-12-01, evening").

// rawReader reads a TCP connection by raw read(2)s; deadlines still hold
// (syscall.RawConn.Read waits on the poller with them).
type rawReader struct {
	nc net.Conn
	rc syscall.RawConn
}

// socketReader returns the reader the read loop uses for nc.
func socketReader(nc net.Conn) io.Reader {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	return &rawReader{nc: nc, rc: rc}
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			k, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				return false // wait for the poller
			}
			n, rerr = int(k), e
			return true
		}
	})
	runtime.KeepAlive(p)
	switch {
	case err != nil:
		return 0, err // a *net.OpError already
	case rerr != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: rerr}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// rawWrite is write(2) as a raw system call, for a non-blocking socket.
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	k, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	runtime.KeepAlive(b)
	if e != 0 {
		return 0, e
	}
	return int(k), 0
}
