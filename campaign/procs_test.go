package campaign_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process of the campaign (a broker or a host) that may be
// killed and started again with the same arguments.
type proc struct {
	name string
	args []string
	log  string // its stderr (and stdout) are appended here

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	killed  bool // by the campaign, on purpose
	unasked []string
}

// start runs the process; ready, when set, is a line prefix of its stdout
// that says it is up, waited for within 60 s.
func (p *proc) start(ready string) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "---- %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.args, " "))
	cmd := exec.Command(streamrunBin, p.args...)
	cmd.Stderr = f
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	up := make(chan struct{})
	go func() {
		// Copies stdout to the log, watching for the ready line; ends
		// with the process.
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for sc.Scan() {
			fmt.Fprintln(f, sc.Text())
			if !seen && ready != "" && strings.HasPrefix(sc.Text(), ready) {
				seen = true
				close(up)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		err := cmd.Wait()
		fmt.Fprintf(f, "---- %s exit: %v\n", time.Now().UTC().Format(time.RFC3339Nano), err)
		f.Close()
		p.mu.Lock()
		if !p.killed {
			p.unasked = append(p.unasked, fmt.Sprintf("%s exited by itself at %s: %v", p.name, time.Now().UTC().Format(time.TimeOnly), err))
		}
		p.mu.Unlock()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited, p.killed = cmd, exited, false
	p.mu.Unlock()
	if ready == "" {
		return nil
	}
	select {
	case <-up:
		return nil
	case <-exited:
		return fmt.Errorf("%s exited before it was ready (log: %s)", p.name, p.log)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s not ready within 60s (log: %s)", p.name, p.log)
	}
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// running is called with p.mu held.
func (p *proc) running() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig (SIGKILL: kill -9) and, for SIGKILL and SIGTERM,
// waits for the process to end.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	if !p.running() {
		p.mu.Unlock()
		return fmt.Errorf("%s is not running", p.name)
	}
	p.killed = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not end within 90s of %v", p.name, sig)
	}
}

// stop ends the process (SIGTERM, then SIGKILL) if it runs.
func (p *proc) stop() {
	p.mu.Lock()
	up := p.running()
	p.mu.Unlock()
	if up {
		_ = p.signal(syscall.SIGTERM)
	}
}

// exitsByItself lists the times it ended without the campaign asking.
func (p *proc) exitsByItself() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.unasked...)
}

// freePorts finds n consecutive free loopback ports (the brokers of a
// process listen on port, port+1, ...), and one more apart for HTTP.
func freePorts(n int) (base, http int, err error) {
	for try := 0; try < 50; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		base = ln.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{ln}
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, l)
		}
		h, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			http = h.Addr().(*net.TCPAddr).Port
			lns = append(lns, h)
		}
		for _, l := range lns {
			l.Close()
		}
		if ok && err == nil {
			return base, http, nil
		}
	}
	return 0, 0, fmt.Errorf("no %d consecutive free ports found", n)
}

// rssBytes reads a process's resident set size from /proc (0 when gone).
func rssBytes(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// children lists the pids whose parent is pid (a host's plugin processes).
func children(pid int) []int {
	if pid <= 0 {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// pidOf finds a process whose command line contains s (0: none).
func pidOf(s string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			return pid
		}
	}
	return 0
}

// ownerOfPort finds which of pids holds the TCP socket whose local port is
// port (from /proc/net/tcp and the processes' descriptors); 0: none.
func ownerOfPort(port int, pids []int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0
	}
	inode := ""
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 10 {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
				return pid
			}
		}
	}
	return 0
}
