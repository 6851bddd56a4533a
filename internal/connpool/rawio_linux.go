package connpool

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// Reads and writes of a TCP connection as read(2) and writev(2) calls
// made without entering the scheduler's syscall state. The socket is
// non-blocking (Go's netpoller made it so), so the call returns at once,
// with data or EAGAIN, and the scheduler loses nothing by not knowing.
// What it saves: every syscall made through package syscall wakes the
// runtime's monitor thread (sysmon) when the process was idle, and then
// sysmon polls every 20 µs for a while. A client that waits for a
// broker between requests is idle between most reads, so that was two
// thirds of its context switches. Waiting for the socket is still the
// netpoller's (syscall.RawConn), deadlines included.

// rawIO: the connection's reads and its senders' writes use rawRead and
// tryWritev.
const rawIO = true

// maxIovecs is the most segments one writev takes (Linux's IOV_MAX).
const maxIovecs = 1024

// rawReader reads a TCP connection as net.Conn's Read does, waiting for
// data in the netpoller. One goroutine reads; the call's state lives in
// the reader, so that a read allocates nothing.
type rawReader struct {
	rc    syscall.RawConn
	p     []byte
	n     uintptr
	errno syscall.Errno
	fn    func(fd uintptr) bool // read, bound once
}

func newRawReader(rc syscall.RawConn) *rawReader {
	r := &rawReader{rc: rc}
	r.fn = r.read
	return r
}

func (r *rawReader) read(fd uintptr) bool {
	for {
		r.n, _, r.errno = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		if r.errno != syscall.EINTR {
			return r.errno != syscall.EAGAIN // EAGAIN: wait until readable
		}
	}
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p = p
	err := r.rc.Read(r.fn)
	n, errno := r.n, r.errno
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

// rawWriter makes the writes that must not block: one attempt each,
// never waiting for room in the socket's buffer. Its user serializes
// the calls (Conn.omu); its state lives here, so that a write allocates
// nothing.
type rawWriter struct {
	rc    syscall.RawConn
	iov   []syscall.Iovec
	n     uintptr
	errno syscall.Errno
	fn    func(fd uintptr) bool // writev, bound once
}

func newRawWriter(rc syscall.RawConn) *rawWriter {
	w := &rawWriter{rc: rc}
	w.fn = w.writev
	return w
}

func (w *rawWriter) writev(fd uintptr) bool {
	for {
		w.n, _, w.errno = syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.iov[0])), uintptr(len(w.iov)))
		if w.errno != syscall.EINTR {
			return true // one attempt: never wait for room
		}
	}
}

// tryWritev writes segs in one writev: the bytes written, and whether
// the write went through (all of it or part; false when it failed, or
// the socket had no room or is past its write deadline, which the
// writer then meets).
func (w *rawWriter) tryWritev(segs [][]byte) (int, bool) {
	v := w.iov[:0]
	for _, s := range segs {
		if len(s) > 0 {
			e := syscall.Iovec{Base: &s[0]}
			e.SetLen(len(s))
			v = append(v, e)
		}
	}
	if len(v) == 0 {
		return 0, true
	}
	w.iov = v
	err := w.rc.Write(w.fn)
	clear(v) // no pointers into the segments kept
	if err != nil || w.errno != 0 {
		return 0, false
	}
	return int(w.n), true
}
