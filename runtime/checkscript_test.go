package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin/host"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// CheckScript tells an interpreter that has the Python SDK from one that
// has not, quoting what the interpreter said, before any plugin starts.
func TestCheckScriptSaysWhenThePythonLacksTheSDK(t *testing.T) {
	ctx := context.Background()
	h := pythonScript(t, "examples/plugins/python/uppercase/uppercase.py", nil)
	if err := streamrun.CheckScript(ctx, h); err != nil {
		t.Fatalf("the SDK's own venv: %v", err)
	}
	// The venv's base interpreter has no SDK (unless it was installed
	// there too).
	base := baseInterpreter(t, pythonSDK(t))
	if exec.Command(base, "-c", "import streamrun").Run() == nil {
		t.Skipf("%s has the SDK installed itself", base)
	}
	h.Python = base
	err := streamrun.CheckScript(ctx, h)
	if !errors.Is(err, streamrun.ErrNoSDK) || !strings.Contains(err.Error(), "ModuleNotFoundError: No module named 'streamrun'") ||
		!strings.HasPrefix(err.Error(), base+" cannot import the streamrun SDK") {
		t.Fatalf("the base interpreter: %v", err)
	}
	t.Log(err)
}

// baseInterpreter is the interpreter a venv's python was made from (its
// pyvenv.cfg's home).
func baseInterpreter(t *testing.T, venvPython string) string {
	f, err := os.Open(filepath.Join(filepath.Dir(filepath.Dir(venvPython)), "pyvenv.cfg"))
	if err != nil {
		t.Skipf("%s is not a venv's: %v", venvPython, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.TrimSpace(k) == "home" {
			return filepath.Join(strings.TrimSpace(v), "python3")
		}
	}
	t.Skipf("no home in %s's pyvenv.cfg", venvPython)
	return ""
}

// With no Python at all: an interpreter that cannot import the SDK, one
// that cannot run, and CheckScripts placing each in the file.
func TestCheckScriptsPlacesEachFailureInTheFile(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "h.py")
	nosdk := filepath.Join(dir, "nosdk")
	broken := filepath.Join(dir, "broken")
	for name, text := range map[string]string{
		script: "import streamrun\n",
		nosdk:  "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\necho \"ModuleNotFoundError: No module named 'streamrun'\" >&2\nexit 1\n",
		broken: "not a program\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := "pipelines:\n" +
		"  - name: a\n    source: {topics: [in], subscription: s}\n    handler: {script: h.py, python: ./nosdk}\n" +
		"  - name: b\n    source: {topics: [in], subscription: s}\n    handler: {script: h.py, python: ./broken}\n" +
		"  - name: c\n    source: {topics: [in], subscription: s}\n    handler: {plugin: ./nosdk}\n"
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := pipelines.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = streamrun.CheckScripts(context.Background(), f)
	var errs pipelines.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("CheckScripts: %v, want two errors", err)
	}
	if e := errs[0]; e.Line != 4 || e.Path != "pipelines[0].handler.python" ||
		!strings.Contains(e.Msg, "cannot import the streamrun SDK: ModuleNotFoundError: No module named 'streamrun'") {
		t.Errorf("no SDK: %v", e)
	}
	if e := errs[1]; e.Line != 7 || e.Path != "pipelines[1].handler.python" || !strings.Contains(e.Msg, "exec format error") {
		t.Errorf("an interpreter that cannot run: %v", e)
	}
	t.Log(err)
	if err := streamrun.CheckScript(context.Background(), f.Pipelines[0].Handler); !errors.Is(err, streamrun.ErrNoSDK) {
		t.Errorf("CheckScript: %v, want ErrNoSDK", err)
	}
}

// CheckHandler starts a handler, hands it its config and closes it,
// without a broker: a config it refuses is host.ErrInit in its own
// words; one that does not start says why; a pipeline of steps only has
// nothing to check.
func TestCheckHandlerHandsAHandlerItsConfig(t *testing.T) {
	ctx := context.Background()
	p := pipelines.Pipeline{Name: "shout", Handler: pipelines.Handler{Plugin: example("uppercase"),
		Config: map[string]any{"output": "out", "smal": 3}}}
	err := streamrun.CheckHandler(ctx, p, streamrun.CheckOptions{})
	if !errors.Is(err, host.ErrInit) || !strings.Contains(err.Error(), `unknown field "smal"`) {
		t.Fatalf("a config with a typo: %v, want ErrInit naming the key", err)
	}
	p.Handler.Config = map[string]any{"output": "out"}
	if err := streamrun.CheckHandler(ctx, p, streamrun.CheckOptions{}); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	// The handler's Close ran: the test handler logs it.
	recs := &testkit.Records{}
	p.Handler = self(testConfig{Output: "out"})
	if err := streamrun.CheckHandler(ctx, p, streamrun.CheckOptions{Logger: slog.New(recs.Handler(nil))}); err != nil {
		t.Fatalf("the test handler: %v", err)
	}
	if recs.Count("test handler closed") != 1 {
		t.Errorf("the handler's Close did not run:\n%s", recs)
	}
	dir := t.TempDir()
	nosdk := filepath.Join(dir, "python")
	if err := os.WriteFile(nosdk, []byte("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'streamrun'\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.Handler = pipelines.Handler{Script: "testdata/python/handler.py", Python: nosdk}
	err = streamrun.CheckHandler(ctx, p, streamrun.CheckOptions{})
	if err == nil || errors.Is(err, host.ErrInit) || !strings.Contains(err.Error(), "exited before its handshake (exit status 1)") ||
		!strings.Contains(err.Error(), "No module named 'streamrun'") {
		t.Fatalf("a script whose Python lacks the SDK: %v", err)
	}
	if err := streamrun.CheckHandler(ctx, pipelines.Pipeline{Name: "steps"}, streamrun.CheckOptions{}); err != nil {
		t.Errorf("a pipeline without a handler: %v", err)
	}
}
