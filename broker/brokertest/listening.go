package brokertest

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ListeningIPs returns the IP addresses process pid listens on (TCP), read
// from /proc: its socket inodes, looked up in /proc/net/tcp and tcp6.
func ListeningIPs(t testing.TB, pid int) []net.IP {
	t.Helper()
	var out []net.IP
	for _, a := range ListeningAddrs(t, pid) {
		out = append(out, a.IP)
	}
	return out
}

// ListeningAddrs returns the TCP addresses (IP and port) process pid
// listens on, as ListeningIPs reads them. It skips the test when /proc
// cannot be read for pid (another user's process, no /proc).
func ListeningAddrs(t testing.TB, pid int) []*net.TCPAddr {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("needs /proc: %v", err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var out []*net.TCPAddr
	for _, file := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retr uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" || !inodes[fs[9]] { // 0A: LISTEN
				continue
			}
			ipHex, portHex, _ := strings.Cut(fs[1], ":")
			port, err := strconv.ParseUint(portHex, 16, 16)
			if err != nil {
				t.Fatalf("/proc/net/%s port %q: %v", file, portHex, err)
			}
			out = append(out, &net.TCPAddr{IP: procIP(t, ipHex), Port: int(port)})
		}
		f.Close()
	}
	return out
}

// procIP reads /proc/net/tcp's address: 32-bit words in host order
// (little endian here).
func procIP(t testing.TB, h string) net.IP {
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatalf("/proc/net/tcp address %q: %v", h, err)
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}
