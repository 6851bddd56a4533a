package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runArgsWithin is runArgs that fails t when the run has not ended on
// its own within d (then cancels it).
func runArgsWithin(t *testing.T, d time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &errb) }()
	select {
	case code := <-done:
		return code, out.String(), errb.String()
	case <-time.After(d):
		cancel()
		<-done
		t.Fatalf("%v did not end on its own within %v\nstdout:\n%s\nstderr:\n%s", args, d, out.String(), errb.String())
		return 0, "", ""
	}
}

// The quickstart with no plugin (examples/pipelines/quickstart-steps.yaml)
// prints what the plugin one prints: every line uppercased, once.
func TestRunQuickstartSteps(t *testing.T) {
	root := repoRoot(t)
	input := filepath.Join(root, "examples/pipelines/quickstart-input.txt")
	code, out, errs := runArgsWithin(t, 2*time.Minute, "run", "--memory", "--log-level", "warn", "--input", input,
		"--until-drained", filepath.Join(root, "examples/pipelines/quickstart-steps.yaml"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	b, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimRight(l, "\n"); l == "" {
			continue
		}
		n++
		if want := "quickstart-out " + strings.ToUpper(l) + "\n"; strings.Count(out, want) != 1 {
			t.Errorf("stdout has %q %d times, want once:\n%s", want, strings.Count(out, want), out)
		}
	}
	if want := "streamrun: 10 messages in, 10 outputs printed\n"; n != 10 || !strings.Contains(out, want) {
		t.Errorf("stdout lacks %q (%d input lines):\n%s", want, n, out)
	}
}

// The order router with no code (examples/pipelines/order-router.yaml)
// over one order of each kind: the run ends once every order is settled,
// a filtered one included; the order of no known country is printed
// reshaped and keyed by its customer on the default route; the one
// without a customer and the one that is not JSON are dead-lettered,
// saying why.
func TestRunOrderRouter(t *testing.T) {
	root := repoRoot(t)
	input := filepath.Join(t.TempDir(), "orders.txt")
	orders := strings.Join([]string{
		`{"id":"o1","customer":"c7","country":"DE","amount":25.5}`,
		`{"id":"o2","customer":"c8","country":"FR","amount":3}`,
		`{"id":"o3","customer":"c9","country":"IT","amount":1}`,
		`{"id":"o4","customer":"c7","country":"DE","amount":-2}`,
		`{"id":"o5","country":"DE","amount":2}`,
		`not json`,
	}, "\n") + "\n"
	if err := os.WriteFile(input, []byte(orders), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runArgsWithin(t, 2*time.Minute, "run", "--memory", "--log-level", "warn", "--input", input,
		"--until-drained", filepath.Join(root, "examples/pipelines/order-router.yaml"))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	// orders-de and orders-fr are chosen by the route at run time, not
	// declared outputs: --print reads only those.
	for _, want := range []string{
		`orders-other [c9] {"amount":1,"customer":"c9","id":"o3","routed_at":"`,
		"streamrun: 6 messages in, 1 outputs printed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{`reason="order o5 has no customer"`, `reason="step positive: the payload is not JSON`} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}
