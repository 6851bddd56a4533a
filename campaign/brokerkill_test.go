package campaign_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pulsarKillEnv names the Apache Pulsar standalone (scripts/pulsar --name)
// that TestCampaignPulsarBrokerKill starts, kills -9 and starts again; the
// test runs only when it is set, and refuses a name already running.
const pulsarKillEnv = "STREAMRUN_CAMPAIGN_PULSAR_KILL"

// standalone is an Apache Pulsar standalone run by scripts/pulsar under a
// name of its own.
type standalone struct {
	script, name string
	ports        []int // broker, bookie, admin
}

// do runs `scripts/pulsar CMD --name NAME ARGS...` and returns its stdout.
func (s *standalone) do(ctx context.Context, cmd string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, s.script, append([]string{cmd, "--name", s.name}, args...)...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		tail := stderr.String()
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return string(out), fmt.Errorf("scripts/pulsar %s --name %s: %w: %s", cmd, s.name, err, tail)
	}
	return string(out), nil
}

func (s *standalone) pid(ctx context.Context) (int, error) {
	out, err := s.do(ctx, "pid")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// exports reads scripts/pulsar's `export K=V` lines.
func exports(out string) map[string]string {
	m := map[string]string{}
	for l := range strings.Lines(out) {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(l), "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
	}
	return m
}

// pulsarKill is kill -9 of the Apache Pulsar standalone's JVM, started
// again on its data (killPulsar). Not in faultKinds: it needs a standalone
// that nothing else uses.
var pulsarKill = faultKind{name: "pulsar-kill-9", ackWindow: true, fatal: true, inject: killPulsar}

// TestCampaignPulsarBrokerKill is the broker kill of the fault campaign on
// Apache Pulsar: eo-counter (exactly_once, keyed state, Exclusive) on two
// hosts against a standalone of its own with transactions on, which it
// kills with kill -9 while inputs are processed and starts again on its
// data (scripts/pulsar restart), twice, with a plugin kill and a host kill
// -9 (the holder of the subscription: the other host takes over) between.
// It fails on a lost or duplicated output or a key whose count is not its
// number of inputs (docs/reliability.md, "Broker kill on Apache Pulsar").
func TestCampaignPulsarBrokerKill(t *testing.T) {
	name := os.Getenv(pulsarKillEnv)
	if name == "" {
		t.Skipf("the broker kill on Apache Pulsar runs only with %s naming a standalone for it to start and kill (scripts/pulsar --name), such as %s=campaign-kill", pulsarKillEnv, pulsarKillEnv)
	}
	script, err := filepath.Abs(filepath.Join("..", "scripts", "pulsar"))
	if err != nil {
		t.Fatal(err)
	}
	s := &standalone{script: script, name: name}
	ctx := context.Background()
	if out, err := s.do(ctx, "status"); err == nil || !strings.HasPrefix(out, "not running") {
		t.Fatalf("%s=%s: a standalone of that name runs already (%s); this test kills the one it names, so name one of its own", pulsarKillEnv, name, strings.TrimSpace(out))
	}
	base, err := portsBelowEphemeral(3)
	if err != nil {
		t.Fatal(err)
	}
	s.ports = []int{base, base + 1, base + 2}
	out, err := s.do(ctx, "start", "--port", strconv.Itoa(base), "--bookie-port", strconv.Itoa(base+1),
		"--http", strconv.Itoa(base+2), "--set", "transactionCoordinatorEnabled=true")
	t.Cleanup(func() {
		if _, err := s.do(context.Background(), "stop"); err != nil {
			t.Errorf("stop the standalone: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ex := exports(out)
	p := plan{rate: 100, gap: 3 * time.Second, slowFor: 6 * time.Second, answerFor: 2 * time.Second, burst: 5000}
	e := newEnv(t, p)
	e.serviceURL, e.adminURL, e.txn = ex["STREAMRUN_PULSAR_URL"], ex["STREAMRUN_PULSAR_HTTP"], true
	if e.serviceURL == "" || e.adminURL == "" {
		t.Fatalf("scripts/pulsar start printed no URLs: %q", out)
	}
	pid, err := s.pid(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.pulsarPid.Store(int64(pid))
	e.standalone = s
	e.counterOnly = true
	// A standalone restarted on its data has its bookie's registration
	// flapping (docs/reliability.md, "Broker kill on Apache Pulsar"):
	// writes get through only now and then, for a minute or two at times.
	e.recoverWithin = 5 * time.Minute
	// The broker killed at two points: early, with the first host holding
	// the subscription; and last, after the other host took over from a
	// killed holder and the killed one came back to wait.
	plugin, host := kindNamed(t, "plugin-sigkill"), kindNamed(t, "host-kill-9")
	e.kinds = []faultKind{pulsarKill, plugin, host}
	e.sequence = []faultKind{pulsarKill, plugin, host, pulsarKill}
	e.run(t, "pulsar-kill")
}

func kindNamed(t *testing.T, name string) faultKind {
	for _, k := range faultKinds {
		if k.name == name {
			return k
		}
	}
	t.Fatalf("no fault kind %q", name)
	return faultKind{}
}

// killPulsar is kill -9 of the standalone's JVM and its start again on
// the same data and ports (scripts/pulsar restart); the fault is over
// once it is ready. The detail gives the transactions its coordinator had
// open when it died, as far as it said.
func killPulsar(ctx context.Context, e *env) (string, error) {
	pid := int(e.pulsarPid.Load())
	if pid <= 0 {
		return "", fmt.Errorf("no standalone JVM to kill")
	}
	open := e.openTxns()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("kill -9 the standalone's JVM %d: %w", pid, err)
	}
	// Its command line goes before its sockets close (the JVM's threads
	// end one by one): it is gone when its ports are free.
	for deadline := time.Now().Add(30 * time.Second); isStandalone(pid) || e.standalone.listening(); {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the standalone's JVM %d or its ports still there 30s after kill -9", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t0 := time.Now()
	if _, err := e.standalone.do(ctx, "restart"); err != nil {
		return "", err
	}
	took := time.Since(t0)
	np, err := e.standalone.pid(ctx)
	if err != nil {
		return "", err
	}
	e.pulsarPid.Store(int64(np))
	return fmt.Sprintf("JVM %d, %s; restarted on its data in %s", pid, open, took.Round(100*time.Millisecond)), nil
}

// portsBelowEphemeral finds n consecutive free ports below the kernel's
// range of ephemeral ports. Not in it: while the standalone is down, the
// clients dialling its port again and again from ephemeral ports may get
// that very port as their own and connect to themselves (a TCP
// self-connect), which holds the port and keeps the standalone from
// starting again on it.
func portsBelowEphemeral(n int) (int, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				low = v
			}
		}
	}
	const from = 10000
	if low-n <= from {
		return 0, fmt.Errorf("the ephemeral ports start at %d: no room below for the standalone's", low)
	}
	for range 100 {
		base := from + rand.IntN(low-n-from)
		var lns []net.Listener
		for i := range n {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		ok := len(lns) == n
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports found below %d", n, low)
}

// listening: one of the standalone's ports takes connections.
func (s *standalone) listening() bool {
	for _, p := range s.ports {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			c.Close()
			return true
		}
	}
	return false
}

// isStandalone: pid is still a Pulsar standalone's JVM (not gone, nor a
// zombie, whose command line is empty).
func isStandalone(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(b, []byte("PulsarStandaloneStarter"))
}

// openTxns says how many transactions the coordinators had open, from
// their stats (admin API v3).
func (e *env) openTxns() string {
	// By coordinator id.
	var st map[string]struct {
		OngoingTxnSize int `json:"ongoingTxnSize"`
	}
	if err := e.admin(http.MethodGet, "/admin/v3/transactions/coordinatorStats", &st); err != nil {
		return "open transactions unknown"
	}
	n := 0
	for _, c := range st {
		n += c.OngoingTxnSize
	}
	return fmt.Sprintf("%d transactions open", n)
}
