package store

import (
	"io"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// readAt is f.ReadAt, but what the page cache holds is read by a raw
// preadv2(RWF_NOWAIT), which the kernel refuses (EAGAIN) rather than wait
// for the disk: a copy from the page cache is work on this CPU, not a
// wait, and the runtime's handling of a system call it sees (the monitor
// thread handing the P over past 20 µs) cost more than the copy under a
// consumer draining a backlog (docs/benchmarks/design.md, "System calls the Go
// runtime need not see"). The rest, and everything on kernels without
// RWF_NOWAIT, goes through f.ReadAt, which lets the runtime run other
// goroutines while the disk is read.
func readAt(f *os.File, buf []byte, off int64) (int, error) {
	n := 0
	if rc, err := f.SyscallConn(); err == nil {
		rc.Read(func(fd uintptr) bool {
			for n < len(buf) {
				k, err := rawPreadNowait(fd, buf[n:], off+int64(n))
				if err == unix.EINTR {
					continue
				}
				if err != nil || k <= 0 {
					break
				}
				n += k
			}
			return true // a regular file is not pollable: run once
		})
	}
	if n == len(buf) {
		return n, nil
	}
	m, err := f.ReadAt(buf[n:], off+int64(n))
	if err == io.EOF && n+m == len(buf) {
		err = nil
	}
	return n + m, err
}

func rawPreadNowait(fd uintptr, b []byte, off int64) (int, error) {
	vec := unix.Iovec{Base: &b[0]}
	vec.SetLen(len(b))
	r, _, e := unix.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&vec)), 1, uintptr(off), 0, unix.RWF_NOWAIT)
	runtime.KeepAlive(b)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
