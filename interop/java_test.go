package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
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

// Apache Pulsar's pulsar-admin CLI (from STREAMRUN_PULSAR_HOME) manages
// topics on the target through its admin REST API: create, list, read the
// partition count, delete; partitioned and not.
func TestPulsarAdminCLI(t *testing.T) {
	home := os.Getenv("STREAMRUN_PULSAR_HOME")
	if home == "" {
		t.Skip("STREAMRUN_PULSAR_HOME is not set (STREAMRUN_PULSAR_HOME=$(scripts/pulsar home) gives Apache Pulsar's pulsar-admin)")
	}
	// A conf naming only the target, so nothing falls back to a broker
	// that happens to listen on localhost:8080.
	conf := filepath.Join(t.TempDir(), "client.conf")
	if err := os.WriteFile(conf, []byte("webServiceUrl="+tgt.adminURL+"\nbrokerServiceUrl="+tgt.serviceURL+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(home, "bin", "pulsar-admin"), append([]string{"--admin-url", tgt.adminURL}, args...)...)
		cmd.Env = append(os.Environ(), "PULSAR_CLIENT_CONF="+conf, "PULSAR_LOG_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pulsar-admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	topic := brokertest.TopicName(t)
	partitioned := topic + "-partitioned"

	admin("topics", "create", topic)
	admin("topics", "create-partitioned-topic", "-p", "3", partitioned)
	if out := admin("topics", "list", "public/default"); !strings.Contains(out, topic+"\n") {
		t.Fatalf("topics list does not name %s:\n%s", topic, out)
	}
	if out := admin("topics", "list-partitioned-topics", "public/default"); !strings.Contains(out, partitioned) {
		t.Fatalf("topics list-partitioned-topics does not name %s:\n%s", partitioned, out)
	}
	if out := admin("topics", "get-partitioned-topic-metadata", partitioned); !regexp.MustCompile(`"partitions"\s*:\s*3`).MatchString(out) {
		t.Fatalf("get-partitioned-topic-metadata: want 3 partitions:\n%s", out)
	}
	admin("topics", "delete-partitioned-topic", partitioned)
	admin("topics", "delete", topic)
	if out := admin("topics", "list", "public/default"); strings.Contains(out, topic+"\n") {
		t.Fatalf("topics list still names the deleted %s:\n%s", topic, out)
	}
	if out := admin("topics", "list-partitioned-topics", "public/default"); strings.Contains(out, partitioned) {
		t.Fatalf("topics list-partitioned-topics still names the deleted %s:\n%s", partitioned, out)
	}
}
