package broker_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// streamrunBinary builds cmd/streamrun once per test run.
func streamrunBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the streamrun binary")
	}
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "streamrun-broker-test")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "streamrun")
		out, err := exec.Command("go", "build", "-o", build.path, "../cmd/streamrun").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

type brokerProcess struct {
	cmd        *exec.Cmd
	serviceURL string
	adminURL   string // "" unless args turn the admin API on (--http)
	done       chan error
}

// startProcess runs `streamrun broker` with args and waits for its ready
// line.
func startProcess(t *testing.T, args ...string) *brokerProcess {
	t.Helper()
	cmd := exec.Command(streamrunBinary(t), append([]string{"broker", "--listen", "127.0.0.1:0", "--http", "-", "--log-level", "warn"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bp := &brokerProcess{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "ready") {
				ready <- l
			}
		}
		bp.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-bp.done:
		case <-time.After(waitFor):
		}
	})
	select {
	case l := <-ready:
		for _, f := range strings.Fields(l) {
			if u, ok := strings.CutPrefix(f, "service_url="); ok {
				bp.serviceURL = u
			}
			if u, ok := strings.CutPrefix(f, "admin_url="); ok {
				bp.adminURL = u
			}
		}
	case err := <-bp.done:
		t.Fatalf("broker exited before it was ready: %v", err)
	case <-time.After(waitFor):
		t.Fatal("broker not ready")
	}
	if bp.serviceURL == "" {
		t.Fatal("no service_url in the ready line")
	}
	return bp
}

func (bp *brokerProcess) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-bp.done:
		bp.done <- err
		return err
	case <-time.After(waitFor):
		t.Fatal("broker process did not exit")
		return nil
	}
}

func TestSIGTERMStopsTheBrokerCleanly(t *testing.T) {
	bp := startProcess(t, "--memory")
	dial(t, bp.serviceURL).producer("x")
	bp.cmd.Process.Signal(syscall.SIGTERM)
	if err := bp.wait(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestBadFlagsExitWithStatus2(t *testing.T) {
	cmd := exec.Command(streamrunBinary(t), "broker", "--brokers", "many")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "--brokers") {
		t.Errorf("message does not name the flag:\n%s", out)
	}
}

// A message whose receipt was sent survives kill -9 of the broker, at
// both durability levels (with --sync receipts wait for the fsync while
// the connection reads on).
func TestKillNineLosesNoReceiptedMessage(t *testing.T) {
	for _, level := range []struct {
		name  string
		flags []string
	}{{"default", nil}, {"sync", []string{"--sync"}}} {
		t.Run(level.name, func(t *testing.T) { killNineLosesNoReceiptedMessage(t, level.flags...) })
	}
}

func killNineLosesNoReceiptedMessage(t *testing.T, flags ...string) {
	dir := t.TempDir()
	bp := startProcess(t, append([]string{"--data", dir}, flags...)...)
	p := dial(t, bp.serviceURL)
	topic := "persistent://public/default/crash"
	pid := p.producer(topic)

	receipted := map[string]bool{}
	const n = 5000
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for i := uint64(0); i < n; i++ {
			if _, err := p.nc.Write(sendFrame(pid, i, msg{payload: fmt.Sprint("m", i)})); err != nil {
				return // the broker is gone
			}
		}
	}()
	for len(receipted) < n/2 {
		f := p.expect("receipt", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
		receipted[fmt.Sprint("m", f.Cmd.GetSendReceipt().GetSequenceId())] = true
	}
	bp.cmd.Process.Kill() // SIGKILL, mid-stream
	bp.wait(t)
	// Receipts already in our buffer were sent before the kill too.
	<-writer
	for {
		f, ok := p.wait(waitFor, func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_SEND_RECEIPT })
		if !ok {
			break
		}
		receipted[fmt.Sprint("m", f.Cmd.GetSendReceipt().GetSequenceId())] = true
	}
	p.close()

	bp2 := startProcess(t, append([]string{"--data", dir}, flags...)...)
	q := dial(t, bp2.serviceURL)
	cid := q.subscribe(topic, "check", pb.CommandSubscribe_Exclusive, earliest)
	q.flow(cid, n+10)
	got := map[string]bool{}
	for len(got) < len(receipted) {
		f, ok := q.wait(waitFor, isMessageFor(cid))
		if !ok {
			break
		}
		got[decode(f).payload] = true
	}
	for m := range receipted {
		if !got[m] {
			t.Fatalf("receipted message %s lost (%d receipted, %d read back)", m, len(receipted), len(got))
		}
	}
	t.Logf("%d receipted before kill -9, all %d read back", len(receipted), len(got))
}
