package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestValidateRefusesEveryBadFile")

// Every file of the corpus is refused with exit status 2 and the message
// in its golden file (testdata/validate/NAME.golden; go test -run
// TestValidateRefusesEveryBadFile -update rewrites them).
func TestValidateRefusesEveryBadFile(t *testing.T) {
	t.Setenv("STREAMRUN_TEST_UNSET_URL", "")
	os.Unsetenv("STREAMRUN_TEST_UNSET_URL")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/validate/*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("%d bad files (%v): the corpus should hold at least 30", len(files), err)
	}
	// Generated rather than committed: a file over the size limit, and
	// one that is not there.
	tmp := t.TempDir()
	huge := filepath.Join(tmp, "huge.yaml")
	line := "# " + strings.Repeat("x", 97) + "\n"
	if err := os.WriteFile(huge, []byte("pipelines: []\n"+strings.Repeat(line, 2*pipelines.MaxFileSize/len(line))), 0o644); err != nil {
		t.Fatal(err)
	}
	files = append(files, huge, filepath.Join(tmp, "missing.yaml"))

	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runArgs("validate", path)
			got := strings.ReplaceAll(stderr, tmp, "$TMP")
			got = strings.ReplaceAll(got, wd, ".")
			got = strings.ReplaceAll(got, filepath.Dir(filepath.Dir(wd)), "$REPO")
			if code != 2 || stdout != "" || !strings.HasPrefix(got, strings.ReplaceAll(path, tmp, "$TMP")+":") {
				t.Errorf("exit %d, stdout %q, stderr %q: want 2, nothing, errors naming the file", code, stdout, got)
			}
			golden := filepath.Join("testdata", "validate", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("stderr:\n%s\nwant (%s):\n%s", got, golden, want)
			}
		})
	}
}

func TestValidateAcceptsAGoodFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ok.yaml")
	src := "pipelines:\n  - name: shout\n    source: {topics: [in], subscription: s}\n    handler: {package: " + mustAbs(t, "../../examples/plugins/uppercase") + "}\n" +
		"  - name: count\n    source: {pattern: \"in-.*\", subscription: s}\n    handler: {package: " + mustAbs(t, "../../examples/plugins/uppercase") + "}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runArgs("validate", path)
	if code != 0 || stdout != path+": ok (shout, count)\n" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, _ := runArgs("validate", "-q", path); code != 0 || stdout != "" {
		t.Errorf("--quiet: exit %d, stdout %q", code, stdout)
	}
	// One bad file among good ones: all are checked, the status is 2.
	code, stdout, stderr = runArgs("validate", path, "testdata/validate/empty.yaml", path)
	if code != 2 || strings.Count(stdout, ": ok") != 2 || !strings.Contains(stderr, "empty.yaml:1:1: empty") {
		t.Errorf("mixed: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestValidateUsage(t *testing.T) {
	if code, _, stderr := runArgs("validate"); code != 2 || stderr != "streamrun validate: no file given\nRun 'streamrun validate --help' for usage.\n" {
		t.Errorf("no file: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runArgs("validate", "--frobnicate", "x.yaml"); code != 2 || stderr != "streamrun validate: unknown flag: --frobnicate\nRun 'streamrun validate --help' for usage.\n" {
		t.Errorf("bad flag: exit %d, %q", code, stderr)
	}
	if code, stdout, stderr := runArgs("validate", "--help"); code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: streamrun validate") || !strings.Contains(stdout, "Flags:") {
		t.Errorf("--help: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, _ := runArgs("help", "validate"); code != 0 || !strings.Contains(stdout, "Usage: streamrun validate") {
		t.Errorf("help validate: exit %d, %q", code, stdout)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Every shipped example pipeline validates (CI runs this).
func TestValidateAcceptsTheExamples(t *testing.T) {
	examples, err := filepath.Glob("../../examples/pipelines/*.yaml")
	if err != nil || len(examples) < 5 {
		t.Fatalf("%d examples (%v)", len(examples), err)
	}
	code, stdout, stderr := runArgs(append([]string{"validate"}, examples...)...)
	if code != 0 || strings.Count(stdout, ": ok (") != len(examples) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// validate --handlers starts each handler with its config, without a
// broker: a typo in the handler's own config is refused at its key, with
// exit status 2; plain validate does not start handlers.
func TestValidateHandlersFindsATypoInAHandlersConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	src := "pipelines:\n  - name: shout\n    source: {topics: [in], subscription: s}\n    handler:\n      package: " +
		mustAbs(t, "../../examples/plugins/uppercase") + "\n      config:\n        output: out\n        smal: 3\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runArgs("validate", path); code != 0 || stdout != path+": ok (shout)\n" || stderr != "" {
		t.Errorf("without --handlers: exit %d, stdout %q, stderr %q; want it valid", code, stdout, stderr)
	}
	code, stdout, stderr := runArgs("validate", "--handlers", "--handler-cache", filepath.Join(dir, "cache"), path)
	want := path + `:8:15: pipelines[0].handler.config.smal: the handler refuses its config: config: json: unknown field "smal"` + "\n"
	if code != 2 || stdout != "" || stderr != want {
		t.Errorf("--handlers: exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
	}
}
