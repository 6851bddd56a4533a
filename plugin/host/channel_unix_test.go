//go:build linux

package host

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Both ends of the batch channel hold several batches of 1000 messages
// unread (channelBuffer), so that a host with batches in flight does not
// wait on the poller for the plugin to read the last one. Linux reports
// twice what was set (its bookkeeping).
func TestTheBatchChannelBuffersSeveralLargeBatches(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
		if max, _ := strconv.Atoi(strings.TrimSpace(string(b))); max < channelBuffer {
			t.Skipf("net.core.wmem_max is %d, below the %d asked for", max, channelBuffer)
		}
	}
	conn, child, err := newChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer child.Close()
	sc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var host int
	var serr error
	if err := sc.Control(func(fd uintptr) {
		host, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	plugin, err := syscall.GetsockoptInt(int(child.Fd()), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	if err != nil {
		t.Fatal(err)
	}
	for end, n := range map[string]int{"host": host, "plugin": plugin} {
		if n < channelBuffer {
			t.Errorf("the %s's end buffers %d bytes, want at least %d", end, n, channelBuffer)
		}
	}
}
