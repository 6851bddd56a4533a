package host

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"unsafe"
)

// The batch channel's reads and writes are raw system calls: the socket
// is non-blocking, so neither waits in the kernel (EAGAIN waits on the
// poller, as net.Conn does, and closing the conn still ends a wait), and
// a system call the Go runtime sees costs its monitor thread's hand-overs
// and polling, as it did the broker (docs/benchmarks.md, "2026-12-01,
// evening").

// rawChannel reads and writes a socket by raw read(2)s and write(2)s.
type rawChannel struct {
	nc net.Conn
	rc syscall.RawConn
}

// channelIO returns what the carrier reads and writes conn through.
func channelIO(conn net.Conn) io.ReadWriter {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return &rawChannel{nc: conn, rc: rc}
}

func (r *rawChannel) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			k, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller
			}
			n, rerr = int(k), e
			return true
		}
	})
	runtime.KeepAlive(p)
	switch {
	case err != nil:
		return 0, err
	case rerr != 0:
		return 0, &net.OpError{Op: "read", Net: "unix", Err: rerr}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (r *rawChannel) Write(p []byte) (int, error) {
	var n int
	var werr syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			k, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(k)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // the socket's buffer is full: wait for the poller
			default:
				werr = e
				return true
			}
		}
		return true
	})
	runtime.KeepAlive(p)
	switch {
	case err != nil:
		return n, err
	case werr != 0:
		return n, &net.OpError{Op: "write", Net: "unix", Err: werr}
	}
	return n, nil
}
