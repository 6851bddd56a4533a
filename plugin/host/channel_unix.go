//go:build unix

package host

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// channelBuffer is the send buffer asked for on each end of the batch
// channel. A Unix stream socket holds what its sender wrote until the
// peer reads it, up to the sender's buffer (about 208 KiB by default):
// with several batches in flight, a batch of 1000 messages of 100 bytes
// (about 170 KB) would find the buffer full behind the last and wait on
// the poller for the plugin to read, a wake-up more each way. This holds
// several such batches (the kernel doubles what is asked for its own
// bookkeeping).
const channelBuffer = 1 << 20

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
	for _, fd := range fds {
		// Best effort: the system's limit (net.core.wmem_max) may hold it
		// lower, which costs speed, not correctness.
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, channelBuffer)
	}
	host := os.NewFile(uintptr(fds[0]), "streamrun-batch-channel")
	child = os.NewFile(uintptr(fds[1]), "streamrun-batch-channel-plugin")
	conn, err = net.FileConn(host) // a dup of it, which the runtime polls
	_ = host.Close()
	if err != nil {
		_ = child.Close()
		return nil, nil, fmt.Errorf("batch channel: %w", err)
	}
	return conn, child, nil
}
