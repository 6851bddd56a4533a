package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

// readmeFirstCommand is the first line of the README's first sh block.
func readmeFirstCommand(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	inBlock := false
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(l, "```sh"):
			inBlock = true
		case inBlock && strings.TrimSpace(l) != "":
			return l
		}
	}
	t.Fatal("README.md has no sh block")
	return ""
}

// TestRunQuickstartAsInREADME runs the README's first command as written,
// from the repository root, and checks that it ends on its own with
// status 0 having printed every input line uppercased.
func TestRunQuickstartAsInREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quickstart")
	}
	line := readmeFirstCommand(t)
	if !strings.HasPrefix(line, "go run ./cmd/streamrun run ") {
		t.Fatalf("the README's first command is %q, not a streamrun run", line)
	}
	root := repoRoot(t)
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = root
	var stdout, stderr brokertest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%s did not end on its own\nstdout:\n%s\nstderr:\n%s", line, stdout.String(), stderr.String())
	}

	input, err := os.ReadFile(filepath.Join(root, "examples/pipelines/quickstart-input.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	n := 0
	for l := range strings.Lines(string(input)) {
		l = strings.TrimRight(l, "\n")
		if l == "" {
			continue
		}
		n++
		if want := "quickstart-out " + strings.ToUpper(l) + "\n"; !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if want := fmt.Sprintf("streamrun: %d messages in, %d outputs printed\n", n, n); !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q:\n%s", want, out)
	}
	if !strings.Contains(out, "embedded broker started in this process, service_url=pulsar://") {
		t.Errorf("stdout does not say the embedded broker started:\n%s", out)
	}
}

// TestRunBadFileStartsNothing: a bad file is exit 2 with the file named,
// and nothing starts: no embedded broker, no data directory.
func TestRunBadFileStartsNothing(t *testing.T) {
	bin := buildStreamrun(t)
	dir := t.TempDir()
	path := writePipelineFile(t, dir, "bad.yaml", `
pipelines:
  - name: shout
    source:
      topics: [in]
      subscription: s
    handlr:
      plugin: /bin/true
`)
	p := startProc(t, "streamrun run", dir, bin, nil, "run", path)
	if code := p.wait(t, time.Minute); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(p.stderr.String(), "bad.yaml") || !strings.Contains(p.stderr.String(), "handlr") {
		t.Errorf("stderr does not name the file and the field:\n%s", p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "nothing started") {
		t.Errorf("stderr does not say nothing started:\n%s", p.stderr.String())
	}
	if s := p.stdout.String(); s != "" {
		t.Errorf("stdout is not empty: %q", s)
	}
	if _, err := os.Stat(filepath.Join(dir, ".streamrun")); !os.IsNotExist(err) {
		t.Errorf("a data directory was made: %v", err)
	}
}

// TestRunUsageErrors: bad flags and files that do not go together are
// exit 2, before anything starts (--memory: nothing on disk either way).
func TestRunUsageErrors(t *testing.T) {
	dir := t.TempDir()
	good := func(name, url, pipe string) string {
		body := "pipelines:\n  - name: " + pipe + "\n    source: {topics: [in], subscription: s}\n    handler: {plugin: /bin/true}\n"
		if url != "" {
			body = "service_url: " + url + "\n" + body
		}
		return writePipelineFile(t, dir, name, body)
	}
	a := good("a.yaml", "pulsar://127.0.0.1:1", "one")
	b := good("b.yaml", "pulsar://127.0.0.1:2", "two")
	c := good("c.yaml", "", "one")
	d := writePipelineFile(t, dir, "d.yaml", "service_url: pulsar://127.0.0.1:1\nauth: {token: abc}\n"+
		"pipelines:\n  - name: four\n    source: {topics: [in], subscription: s}\n    handler: {plugin: /bin/true}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no pipeline file"},
		{[]string{"--nope", a}, "unknown flag"},
		{[]string{filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{a, b}, "service_url"},
		{[]string{a, c}, `pipeline "one" is also defined in`},
		{[]string{a, d}, "tls, auth or operation_retries differ"},
		{[]string{"--memory", "--data", dir, a}, "exclude each other"},
		{[]string{"--until-drained", a}, "needs --input"},
		{[]string{"--log-format", "xml", a}, "--log-format"},
		{[]string{"--input", filepath.Join(dir, "nothing.txt"), a}, "nothing.txt"},
		{[]string{"--input", a, "--input-topic", "elsewhere", a}, "no pipeline reads it"},
	} {
		code, out, errs := runArgs(append([]string{"run", "--memory"}, tc.args...)...)
		if tc.args != nil && tc.args[0] == "--memory" {
			code, out, errs = runArgs(append([]string{"run"}, tc.args...)...)
		}
		if code != 2 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("run %v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// taggerPipeline is a pipeline file running the tagger test handler from
// in to out, on the broker at url.
func taggerPipeline(t *testing.T, url, in, out, typ string, batch, instances int, delay string) string {
	t.Helper()
	return fmt.Sprintf(`
service_url: %s
pipelines:
  - name: tag
    source:
      topics: [%s]
      subscription: tag
      type: %s
      initial_position: earliest
    handler:
      package: %s
      config: {output: %s, delay: %q}
      batch_size: %d
      instances: %d
    outputs: [%s]
`, url, in, typ, filepath.Join(repoRoot(t), "cmd/streamrun/testdata/tagger"), out, delay, batch, instances, out)
}

// TestRunSIGINTDrains interrupts a busy run: it exits 0 within the
// shutdown timeout, and every input either has its output or is still in
// the subscription's backlog (nothing acknowledged that was not
// processed, nothing lost).
func TestRunSIGINTDrains(t *testing.T) {
	b := brokertest.Start(t)
	sigintDrains(t, b.ServiceURL(), b.AdminURL())
}

// TestRunSIGINTDrainsPulsar is TestRunSIGINTDrains against Apache Pulsar.
func TestRunSIGINTDrainsPulsar(t *testing.T) {
	url, admin := apachePulsar(t)
	sigintDrains(t, url, admin)
}

func sigintDrains(t *testing.T, url, adminURL string) {
	const n, shutdown = 20000, 10 * time.Second
	bin := buildStreamrun(t)
	client := newClient(t, url)
	in, out := fmt.Sprintf("sigint-in-%d", time.Now().UnixNano()), fmt.Sprintf("sigint-out-%d", time.Now().UnixNano())
	publishKeyed(t, client, in, n, 16)
	outs := collect(t, client, out)

	dir := t.TempDir()
	file := writePipelineFile(t, dir, "p.yaml", taggerPipeline(t, url, in, out, "shared", 20, 2, "5ms"))
	p := startProc(t, "streamrun run", dir, bin, nil, "run", "--shutdown-timeout", shutdown.String(), "--status-interval", "100ms", file)
	brokertest.Eventually(t, 2*time.Minute, "outputs to flow", func() bool { return outs.len() >= 1000 })
	// Asked for, the status line comes though stderr is no terminal.
	brokertest.Eventually(t, time.Minute, "a status line", func() bool {
		return regexp.MustCompile(`msg=status pipeline=tag received=\d+ acked=\d+ retried=0 dead_lettered=0 msg_per_s=\d+ instances_up=2/2`).MatchString(p.stderr.String())
	})
	if outs.len() >= n {
		t.Fatalf("the run finished all %d before the signal; make it busier", n)
	}
	p.signal(t, syscall.SIGINT)
	// The drain has the shutdown timeout, and closing the consumer and the
	// plugins a short grace after it.
	if code := p.wait(t, shutdown+10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGINT, want 0", code)
	}
	outs.caughtUp(t, adminURL, out)
	got := map[string]bool{}
	for _, m := range outs.all() {
		got[string(m.Payload)] = true
	}
	// Every input without an output must still be in the subscription:
	// a consumer of the same subscription receives each of them (and may
	// receive inputs that have outputs too: processed, not yet
	// acknowledged when the drain ended).
	var missing []string
	for i := range n {
		if k := fmt.Sprintf("k%d:%d", i%16, i/16); !got[k] {
			missing = append(missing, k)
		}
	}
	backlog := subscriptionBacklog(t, adminURL, in, "tag")
	if len(missing) > 0 && backlog == 0 {
		t.Fatalf("%d inputs have no output and the subscription's backlog is empty: acknowledged unprocessed, or lost", len(missing))
	}
	redelivered := receiveAll(t, client, in, "tag", missing)
	t.Logf("SIGINT after %d outputs: %d inputs, %d distinct outputs, %d without output all still in the subscription (backlog %d as the admin API counts it, %d messages read back)",
		outs.len(), n, len(got), len(missing), backlog, redelivered)
	if !strings.Contains(p.stderr.String(), "handed_back=") {
		t.Errorf("no pipeline totals in the log")
	}
}

// TestRunInputWithKeys feeds keyed lines through the quickstart pipeline
// in this process and reads the printed outputs with their keys.
func TestRunInputWithKeys(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte("alice|hello\n\nbob|good day\nno key here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runArgs("run", "--memory", "--log-level", "warn", "--input", in, "--input-key-separator", "|",
		"--until-drained", filepath.Join(repoRoot(t), "examples/pipelines/quickstart.yaml"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{
		"quickstart-out [alice] HELLO\n",
		"quickstart-out [bob] GOOD DAY\n",
		"quickstart-out NO KEY HERE\n",
		"streamrun: 3 messages in, 3 outputs printed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// TestRunHandlerThatDoesNotBuild is a runtime failure: exit 1, with the
// compiler's words.
func TestRunHandlerThatDoesNotBuild(t *testing.T) {
	dir := t.TempDir()
	writePipelineFile(t, dir, "go.mod", "module example.com/broken\n\ngo 1.22\n")
	writePipelineFile(t, dir, "main.go", "package main\n\nfunc main() { return 1 }\n")
	file := writePipelineFile(t, dir, "p.yaml", `
pipelines:
  - name: broken
    source: {topics: [in], subscription: s}
    handler: {package: ./}
`)
	code, out, errs := runArgs("run", "--memory", "--handler-cache", t.TempDir(), file)
	if code != 1 || !strings.Contains(errs, "main.go:3") {
		t.Fatalf("exit %d, stderr %q; want 1 and the compiler's error", code, errs)
	}
	if !strings.Contains(out, "embedded broker started") {
		t.Errorf("stdout: %q", out)
	}
}

// TestRunStdinInterrupted: lines from a stdin that stays open flow
// through, and SIGINT still stops the run at once (the read that waits
// for more input does not hold up the drain).
func TestRunStdinInterrupted(t *testing.T) {
	bin := buildStreamrun(t)
	p := &proc{name: "streamrun run", done: make(chan struct{})}
	p.cmd = exec.Command(bin, "run", "--memory", "--input", "-", "--print",
		filepath.Join(repoRoot(t), "examples/pipelines/quickstart.yaml"))
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		if err := p.cmd.Wait(); err != nil {
			p.code = p.cmd.ProcessState.ExitCode()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", p.stdout.String(), tail(p.stderr.String(), 4000))
		}
	})
	if _, err := io.WriteString(stdin, "one\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 2*time.Minute, "both lines through", func() bool {
		out := p.stdout.String()
		return strings.Contains(out, "quickstart-out ONE\n") && strings.Contains(out, "quickstart-out TWO\n")
	})
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGINT", code)
	}
	if !strings.Contains(p.stderr.String(), "streamrun run: interrupted") {
		t.Errorf("stderr does not say it was interrupted")
	}
}

// TestRunChainUntilDrained runs the example chain of two pipelines: the
// run stops only once the second pipeline has processed what the first
// sent it, and prints the outputs of both final topics.
func TestRunChainUntilDrained(t *testing.T) {
	in := filepath.Join(t.TempDir(), "orders.txt")
	var lines strings.Builder
	const n = 40
	for i := range n {
		amount := 5 // small
		if i%2 == 0 {
			amount = 5000 // large: through the second pipeline
		}
		fmt.Fprintf(&lines, `{"id":"o%d","country":"JP","amount":%d}`+"\n", i, amount)
	}
	if err := os.WriteFile(in, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runArgs("run", "--memory", "--log-level", "warn", "--input", in, "--until-drained",
		filepath.Join(repoRoot(t), "examples/pipelines/chain.yaml"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for i := range n {
		want := fmt.Sprintf(`orders-small [o%d] {"id":"o%d"`, i, i)
		if i%2 == 0 {
			want = fmt.Sprintf(`orders-large-shouted [o%d] {"ID":"O%d"`, i, i)
		}
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %s...", want)
		}
	}
	if want := fmt.Sprintf("streamrun: %d messages in, %d outputs printed\n", n, n); !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q", want)
	}
}

// apachePulsar is the Apache Pulsar standalone to run against
// (STREAMRUN_PULSAR_URL, STREAMRUN_PULSAR_HTTP); t skips without it.
func apachePulsar(t *testing.T) (url, admin string) {
	t.Helper()
	url, admin = os.Getenv("STREAMRUN_PULSAR_URL"), os.Getenv("STREAMRUN_PULSAR_HTTP")
	if url == "" || admin == "" {
		t.Skip("STREAMRUN_PULSAR_URL and STREAMRUN_PULSAR_HTTP are not set: no Apache Pulsar to run against (.ci/run sets them)")
	}
	return url, admin
}
