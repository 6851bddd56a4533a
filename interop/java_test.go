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

// Apache Pulsar's Java client's transactions (from STREAMRUN_PULSAR_HOME's
// jars) against the transaction target, driven by interop/java/TxnCheck.java
// through the Java source launcher (which needs a JDK's jdk.compiler):
// commit, abort, an aborted acknowledgement, a conflict and a timeout, as
// the Go tests in transaction_test.go check them. The Java client puts the
// transaction id in the message's metadata, so Apache Pulsar hides its
// aborted messages too.
func TestJavaTransactions(t *testing.T) {
	home := os.Getenv("STREAMRUN_PULSAR_HOME")
	if home == "" {
		t.Skip("STREAMRUN_PULSAR_HOME is not set (STREAMRUN_PULSAR_HOME=$(scripts/pulsar home) gives Apache Pulsar's Java client)")
	}
	txn := txnTarget(t)
	if out, err := exec.Command("java", "--list-modules").Output(); err != nil || !strings.Contains(string(out), "jdk.compiler") {
		t.Skip("the Java source launcher needs a JDK (no jdk.compiler module in `java --list-modules`)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", filepath.Join(home, "lib", "*"), filepath.Join("java", "TxnCheck.java"), txn.serviceURL)
	out, err := cmd.CombinedOutput()
	// The client logs to the same stream; the checks' own lines are
	// those that start with ok: or FAIL:.
	var verdicts []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ok: ") || strings.HasPrefix(line, "FAIL: ") {
			verdicts = append(verdicts, line)
		}
	}
	t.Logf("TxnCheck.java:\n%s", strings.Join(verdicts, "\n"))
	if err != nil || len(verdicts) == 0 {
		t.Fatalf("java TxnCheck.java %s: %v\n%s", txn.serviceURL, err, tail(string(out), 6000))
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
