package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A module made by WriteModule builds offline against this checkout: a
// handler importing the SDK, with GOPROXY=off, needs nothing that
// building the repository did not put in the module cache.
func TestAWrittenModuleBuildsOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a handler")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteModule(dir, "offlinetest", repo); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "module offlinetest\n") || !strings.Contains(string(b), "replace "+modulePath+" => "+repo) {
		t.Fatalf("go.mod:\n%s", b)
	}
	src := `package main

import "github.com/streamrun/streamrun/plugin"

func main() { _ = plugin.Serve }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("offline build: %v\n%s", err, out)
	}
}

// A go.mod that is not this repository's is refused, not rewritten.
func TestWriteModuleRefusesAnotherModule(t *testing.T) {
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteModule(t.TempDir(), "x", other)
	if err == nil || !strings.Contains(err.Error(), "does not start with") {
		t.Fatalf("err = %v, want a refusal naming the go.mod", err)
	}
}
