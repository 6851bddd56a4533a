package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// zeroRange writes n zero bytes at off (both multiples of pageSize) to the
// file at path through a descriptor of its own opened with O_DIRECT: the
// zeros go from one buffer to the disk without a page of the page cache.
// errNoPrealloc when the file system refuses O_DIRECT.
func zeroRange(path string, off, n int64) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EINVAL) {
		return errNoPrealloc
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	const bufSize = 1 << 20
	// Anonymous memory is page-aligned, as O_DIRECT needs, and reads as
	// zeros without being written.
	buf, err := unix.Mmap(-1, 0, bufSize, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	for n > 0 {
		k, err := unix.Pwrite(fd, buf[:min(n, bufSize)], off)
		if err == unix.EINTR {
			continue
		}
		if errors.Is(err, unix.EINVAL) {
			return errNoPrealloc
		}
		if err != nil {
			return noSpace(&os.PathError{Op: "write", Path: path, Err: err})
		}
		if k <= 0 || k%pageSize != 0 {
			return &os.PathError{Op: "write", Path: path, Err: unix.EIO}
		}
		off += int64(k)
		n -= int64(k)
	}
	return nil
}

// syncData is fdatasync(2): the file's data, and of its metadata what
// reading the data back needs (its size, its blocks), on stable storage;
// not the times. An append to a preallocated segment changes nothing
// else, so that is a whole fsync for it; an append past the end changes
// the size, which fdatasync writes too.
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
