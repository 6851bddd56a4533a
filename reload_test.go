package streamrun

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// What Watch watches: a file's content, a plugin binary, and the files
// of a Go-package handler's directory; nothing else moves the
// fingerprint.
func TestWatchFingerprint(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "p.yaml", "pipelines: []\n")
	bin := writeFile(t, dir, "handler", "#!/bin/sh\n")
	pkg := filepath.Join(dir, "pkg")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	src := writeFile(t, pkg, "main.go", "package main\n")
	l := &Files{}
	l.pipelines = append(l.pipelines, pipelineWith(bin, ""), pipelineWith("", pkg))
	base := fingerprint([]string{file}, l)
	if again := fingerprint([]string{file}, l); again != base {
		t.Fatal("the fingerprint moved with nothing changed")
	}
	for _, change := range []struct {
		what string
		path string
		body string
	}{
		{"the file", file, "pipelines: [] # edited\n"},
		{"the binary", bin, "#!/bin/sh\nexit 0\n"},
		{"the package's source", src, "package main // v2\n"},
	} {
		if err := os.WriteFile(change.path, []byte(change.body), 0o644); err != nil {
			t.Fatal(err)
		}
		now := fingerprint([]string{file}, l)
		if now == base {
			t.Errorf("a change of %s did not move the fingerprint", change.what)
		}
		base = now
	}
	writeFile(t, dir, "unrelated", "x")
	if now := fingerprint([]string{file}, l); now != base {
		t.Error("an unrelated file moved the fingerprint")
	}
}

func pipelineWith(plugin, pkg string) pipelines.Pipeline {
	return pipelines.Pipeline{Handler: pipelines.Handler{Plugin: plugin, Package: pkg}}
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
