package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The official Python client (pulsar-client, in the interpreter named by
// STREAMRUN_PYTHON; scripts/python-env makes one) runs the pytest suite in
// interop/python against the target: produce and consume with keys,
// properties, event times and compression, negative acks, a reader, a
// readCompacted reader after the admin compaction trigger.
func TestPythonClient(t *testing.T) {
	py := os.Getenv("STREAMRUN_PYTHON")
	if py == "" {
		t.Skip("STREAMRUN_PYTHON is not set (STREAMRUN_PYTHON=$(scripts/python-env) gives a python with pulsar-client)")
	}
	if out, err := exec.Command(py, "-c", "import pulsar, pytest").CombinedOutput(); err != nil {
		t.Fatalf("STREAMRUN_PYTHON=%s cannot import pulsar and pytest: %v\n%s", py, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := filepath.Abs("python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-q", "-p", "no:cacheprovider", dir)
	cmd.Env = append(os.Environ(), "STREAMRUN_SERVICE_URL="+tgt.serviceURL, "STREAMRUN_ADMIN_URL="+tgt.adminURL, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pytest against %s: %v\n%s", tgt.serviceURL, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	summary := lines[len(lines)-1]
	if !strings.Contains(summary, "passed") || strings.Contains(summary, "skipped") {
		t.Fatalf("pytest did not pass every test:\n%s", out)
	}
	t.Logf("pytest: %s", summary)
}
