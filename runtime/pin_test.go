package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// copyFile copies src to dst, executable, by a rename (a running binary
// cannot be written over).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".new", b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".new", dst); err != nil {
		t.Fatal(err)
	}
}

// A handler binary pinned by handler.sha256 runs while it is the pinned
// file; another file is refused at start and at a restart, the error
// naming the file, the pinned digest and the actual one, and the slot
// starts again once the pinned file is back.
func TestHandlerPinIsCheckedAtStartAndRestart(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	bin := filepath.Join(t.TempDir(), "uppercase")
	copyFile(t, example("uppercase"), bin)
	good, err := pipelines.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	in, out := topic(t, "in"), topic(t, "out")
	pipe := func(pin string) pipelines.Pipeline {
		return pipelines.Pipeline{
			Name:    "pinned",
			Source:  pipelines.Source{Topics: []string{in}, Subscription: "pinned", InitialPosition: pipelines.Earliest},
			Handler: pipelines.Handler{Plugin: bin, SHA256: pin, Config: map[string]any{"output": out}},
			Outputs: []string{out},
		}
	}

	// A wrong pin: the pipeline does not start.
	wrong := strings.Repeat("ab", 32)
	h, err := streamrun.New(context.Background(), streamrun.Options{Pool: poolOpts(c), Logger: testLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = h.Run(ctx, pipe(wrong))
	var pe *pipelines.PinError
	if err == nil || !strings.Contains(err.Error(), bin) || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), good) {
		t.Fatalf("Run with a wrong pin: %v, want an error naming %s, %s and %s", err, bin, wrong, good)
	}
	if !errors.As(err, &pe) {
		t.Fatalf("Run with a wrong pin: %T, want a *pipelines.PinError in the chain", err)
	}

	// The right pin: it runs.
	got := collect(t, cl, out)
	r := runHost(t, c, streamrun.Options{Restart: streamrun.RestartPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}}, pipe(strings.ToUpper(good)))
	publish(t, cl, in, 1, func(int) string { return "a" }, nil)
	got.waitLen(t, 1)
	// The plugin channel listens on nothing beyond the machine.
	for _, ip := range brokertest.ListeningIPs(t, r.health("pinned").Instances[0].Pid) {
		if !ip.IsLoopback() {
			t.Errorf("the plugin listens on %s", ip)
		}
	}

	// The file changes under the running pipeline and its process dies:
	// the restart is refused, saying why.
	copyFile(t, example("slow"), bin)
	pid := r.health("pinned").Instances[0].Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restart refused for the pin", func() bool {
		ih := r.health("pinned").Instances[0]
		return !ih.Up && strings.Contains(ih.LastError, "pins "+good)
	})
	// The pinned file is back: the slot starts again and work goes on.
	copyFile(t, example("uppercase"), bin)
	waitFor(t, "the slot up again", func() bool { return r.health("pinned").Instances[0].Up })
	publish(t, cl, in, 1, func(int) string { return "b" }, nil)
	got.waitLen(t, 2)
}
