package interop

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

// The streamrun binary, built once per run from this checkout (or taken
// from STREAMRUN_BIN).
var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string // removed by runMain
)

func streamrunBinary() (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv("STREAMRUN_BIN"); p != "" {
			binPath = p
			return
		}
		binDir, binErr = os.MkdirTemp("", "streamrun-interop-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "streamrun")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/streamrun")
		cmd.Dir = ".." // the main module, beside this one
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/streamrun: %v\n%s", err, out)
		}
	})
	return binPath, binErr
}

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// brokerArgs is how to run `streamrun broker`.
type brokerArgs struct {
	listen  string // host:port of broker 0
	http    string // host:port of the admin API
	data    string // --data; empty: --memory
	brokers int    // --brokers; 0 or 1: one broker
	txns    bool   // --transactions
}

func (a brokerArgs) argv() []string {
	argv := []string{"broker", "--listen", a.listen, "--http", a.http}
	if a.data != "" {
		argv = append(argv, "--data", a.data)
	} else {
		argv = append(argv, "--memory")
	}
	if a.brokers > 1 {
		argv = append(argv, "--brokers", strconv.Itoa(a.brokers))
	}
	if a.txns {
		argv = append(argv, "--transactions")
	}
	return argv
}

// brokerProcess is one running `streamrun broker`.
type brokerProcess struct {
	cmd        *exec.Cmd
	serviceURL string
	adminURL   string
	out        *brokertest.SyncBuffer // stdout and stderr
	exited     chan struct{}
	waitErr    error
}

var readyURL = regexp.MustCompile(`pulsar://[^\s"',]+`)

// startBrokerProcess runs the binary and waits until it prints its ready
// line, or exits, or ctx ends.
func startBrokerProcess(ctx context.Context, args brokerArgs, logTo io.Writer) (*brokerProcess, error) {
	bin, err := streamrunBinary()
	if err != nil {
		return nil, err
	}
	b := &brokerProcess{out: &brokertest.SyncBuffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(bin, args.argv()...)
	var sink io.Writer = b.out
	if logTo != nil {
		sink = io.MultiWriter(b.out, logTo)
	}
	b.cmd.Stderr = sink
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", bin, strings.Join(args.argv(), " "), err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(sink, line)
			if !found && strings.Contains(line, "ready") {
				if u := readyURL.FindString(line); u != "" {
					found = true
					ready <- u
				}
			}
		}
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	select {
	case u := <-ready:
		b.serviceURL = u
		b.adminURL = "http://" + args.http
		return b, nil
	case <-b.exited:
		return nil, fmt.Errorf("streamrun %s exited before it was ready (%v):\n%s", strings.Join(args.argv(), " "), b.waitErr, b.out.String())
	case <-ctx.Done():
		b.kill()
		return nil, fmt.Errorf("streamrun %s: no ready line: %w\n%s", strings.Join(args.argv(), " "), ctx.Err(), b.out.String())
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (b *brokerProcess) kill() {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// stop sends SIGTERM and waits up to timeout; the process must exit 0.
func (b *brokerProcess) stop(timeout time.Duration) error {
	select {
	case <-b.exited:
		return fmt.Errorf("already exited: %v", b.waitErr)
	default:
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-b.exited:
		if b.waitErr != nil {
			return fmt.Errorf("exit after SIGTERM: %w", b.waitErr)
		}
		return nil
	case <-time.After(timeout):
		b.kill()
		return fmt.Errorf("still running %v after SIGTERM; killed", timeout)
	}
}

// startBroker starts a broker process for the test; it is killed when the
// test ends if still running, and its output is shown if the test fails.
func startBroker(t *testing.T, args brokerArgs) *brokerProcess {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := startBrokerProcess(ctx, args, testLog(t, "streamrun broker "+strings.Join(args.argv(), " ")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-b.exited:
		default:
			b.kill()
		}
	})
	return b
}

// freeBrokerAddrs finds n consecutive free loopback ports for the
// brokers (broker i on base + i) and one more free port for HTTP.
func freeBrokerAddrs(n int) (listen, http string, err error) {
	for attempt := 0; attempt < 100; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", err
		}
		base := l.Addr().(*net.TCPAddr).Port
		held := []net.Listener{l}
		ok := base+n < 65535
		for i := 1; ok && i < n; i++ {
			li, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, li)
		}
		var h net.Listener
		if ok {
			if h, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				ok = false
			} else {
				held = append(held, h)
			}
		}
		for _, x := range held {
			x.Close()
		}
		if ok {
			return fmt.Sprintf("127.0.0.1:%d", base), h.Addr().String(), nil
		}
	}
	return "", "", errors.New("no run of free ports found")
}
