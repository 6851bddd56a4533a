package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// childHost is the host of the orphan test: it runs a pipeline with three
// plugin instances, prints their pids once they are up, and waits to be
// killed.
func childHost() {
	ctx := context.Background()
	h, err := streamrun.New(ctx, streamrun.Options{
		Pool:   pool.Options{ServiceURL: os.Getenv("STREAMRUN_TEST_URL")},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	go func() {
		err := h.Run(ctx, pipelines.Pipeline{
			Name:    "orphans",
			Source:  pipelines.Source{Topics: []string{os.Getenv("STREAMRUN_TEST_IN")}, Subscription: "orphans"},
			Handler: pipelines.Handler{Plugin: os.Getenv("STREAMRUN_TEST_PLUGIN"), Config: map[string]any{"output": os.Getenv("STREAMRUN_TEST_OUT")}, Instances: 3},
		})
		fmt.Println("error: Run returned:", err)
		os.Exit(1)
	}()
	for {
		var pids []string
		for _, ph := range h.Health() {
			for _, ih := range ph.Instances {
				if ih.Up && ih.Pid != 0 {
					pids = append(pids, strconv.Itoa(ih.Pid))
				}
			}
		}
		if len(pids) == 3 {
			fmt.Println("pids:", strings.Join(pids, " "))
			select {}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A host killed with SIGKILL leaves no plugin process behind.
func TestNoOrphansWhenTheHostIsKilled(t *testing.T) {
	c := cluster(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		roleEnv+"=host",
		"STREAMRUN_TEST_URL="+c.ServiceURL(),
		"STREAMRUN_TEST_PLUGIN="+example("uppercase"),
		"STREAMRUN_TEST_IN="+topic(t, "in"),
		"STREAMRUN_TEST_OUT="+topic(t, "out"),
	)
	cmd.Stderr = brokertest.LogWriter(t, "host process")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(testTimeout):
		t.Fatal("the host did not report its plugins")
	}
	if !strings.HasPrefix(line, "pids: ") {
		t.Fatalf("host said %q", line)
	}
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "pids: ")) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		if !alive(pid) {
			t.Fatalf("plugin %d is not running before the kill", pid)
		}
		pids = append(pids, pid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for range lines {
	}
	waitFor(t, fmt.Sprintf("plugins %v to die with their host", pids), func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
