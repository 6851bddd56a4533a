package pipelinetest

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Find without arguments looks in the current directory, as go test does,
// skipping testdata.
func TestFindWithoutArgsIsTheCurrentDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a_test.yaml", "sub/b_test.yml", "testdata/c_test.yaml", "pipeline.yaml"} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	files, err := Find(nil)
	if want := []string{"a_test.yaml", filepath.Join("sub", "b_test.yml")}; err != nil || !slices.Equal(files, want) {
		t.Errorf("Find(nil) = %q, %v; want %q", files, err, want)
	}
}

// WriteJUnitFile writes the JUnit XML to a file; a file it cannot make
// is an error.
func TestWriteJUnitFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junit.xml")
	results := []Result{{File: "f_test.yaml", Case: "ok", Took: time.Millisecond}, {File: "f_test.yaml", Case: "bad", Failures: []string{"outputs to x: 1 missing"}}}
	if err := WriteJUnitFile(path, results); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b, &got); err != nil || len(got.Suites) != 1 || len(got.Suites[0].Cases) != 2 {
		t.Fatalf("the file: %v\n%s", err, b)
	}
	if err := WriteJUnitFile(filepath.Join(path, "no", "dir.xml"), results); err == nil {
		t.Error("a file in a directory that is a file: no error")
	}
}
