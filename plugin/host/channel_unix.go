//go:build unix

package host

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// newChannel makes the batch channel of contract version 2: a connected
// pair of Unix stream sockets with no name in any file system, so nobody
// can connect to either end; the host keeps one end (conn) and the
// plugin process inherits the other (child) as a file descriptor, and
// is the only process that holds it (the host closes its copy once the
// child has started). Both ends are close-on-exec in the host, so no
// other child of the host inherits them.
func newChannel() (conn net.Conn, child *os.File, err error) {
	// Close-on-exec set under ForkLock, so no child started meanwhile
	// inherits them (not every Unix has SOCK_CLOEXEC).
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("batch channel: %w", err)
	}
	child = os.NewFile(uintptr(fds[1]), "streamrun-batch-channel-plugin")
	return &blockingConn{f: os.NewFile(uintptr(fds[0]), "streamrun-batch-channel"), fd: fds[0]}, child, nil
}

// blockingConn is the host's end, read and written with blocking system
// calls outside the Go runtime's poller: the instance's reader waits
// for an answer in read(2), and the answer wakes that thread directly,
// instead of the poller waking a thread that hands the reader to
// another. Deadlines are not supported; Close ends a read or write
// under way.
type blockingConn struct {
	f         *os.File
	fd        int
	closeOnce sync.Once
}

func (c *blockingConn) Read(b []byte) (int, error)  { return c.f.Read(b) }
func (c *blockingConn) Write(b []byte) (int, error) { return c.f.Write(b) }

// Close shuts the socket down first: a read or write blocked in the
// kernel returns at once (closing alone would leave it blocked, and the
// descriptor open until it returned).
func (c *blockingConn) Close() error {
	err := net.ErrClosed
	c.closeOnce.Do(func() {
		_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
		err = c.f.Close()
	})
	return err
}

func (c *blockingConn) LocalAddr() net.Addr  { return unixAddr(syscall.Getsockname(c.fd)) }
func (c *blockingConn) RemoteAddr() net.Addr { return unixAddr(syscall.Getpeername(c.fd)) }

var errNoDeadlines = errors.New("batch channel: no deadlines")

func (c *blockingConn) SetDeadline(time.Time) error      { return errNoDeadlines }
func (c *blockingConn) SetReadDeadline(time.Time) error  { return errNoDeadlines }
func (c *blockingConn) SetWriteDeadline(time.Time) error { return errNoDeadlines }

// unixAddr is a socket's address as net writes it ("@" for no name), nil
// when it is not a Unix one.
func unixAddr(sa syscall.Sockaddr, err error) net.Addr {
	u, ok := sa.(*syscall.SockaddrUnix)
	if err != nil || !ok {
		return nil
	}
	return &net.UnixAddr{Name: u.Name, Net: "unix"}
}
