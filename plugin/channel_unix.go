//go:build unix

package plugin

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// blockingConn is the batch channel read and written with blocking
// system calls, outside the Go runtime's poller: a plugin waiting for
// its next batch sleeps in read(2), and the batch wakes that thread
// directly, instead of the poller waking one thread that hands the
// reader to another. A plugin has this one socket to wait on, and its
// reader is busy or waiting on it, so the thread it holds is not a cost.
type blockingConn struct {
	f         *os.File
	fd        int
	closeOnce sync.Once
}

// channelFromFD takes the descriptor the host gave, blocking as the host
// made it. It is made close-on-exec, so a process the handler starts
// does not hold the channel open after this one is gone.
func channelFromFD(fd int) (*blockingConn, error) {
	if err := syscall.SetNonblock(fd, false); err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "streamrun-batch-channel")
	if f == nil {
		return nil, errors.New("not a valid descriptor")
	}
	return &blockingConn{f: f, fd: fd}, nil
}

func (c *blockingConn) Read(b []byte) (int, error)  { return c.f.Read(b) }
func (c *blockingConn) Write(b []byte) (int, error) { return c.f.Write(b) }

// Close shuts the socket down first: a read or write blocked in the
// kernel returns at once (closing alone would leave it blocked, and the
// descriptor open until it returned).
func (c *blockingConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
		err = c.f.Close()
	})
	return err
}
