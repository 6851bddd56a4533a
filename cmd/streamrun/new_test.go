package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every bad use of `streamrun new` is refused with exit status 2, a line
// saying what is wrong, and nothing written.
func TestNewRefusesBadUsage(t *testing.T) {
	tmp := t.TempDir()
	full := filepath.Join(tmp, "full")
	if err := os.MkdirAll(filepath.Join(full, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	notSDK := t.TempDir()
	if err := os.WriteFile(filepath.Join(notSDK, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(tmp, "fresh")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "what to make"},
		{[]string{"pipeline", "p"}, `unknown kind "pipeline"`},
		{[]string{"handler"}, "no handler name given"},
		{[]string{"handler", "a", "b", "--lang", "go"}, "unexpected arguments: b"},
		{[]string{"handler", "Bad_Name", "--lang", "go", "--dir", fresh}, `handler name "Bad_Name": want lower-case letters`},
		{[]string{"handler", "9lives", "--lang", "go", "--dir", fresh}, `handler name "9lives"`},
		{[]string{"handler", "trailing-", "--lang", "go", "--dir", fresh}, `handler name "trailing-"`},
		{[]string{"handler", "ok", "--dir", fresh}, "no language given: --lang go or --lang python"},
		{[]string{"handler", "ok", "--lang", "rust", "--dir", fresh}, `language "rust": want go or python`},
		{[]string{"handler", "ok", "--lang", "python", "--module", "x.org/y", "--dir", fresh}, "--module is for --lang go"},
		{[]string{"handler", "ok", "--lang", "go", "--dir", full}, full + " exists and is not empty"},
		{[]string{"handler", "ok", "--lang", "go", "--dir", fresh, "--sdk", notSDK}, `go.mod is module "example.com/other", not github.com/streamrun/streamrun`},
		{[]string{"handler", "ok", "--lang", "go", "--dir", fresh, "--sdk", tmp}, "has no go.mod"},
	} {
		code, out, errs := runArgs(append([]string{"new"}, c.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errs, "streamrun new: ") || !strings.Contains(errs, c.want) ||
			!strings.HasSuffix(errs, "Run 'streamrun new --help' for usage.\n") {
			t.Errorf("new %q: exit %d, stdout %q, stderr %q: want 2 and %q", c.args, code, out, errs, c.want)
		}
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("%s was made by a refused command (%v)", fresh, err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Errorf("%s holds %d entries after refused commands, want only full/", tmp, len(ents))
	}
}

// goIn runs the go command in dir and fails the test with its output.
func goIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// `streamrun new handler --lang go` in a clean directory outside the
// repository writes a module that passes its own tests, vets clean, and
// whose pipeline validates (the handler built and started with its
// config), runs its input through and passes its `streamrun test` cases.
func TestNewGoHandlerPassesItsOwnTests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and tests a new module")
	}
	dir := filepath.Join(t.TempDir(), "shout")
	// No --sdk: the checkout the test runs in is found.
	code, out, errs := runArgs("new", "handler", "shout", "--lang", "go", "--dir", dir)
	if code != 0 || !strings.Contains(out, "wrote "+dir+" (go, SDK from "+repoRoot(t)+")") {
		t.Fatalf("new: exit %d\n%s%s", code, out, errs)
	}
	for _, f := range []string{"go.mod", "go.sum", "main.go", "handler.go", "handler_test.go", "pipeline.yaml", "input.txt", "README.md", ".gitignore", "pipeline_test.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(gomod), "module shout\n") || !strings.Contains(string(gomod), "replace github.com/streamrun/streamrun => "+repoRoot(t)+"\n") {
		t.Errorf("go.mod:\n%s", gomod)
	}
	goIn(t, dir, "vet", "./...")
	if out := goIn(t, dir, "test", "-count=1", "-v", "./..."); !strings.Contains(out, "--- PASS: TestPayloadsAreUppercasedAndEmptyOnesDropped") {
		t.Errorf("go test did not run the handler's test:\n%s", out)
	}
	pipeline := filepath.Join(dir, "pipeline.yaml")
	if code, out, errs := runArgs("validate", "--handlers", pipeline); code != 0 || out != pipeline+": ok (shout)\n" {
		t.Errorf("validate --handlers: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runArgs("run", "--memory", "--log-level", "warn", "--input", filepath.Join(dir, "input.txt"), "--until-drained", pipeline)
	if code != 0 || !strings.Contains(out, "shout-out HELLO\n") || !strings.Contains(out, "shout-out FROM SHOUT\n") {
		t.Errorf("run: exit %d\n%s%s", code, out, errs)
	}
	checkStreamrunTest(t, dir)
}

// checkStreamrunTest runs `streamrun test DIR` on a new project: its
// pipeline_test.yaml's cases (an ack and a drop, a crash) must pass.
func checkStreamrunTest(t *testing.T, dir string) {
	t.Helper()
	code, out, errs := runArgs("test", dir)
	passed := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "ok ") {
			passed++
		}
	}
	if code != 0 || !strings.HasSuffix(out, "PASS (2 cases)\n") || passed != 2 {
		t.Errorf("streamrun test %s: exit %d\n%s%s", dir, code, out, errs)
	}
}

// The module path is the flag's, and a second `new` into the same
// directory is refused without touching it.
func TestNewGoHandlerModuleAndNoOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if code, out, errs := runArgs("new", "handler", "p", "--lang", "go", "--dir", dir, "--module", "example.com/team/p", "--sdk", repoRoot(t)); code != 0 {
		t.Fatalf("new: exit %d\n%s%s", code, out, errs)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.HasPrefix(string(gomod), "module example.com/team/p\n") {
		t.Errorf("go.mod:\n%s", gomod)
	}
	if code, _, errs := runArgs("new", "handler", "p", "--lang", "python", "--dir", dir); code != 2 || !strings.Contains(errs, "exists and is not empty") {
		t.Errorf("second new: exit %d %s", code, errs)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "go.mod")); string(again) != string(gomod) {
		t.Error("a refused new changed go.mod")
	}
}

// `streamrun new handler --lang python` writes a script whose pytest
// tests pass with the SDK's fixture, and whose pipeline validates, runs
// and passes its `streamrun test` cases, in the Python CI sets up (STREAMRUN_PYTHON_SDK: a venv with the
// SDK and pytest, standing in for the project's .venv).
func TestNewPythonHandlerPassesItsOwnTests(t *testing.T) {
	py := os.Getenv("STREAMRUN_PYTHON_SDK")
	if py == "" {
		t.Skip("STREAMRUN_PYTHON_SDK is not set: this test runs a Python handler's pytest and needs a Python with sdk/python " +
			"and pytest installed (STREAMRUN_PYTHON_SDK=$(scripts/python-sdk-env))")
	}
	dir := filepath.Join(t.TempDir(), "shout-py")
	code, out, errs := runArgs("new", "handler", "shout-py", "--lang", "python", "--dir", dir, "--sdk", repoRoot(t))
	if code != 0 {
		t.Fatalf("new: exit %d\n%s%s", code, out, errs)
	}
	req, _ := os.ReadFile(filepath.Join(dir, "requirements.txt"))
	if !strings.Contains(string(req), "streamrun @ file://"+filepath.ToSlash(repoRoot(t))+"/sdk/python\n") {
		t.Errorf("requirements.txt:\n%s", req)
	}
	// The venv of the README's first command, made by CI instead.
	venv := filepath.Dir(filepath.Dir(py))
	if err := os.Symlink(venv, filepath.Join(dir, ".venv")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, ".venv", "bin", "python"), "-m", "pytest", "-v", "-p", "no:cacheprovider")
	cmd.Dir = dir
	pyOut, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(pyOut), "test_payloads_are_uppercased_and_empty_ones_dropped PASSED") {
		t.Fatalf("pytest: %v\n%s", err, pyOut)
	}
	pipeline := filepath.Join(dir, "pipeline.yaml")
	if code, out, errs := runArgs("validate", "--handlers", pipeline); code != 0 || out != pipeline+": ok (shout-py)\n" {
		t.Errorf("validate --handlers: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runArgs("run", "--memory", "--log-level", "warn", "--input", filepath.Join(dir, "input.txt"), "--until-drained", pipeline)
	if code != 0 || !strings.Contains(out, "shout-py-out HELLO\n") || !strings.Contains(out, "shout-py-out FROM SHOUT-PY\n") {
		t.Errorf("run: exit %d\n%s%s", code, out, errs)
	}
	checkStreamrunTest(t, dir)
}
