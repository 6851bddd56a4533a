package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fdatasync through io_uring. A goroutine in a blocking system call the
// runtime knows of costs more than the call's own work when the call is
// an fsync round of a few hundred microseconds repeated thousands of times
// a second: entering it wakes the runtime's monitor thread from its sleep
// (every round, as the broker idles between rounds), which then polls
// every 20 µs for at least a millisecond, and the P is handed over and
// back. At --sync that was 15-25 % of the broker's CPU
// (docs/benchmarks/design.md, "Broker CPU at the sync level"). Through a ring,
// the fdatasync runs on one of the kernel's io_uring worker threads (of
// this process: its CPU is counted here), and the goroutine waits on an
// eventfd the ring signals, parked on the netpoller like any socket read.
// What reaches the disk, and when SyncTo returns, is the same.

// Kernel ABI (include/uapi/linux/io_uring.h).
const (
	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000

	uringOpFsync       = 3
	uringFsyncDatasync = 1
	uringSQEAsync      = 1 << 4 // IOSQE_ASYNC: straight to a worker
	uringRegEventfd    = 4

	uringSQESize = 64
	uringCQESize = 16
)

type uringSQOff struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOff struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOff
	cqOff                                                                  uringCQOff
}

// syncRing is an io_uring with one fdatasync in flight at a time.
type syncRing struct {
	fd       int
	sqRing   []byte
	cqRing   []byte
	sqes     []byte
	p        uringParams
	ev       *os.File // eventfd the ring signals completions on, polled
	evConn   syscall.RawConn
	evBuf    [8]byte
	userData uint64
}

func (r *syncRing) u32(ring []byte, off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&ring[off]))
}

// newSyncRing sets up a ring of 2 entries with an eventfd; an error means
// io_uring is not available here (old kernel, seccomp, sysctl).
func newSyncRing() (*syncRing, error) {
	r := &syncRing{fd: -1}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 2, uintptr(unsafe.Pointer(&r.p)), 0)
	if e != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r.fd = int(fd)
	err := r.init()
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *syncRing) init() error {
	var err error
	sqSize := int(r.p.sqOff.array + r.p.sqEntries*4)
	if r.sqRing, err = unix.Mmap(r.fd, uringOffSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring mmap: %w", err)
	}
	cqSize := int(r.p.cqOff.cqes + r.p.cqEntries*uringCQESize)
	if r.cqRing, err = unix.Mmap(r.fd, uringOffCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring mmap: %w", err)
	}
	if r.sqes, err = unix.Mmap(r.fd, uringOffSQEs, int(r.p.sqEntries*uringSQESize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("io_uring mmap: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	// Non-blocking, so os.NewFile puts it on the netpoller.
	r.ev = os.NewFile(uintptr(efd), "io_uring-eventfd")
	if r.evConn, err = r.ev.SyscallConn(); err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	e32 := int32(efd)
	if _, _, e := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegEventfd, uintptr(unsafe.Pointer(&e32)), 1, 0, 0); e != 0 {
		return fmt.Errorf("io_uring_register eventfd: %w", e)
	}
	return nil
}

func (r *syncRing) close() {
	if r.ev != nil {
		r.ev.Close()
	}
	for _, m := range [][]byte{r.sqRing, r.cqRing, r.sqes} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	if r.fd >= 0 {
		unix.Close(r.fd)
	}
}

// fdatasync runs fdatasync(2) on fd through the ring and waits for it.
// The returned error is the call's own (an Errno), or the ring's: then
// the caller does not know whether it ran, and syncs again another way.
func (r *syncRing) fdatasync(fd uintptr) (callErr, ringErr error) {
	tail := atomic.LoadUint32(r.u32(r.sqRing, r.p.sqOff.tail))
	mask := *r.u32(r.sqRing, r.p.sqOff.ringMask)
	idx := tail & mask
	sqe := r.sqes[idx*uringSQESize : (idx+1)*uringSQESize]
	clear(sqe)
	sqe[0] = uringOpFsync
	sqe[1] = uringSQEAsync
	binary.NativeEndian.PutUint32(sqe[4:], uint32(fd))
	binary.NativeEndian.PutUint32(sqe[28:], uringFsyncDatasync)
	r.userData++
	binary.NativeEndian.PutUint64(sqe[32:], r.userData)
	*(*uint32)(unsafe.Pointer(&r.sqRing[r.p.sqOff.array+idx*4])) = idx
	atomic.StoreUint32(r.u32(r.sqRing, r.p.sqOff.tail), tail+1)
	// Submitting only queues the work (IOSQE_ASYNC): a raw call, as it
	// does not wait.
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return nil, fmt.Errorf("io_uring_enter: %w", e)
		}
		if n != 1 {
			return nil, fmt.Errorf("io_uring_enter submitted %d of 1", n)
		}
		break
	}
	for {
		head := atomic.LoadUint32(r.u32(r.cqRing, r.p.cqOff.head))
		if head != atomic.LoadUint32(r.u32(r.cqRing, r.p.cqOff.tail)) {
			cmask := *r.u32(r.cqRing, r.p.cqOff.ringMask)
			cqe := r.cqRing[r.p.cqOff.cqes+(head&cmask)*uringCQESize:]
			ud := binary.NativeEndian.Uint64(cqe[0:])
			res := int32(binary.NativeEndian.Uint32(cqe[8:]))
			atomic.StoreUint32(r.u32(r.cqRing, r.p.cqOff.head), head+1)
			if ud != r.userData {
				return nil, fmt.Errorf("io_uring completion for request %d, want %d", ud, r.userData)
			}
			if res < 0 {
				return unix.Errno(-res), nil
			}
			return nil, nil
		}
		if err := r.wait(); err != nil {
			return nil, fmt.Errorf("io_uring eventfd: %w", err)
		}
	}
}

// wait parks on the netpoller until the ring signals a completion. The
// eventfd is read by a raw call: one the runtime sees would wake its
// monitor thread as a blocking call does, each round.
func (r *syncRing) wait() error {
	var rerr error
	err := r.evConn.Read(func(fd uintptr) bool {
		for {
			_, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.evBuf[0])), uintptr(len(r.evBuf)))
			switch e {
			case 0:
				return true
			case unix.EAGAIN:
				return false // not yet: wait for the poller
			case unix.EINTR:
				continue
			}
			rerr = e
			return true
		}
	})
	if err != nil {
		return err
	}
	return rerr
}

// syncRings hands out rings, at most maxSyncRings, made as needed; a
// caller finding none free (or io_uring unavailable: old kernels,
// kernel.io_uring_disabled, seccomp filters such as Docker's default)
// syncs directly.
type syncRings struct {
	free chan *syncRing
	made atomic.Int32
	off  atomic.Bool // io_uring failed here: do not try again
}

// maxSyncRings bounds the fdatasyncs in flight through rings at once
// (each is one topic's group commit); more go to the system call.
const maxSyncRings = 8

func newSyncRings() *syncRings { return &syncRings{free: make(chan *syncRing, maxSyncRings)} }

func (rs *syncRings) get() *syncRing {
	if rs == nil {
		return nil
	}
	select {
	case r := <-rs.free:
		return r
	default:
	}
	if rs.off.Load() || rs.made.Load() >= maxSyncRings {
		return nil
	}
	if rs.made.Add(1) > maxSyncRings {
		rs.made.Add(-1)
		return nil
	}
	r, err := newSyncRing()
	if err != nil {
		rs.off.Store(true)
		return nil
	}
	return r
}

func (rs *syncRings) put(r *syncRing) { rs.free <- r }

// closeAll closes the rings not in use; called once nothing syncs any more.
func (rs *syncRings) closeAll() {
	if rs == nil {
		return
	}
	for {
		select {
		case r := <-rs.free:
			r.close()
		default:
			return
		}
	}
}

// syncData is fdatasync(2) of f: its data, and of its metadata what reading
// the data back needs (its size, its blocks), on stable storage; not its
// times, which nothing here reads. Through a ring from rs when one is
// free, else the system call.
func syncData(rs *syncRings, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if cerr := rc.Control(func(fd uintptr) { serr = syncFD(rs, fd) }); cerr != nil {
		return cerr
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

func syncFD(rs *syncRings, fd uintptr) error {
	if r := rs.get(); r != nil {
		callErr, ringErr := r.fdatasync(fd)
		if ringErr == nil {
			rs.put(r)
			return callErr
		}
		// A ring in an unknown state is not reused; the call is made
		// again directly (a second fdatasync is harmless).
		r.close()
		rs.off.Store(true)
	}
	for {
		err := unix.Fdatasync(int(fd))
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
