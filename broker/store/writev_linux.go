package store

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// writeRecordAt writes a record's header and data at off in one pwritev,
// so the data goes from the caller's buffer straight to the page cache
// without being copied next to its header first.
func writeRecordAt(f *os.File, hdr, data []byte, off int64) (int, error) {
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
			n, err := unix.Pwritev(int(fd), iov, off+int64(total))
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
