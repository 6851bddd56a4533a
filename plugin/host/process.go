package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// process is one plugin child process. It is go-plugin's runner.Runner
// (given through ClientConfig.RunnerFunc), so that streamrun, not
// go-plugin, owns three things about the child:
//
//   - It dies with the host. On Linux the child gets SIGKILL as its
//     parent-death signal (see dieWithParent). That signal fires when the
//     thread that forked the child exits, not the process, and the Go
//     runtime does end threads (a goroutine that exits while locked to
//     one ends it). So the fork happens on a goroutine locked to its
//     thread, and that goroutine stays, locked and asleep, until the child
//     has been reaped: the thread outlives the child and only the host's
//     own death takes it down.
//   - Its stderr is read here and logged through slog (logStderr), its
//     last records kept for a start error to quote (tail); go-plugin is
//     given an empty stderr.
//   - Its exit is a channel (exited) and an error (exitErr).
type process struct {
	name   string
	cmd    *exec.Cmd
	log    *slog.Logger
	stderr io.ReadCloser
	stdout io.ReadCloser
	tail   stderrTail

	mu     sync.Mutex
	osProc *os.Process // nil until started
	pid    int         // 0 until started; written once, before Start returns

	expected atomic.Bool            // set before a kill or close the host asked for
	reason   atomic.Pointer[string] // why the host killed it on its own account (stop), if it was alive
	logged   chan struct{}          // closed when the stderr pipe is drained
	exited   chan struct{}          // closed after the child is reaped
	exitErr  error                  // the child's exit status; read after exited
	waitOnce sync.Once
}

var _ runner.Runner = (*process)(nil)

func newProcess(name string, log *slog.Logger, cmd *exec.Cmd) (*process, error) {
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	return &process{
		name:   name,
		cmd:    cmd,
		log:    log,
		stdout: stdout,
		stderr: stderr,
		logged: make(chan struct{}),
		exited: make(chan struct{}),
	}, nil
}

// Start forks the child on a goroutine locked to its OS thread, which
// stays until the child is reaped (see process).
func (p *process) Start(context.Context) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		p.mu.Lock()
		err := p.cmd.Start()
		// The child has its copies of the extra files (the batch
		// channel's end): the host's go, so the channel ends when the
		// child does.
		for _, f := range p.cmd.ExtraFiles {
			_ = f.Close()
		}
		if err == nil {
			p.osProc, p.pid = p.cmd.Process, p.cmd.Process.Pid
		}
		p.mu.Unlock()
		started <- err
		if err == nil {
			<-p.exited
		}
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", p.cmd.Path, err)
	}
	go func() {
		defer close(p.logged)
		logStderr(context.Background(), p.log, p.stderr, &p.tail)
	}()
	return nil
}

// Wait waits for the child to exit; go-plugin calls it once, after it has
// read stdout to EOF.
func (p *process) Wait(context.Context) error {
	p.waitOnce.Do(func() {
		<-p.logged // cmd.Wait closes the pipe: drain it first
		p.exitErr = p.cmd.Wait()
		status := exitStatus(p.exitErr)
		switch reason := p.reason.Load(); {
		case reason != nil && !endedItself(p.cmd.ProcessState):
			// (Alive when stop was called, and killed by SIGKILL.)
			// The host's own kill: say so, and why, lest it read as if
			// something else had killed the plugin.
			p.log.Info("plugin stopped by the host", "pid", p.pid, "reason", *reason, "status", status)
		case p.expected.Load():
			p.log.Debug("plugin exited", "pid", p.pid, "status", status)
		default:
			p.log.Warn("plugin exited unexpectedly", "pid", p.pid, "status", status)
		}
		close(p.exited)
	})
	return p.exitErr
}

// stop kills the child for reason, which its exit's log record gives
// (the first reason, if stopped twice), unless it has ended already, or
// ends within grace: then it ended by itself, or something else killed
// it, and its exit says so. (A plugin whose connection broke is most
// likely dying already, its exit a moment behind the end of its
// sockets.)
func (p *process) stop(reason string, grace time.Duration) {
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	if pid != 0 && !p.endsWithin(pid, grace) {
		p.reason.CompareAndSwap(nil, &reason)
	}
	_ = p.Kill(context.Background())
}

// endsWithin reports whether the child pid has ended, or ends within
// grace.
func (p *process) endsWithin(pid int, grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	for {
		if exitedAlready(pid) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// Kill sends SIGKILL; it is a no-op once the child is gone.
func (p *process) Kill(context.Context) error {
	p.mu.Lock()
	proc := p.osProc
	p.mu.Unlock()
	if proc == nil {
		return nil
	}
	if err := proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func (p *process) Stdout() io.ReadCloser { return p.stdout }

// Stderr is empty for go-plugin: logStderr reads the real pipe.
func (p *process) Stderr() io.ReadCloser { return io.NopCloser(strings.NewReader("")) }

func (p *process) Name() string { return p.name }

func (p *process) ID() string {
	if pid := p.getPid(); pid != 0 {
		return strconv.Itoa(pid)
	}
	return ""
}

func (p *process) getPid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *process) Diagnose(context.Context) string {
	return fmt.Sprintf("Is %s a streamrun handler plugin: a Go program built for this machine (GOOS=%s GOARCH=%s) that calls plugin.Serve, "+
		"or a script that calls streamrun.serve and writes nothing to stdout before it?",
		strings.Join(p.cmd.Args, " "), runtime.GOOS, runtime.GOARCH)
}

func (p *process) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (p *process) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// runnerFunc is the ClientConfig.RunnerFunc: it copies go-plugin's
// prepared environment (cookie, versions, mTLS certificate, socket
// directory) onto the process's own command.
func (p *process) runnerFunc(extraEnv []string) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, prepared *exec.Cmd, _ string) (runner.Runner, error) {
		p.cmd.Env = append(append(p.cmd.Env, prepared.Env...), extraEnv...)
		p.cmd.Stdin = nil
		return p, nil
	}
}

// startError is err, why the start failed, with the end of what the
// process wrote to stderr (nothing added when it wrote nothing). Call it
// once the process is reaped (after Instance.Kill), so that its stderr is
// read to the end.
func (p *process) startError(err error) error {
	tail := p.tail.quote()
	if tail == "" {
		return err
	}
	e := &startError{err: err, tail: tail}
	select {
	case <-p.exited:
		if endedItself(p.cmd.ProcessState) {
			e.exit = exitStatus(p.exitErr)
		}
	default:
	}
	return e
}

// startError is the error of a start that failed after the process wrote
// to its stderr. It unwraps to the error the start got.
type startError struct {
	err  error
	exit string // how the process ended, when it ended by itself
	tail string // the end of its stderr, quoted
}

func (e *startError) Error() string {
	if e.exit != "" {
		// go-plugin's words (no handshake line, is this a plugin?) say
		// less than the process's own.
		return fmt.Sprintf("the process exited before its handshake (%s); the end of its stderr:\n%s", e.exit, e.tail)
	}
	return fmt.Sprintf("%v; the end of its stderr:\n%s", e.err, e.tail)
}

func (e *startError) Unwrap() error { return e.err }

// endedItself reports whether a process exited, or died of a signal other
// than SIGKILL (which the host sends), rather than being killed.
func endedItself(st *os.ProcessState) bool {
	if st == nil {
		return false
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal() != syscall.SIGKILL
	}
	return st.Exited()
}

// exitStatus describes how a process ended, for logs and errors.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
