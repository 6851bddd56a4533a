package rawsock

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"unsafe"
)

// Wrap returns nc read and written by raw system calls, or nc itself when
// it has no descriptor (a TLS conn, a pipe).
func Wrap(nc net.Conn) io.ReadWriter {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	return &conn{nc: nc, rc: rc}
}

type conn struct {
	nc net.Conn
	rc syscall.RawConn
}

func (c *conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.nc.LocalAddr().Network(), Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: err}
}

func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
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
		return 0, err // a *net.OpError already
	case rerr != 0:
		return 0, c.opError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *conn) Write(p []byte) (int, error) {
	var n int
	var werr syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			k, e := Write(fd, p[n:])
			switch e {
			case 0:
				n += k
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
	switch {
	case err != nil:
		return n, err
	case werr != 0:
		return n, c.opError("write", werr)
	}
	return n, nil
}

// Write is one write(2) as a raw system call, for a non-blocking socket's
// descriptor (inside syscall.RawConn.Write, which keeps it open).
func Write(fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	k, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	runtime.KeepAlive(b)
	if e != 0 {
		return 0, e
	}
	return int(k), 0
}

// Writev2 is writev(2) of a then b as one raw system call, for a
// non-blocking socket's descriptor: a frame's head and a body that lives
// elsewhere go out without being copied together first.
func Writev2(fd uintptr, a, b []byte) (int, syscall.Errno) {
	var vec [2]syscall.Iovec
	cnt := 0
	for _, p := range [2][]byte{a, b} {
		if len(p) == 0 {
			continue
		}
		vec[cnt].Base = &p[0]
		vec[cnt].SetLen(len(p))
		cnt++
	}
	if cnt == 0 {
		return 0, 0
	}
	k, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&vec[0])), uintptr(cnt))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	if e != 0 {
		return 0, e
	}
	return int(k), 0
}

// BuffersWriter writes gathered buffers to a socket by raw writev(2).
type BuffersWriter struct {
	c   *conn
	vec []syscall.Iovec
}

// NewBuffersWriter returns a writer of nc's socket, or nil when nc has no
// descriptor (a TLS conn, a pipe): then write to nc itself.
func NewBuffersWriter(nc net.Conn) *BuffersWriter {
	c, ok := Wrap(nc).(*conn)
	if !ok {
		return nil
	}
	return &BuffersWriter{c: c}
}

// maxIovecs is how many buffers one writev(2) takes (Linux's IOV_MAX).
const maxIovecs = 1024

// WriteBuffers writes all of bufs, in order, as few writev(2)s as the
// socket takes; a full socket buffer waits on the poller (the conn's
// write deadline applies).
func (w *BuffersWriter) WriteBuffers(bufs [][]byte) error {
	var werr syscall.Errno
	off := 0 // bytes of bufs[0] written
	err := w.c.rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			w.vec = w.vec[:0]
			for i, b := range bufs {
				if i == maxIovecs {
					break
				}
				if i == 0 {
					b = b[off:]
				}
				if len(b) == 0 {
					continue
				}
				v := syscall.Iovec{Base: &b[0]}
				v.SetLen(len(b))
				w.vec = append(w.vec, v)
			}
			if len(w.vec) == 0 {
				bufs = nil
				break
			}
			k, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&w.vec[0])), uintptr(len(w.vec)))
			switch e {
			case 0:
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // the socket's buffer is full: wait for the poller
			default:
				werr = e
				return true
			}
			n := int(k)
			for n > 0 && len(bufs) > 0 {
				left := len(bufs[0]) - off
				if n < left {
					off += n
					n = 0
					break
				}
				n -= left
				bufs, off = bufs[1:], 0
			}
			for len(bufs) > 0 && len(bufs[0]) == off {
				bufs, off = bufs[1:], 0
			}
		}
		return true
	})
	clear(w.vec)
	w.vec = w.vec[:0]
	switch {
	case err != nil:
		return err
	case werr != 0:
		return w.c.opError("write", werr)
	}
	return nil
}
