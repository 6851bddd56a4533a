package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Apache Pulsar's own Java tools (from the distribution unpacked at
// STREAMRUN_PULSAR_HOME; scripts/pulsar home gives one) against the
// target: pulsar-client produce/consume and pulsar-perf produce/consume,
// driven by interop/java/run.sh.
func TestJavaTools(t *testing.T) {
	home := os.Getenv("STREAMRUN_PULSAR_HOME")
	if home == "" {
		t.Skip("STREAMRUN_PULSAR_HOME is not set (STREAMRUN_PULSAR_HOME=$(scripts/pulsar home) gives Apache Pulsar's Java tools)")
	}
	script, err := filepath.Abs(filepath.Join("java", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, tgt.serviceURL, tgt.adminURL)
	cmd.Env = append(os.Environ(), "STREAMRUN_PULSAR_HOME="+home)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("interop/java/run.sh %s %s: %v\n%s", tgt.serviceURL, tgt.adminURL, err, out)
	}
	t.Logf("java tools passed in %v", time.Since(start).Round(time.Second))
	if testing.Verbose() {
		t.Logf("%s", out)
	}
}
