package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelinetest"
)

// pythonSDKEnv names a Python with sdk/python installed, as in package
// runtime's tests: the examples with Python handlers run only with it.
const pythonSDKEnv = "STREAMRUN_PYTHON_SDK"

// TestTheExamplesPass: `streamrun test` passes every example's test
// file (CI runs this): the Go handlers' always, the Python ones' when
// STREAMRUN_PYTHON_SDK names a Python with the SDK.
func TestTheExamplesPass(t *testing.T) {
	files, err := pipelinetest.Find([]string{"../../examples"})
	if err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, path := range files {
		if python(t, path) && os.Getenv(pythonSDKEnv) == "" {
			t.Logf("%s skipped: its handler is Python; set %s=$(scripts/python-sdk-env) to run it", path, pythonSDKEnv)
			continue
		}
		run = append(run, path)
	}
	if len(run) < 5 {
		t.Fatalf("%d example test files to run: %v", len(run), run)
	}
	code, stdout, stderr := runArgs(append([]string{"test"}, run...)...)
	if code != 0 || strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "PASS") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, path := range run {
		if !strings.Contains(stdout, "ok    "+path+": ") {
			t.Errorf("no case of %s passed:\n%s", path, stdout)
		}
	}
}

// python reports whether a pipeline the test file at path runs has a
// Python handler.
func python(t *testing.T, path string) bool {
	t.Helper()
	f, err := pipelinetest.Load(path, func(k string) (string, bool) {
		if k == "STREAMRUN_PYTHON_SDK" {
			return "python3", true // any Python loads; one with the SDK runs
		}
		return os.LookupEnv(k)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Pipeline.Pipelines {
		if p.Handler.Script != "" {
			return true
		}
	}
	return false
}

// TestAWrongExpectationFailsWithADiff: a case whose expectations are
// wrong fails, exit status 1, saying what differs: the outputs as a
// diff (-want +got), an input's outcome; and the JUnit file says so too.
func TestAWrongExpectationFailsWithADiff(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wrong_test.yaml")
	src := `pipeline_file: ` + filepath.Join(repoRoot(t), "examples/pipelines/quickstart.yaml") + `
cases:
  - name: right
    inputs: [{key: a, text: hello}]
    expect:
      outputs: [{topic: quickstart-out, messages: [{key: a, text: HELLO}]}]
  - name: wrong
    inputs:
      - {key: a, text: hello}
      - {key: a, text: world, outcome: dead_letter, reason: bad}
    expect:
      outputs:
        - topic: quickstart-out
          messages: [{key: a, text: HELLO}, {key: a, text: "WORLD!"}, {text: MORE}]
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(dir, "results.xml")
	code, stdout, stderr := runArgs("test", "--junit", junit, path)
	want := `FAIL  ` + path + `: wrong (`
	diff := `)
        input 2: want dead_letter with a reason matching "bad", got ack
        outputs to quickstart-out (in order): want 3, got 2; -want +got:
            - #2 key "a" text "WORLD!"
            + #2 key "a" text "WORLD"
            - #3 text "MORE"
FAIL (1 of 2 cases failed)
`
	if code != 1 || !strings.Contains(stdout, "ok    "+path+": right (") || !strings.Contains(stdout, want) || !strings.HasSuffix(stdout, diff) {
		t.Errorf("exit %d, want 1; stdout:\n%s\nwant it to end with:\n%s%s\nstderr:\n%s", code, stdout, want, diff, stderr)
	}
	x, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`<testsuite name="` + path + `" tests="2" failures="1"`, `<testcase name="right" classname="` + path + `"`,
		`<failure message="input 2: want dead_letter with a reason matching &#34;bad&#34;, got ack">`, `- #2 key &#34;a&#34; text &#34;WORLD!&#34;`} {
		if !strings.Contains(string(x), w) {
			t.Errorf("JUnit XML lacks %s:\n%s", w, x)
		}
	}
}

// TestAWrongStateFailsWithADiff: the keyed state after a case is
// checked key by key; a wrong one fails the case with -want +got lines,
// the values as stored.
func TestAWrongStateFailsWithADiff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state_test.yaml")
	src := `pipeline_file: ` + filepath.Join(repoRoot(t), "examples/pipelines/counter.yaml") + `
cases:
  - name: counts
    state: {alice: 2}
    inputs: [{key: alice, text: click}, {key: bob, text: click}]
    expect:
      state: {alice: 4, carol: 1}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runArgs("test", path)
	want := `)
        state after: -want +got:
            - alice: 4
            + alice: "3"
            + bob: "1"
            - carol: 1
FAIL (1 of 1 cases failed)
`
	if code != 1 || !strings.HasPrefix(stdout, "FAIL  "+path+": counts (") || !strings.HasSuffix(stdout, want) {
		t.Errorf("exit %d, want 1; stdout:\n%s\nwant it to end with:\n%s\nstderr:\n%s", code, stdout, want, stderr)
	}
}

// TestABadTestFileIsReportedAtItsPlace: a typo in a test file, or a
// pipeline its pipeline file lacks, is FILE:LINE:COL with the field, exit
// status 2, and no case runs.
func TestABadTestFileIsReportedAtItsPlace(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(repoRoot(t), "examples/pipelines/quickstart.yaml")
	for _, c := range []struct{ src, want string }{
		{"pipeline_file: " + pf + "\ncases:\n  - name: c\n    inputs:\n      - {text: a, outcom: ack}\n",
			":5:19: cases[0].inputs[0].outcom: unknown field (did you mean outcome?)\n"},
		{"pipeline_file: " + pf + "\npipelines: [shout, shuot]\ncases:\n  - name: c\n    inputs: [{text: a}]\n",
			`:2:20: pipelines[1]: ` + pf + ` has no pipeline "shuot" (it has shout)` + "\n"},
		{"pipeline_file: " + pf + "\ncases:\n  - name: c\n    inputs: [{text: a}]\n    faults: [{crash: 2}]\n",
			":5:22: cases[0].faults[0].crash: 2: want an input's number, 1 to 1\n"},
	} {
		path := filepath.Join(dir, "bad_test.yaml")
		if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runArgs("test", path)
		if code != 2 || stderr != path+c.want || strings.Contains(stdout, "ok ") {
			t.Errorf("exit %d, stderr %q; want 2 and %q\nstdout:\n%s", code, stderr, path+c.want, stdout)
		}
	}
}
