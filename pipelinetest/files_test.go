package pipelinetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// RunFiles goes on past an invalid file, reports it as a *FileError and
// says so in the summary, runs the next file's cases and reports each.
func TestRunFilesGoesOnPastAnInvalidFile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a case on an embedded broker")
	}
	bad := filepath.Join(t.TempDir(), "bad_test.yaml")
	if err := os.WriteFile(bad, []byte("pipeline_file: nowhere.yaml\ncases: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join("..", "examples", "tests", "quickstart-steps_test.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var reported []Result
	var errPaths []string
	s := RunFiles(ctx, []string{bad, good}, Options{}, func(r Result) { reported = append(reported, r) },
		func(path string, err error) {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Errorf("%s: %v is not a *FileError", path, err)
			}
			errPaths = append(errPaths, path)
		})
	if !s.Invalid || s.Broken || len(errPaths) != 1 || errPaths[0] != bad {
		t.Errorf("summary %+v, errors of %v; want the bad file invalid", s, errPaths)
	}
	if len(s.Results) == 0 || len(reported) != len(s.Results) || s.Failed != 0 {
		t.Fatalf("results %+v, reported %d", s.Results, len(reported))
	}
	for _, r := range s.Results {
		if r.File != good && filepath.Clean(r.File) != filepath.Clean(good) {
			t.Errorf("a result of %s", r.File)
		}
	}
}

// Once ctx is done no further file runs.
func TestRunFilesStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := RunFiles(ctx, []string{filepath.Join("..", "examples", "tests", "quickstart-steps_test.yaml")}, Options{}, nil, nil)
	if len(s.Results) != 0 || s.Invalid || s.Broken {
		t.Errorf("summary after cancel: %+v", s)
	}
}
