package store

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// writeRecordAt writes a record's header and data at off in one pwritev,
// so the data goes from the caller's buffer straight to the page cache
// without being copied next to its header first.
//
// The pwritev is a raw system call (the runtime is not told): a write
// into the page cache is work on this CPU, not a wait, and a system call
// the runtime sees wakes its monitor thread, which then polls every 20 µs
// (and hands the P over when the call lasts); per 100 KiB entry that cost
// the broker more CPU than its own code (docs/benchmarks/design.md, "System
// calls the Go runtime need not see"). A write the kernel throttles
// (dirty pages over the limit) holds the P meanwhile: the other Ps run on.
func writeRecordAt(f *os.File, hdr, data []byte, off int64) (int, error) {
	return writeRecord(f, hdr, data, off, rawPwritev)
}

// writeRecordAtSynced is writeRecordAt for a store that fsyncs (Options.Sync)
// on a file system where writes may wait for writeback (rawWritesSafe
// false): there writeback runs on the segment's last pages all the time,
// and a write into a page under writeback can wait for the disk (stable
// pages), so the runtime is told, as for any system call that may wait.
func writeRecordAtSynced(f *os.File, hdr, data []byte, off int64) (int, error) {
	return writeRecord(f, hdr, data, off, func(fd uintptr, iov [][]byte, off int64) (int, error) {
		return unix.Pwritev(int(fd), iov, off)
	})
}

func writeRecord(f *os.File, hdr, data []byte, off int64, pwritev func(fd uintptr, iov [][]byte, off int64) (int, error)) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	iov := [][]byte{hdr, data}
	total := 0
	var werr error
	// A regular file is not pollable: the function runs once.
	if err := rc.Write(func(fd uintptr) bool {
		for len(iov) > 0 {
			n, err := pwritev(fd, iov, off+int64(total))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				werr = err
				return true
			}
			if n == 0 {
				werr = fmt.Errorf("pwritev wrote nothing: %w", unix.EIO)
				return true
			}
			total += n
			iov = advance(iov, n)
		}
		return true
	}); err != nil {
		return total, err
	}
	if werr != nil {
		return total, &os.PathError{Op: "write", Path: f.Name(), Err: werr}
	}
	return total, nil
}

// rawPwritev is pwritev(2) of up to two buffers as a raw system call.
func rawPwritev(fd uintptr, iov [][]byte, off int64) (int, error) {
	var vec [2]unix.Iovec
	cnt := 0
	for _, b := range iov {
		if len(b) == 0 || cnt == len(vec) {
			continue
		}
		vec[cnt].Base = &b[0]
		vec[cnt].SetLen(len(b))
		cnt++
	}
	if cnt == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall6(unix.SYS_PWRITEV, fd, uintptr(unsafe.Pointer(&vec[0])), uintptr(cnt), uintptr(off), 0, 0)
	runtime.KeepAlive(iov)
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}

// advance drops the first n bytes of iov (a short write's rest).
func advance(iov [][]byte, n int) [][]byte {
	for len(iov) > 0 && n >= len(iov[0]) {
		n -= len(iov[0])
		iov = iov[1:]
	}
	if len(iov) > 0 {
		iov[0] = iov[0][n:]
	}
	return iov
}
