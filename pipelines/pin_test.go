package pipelines_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
)

// handler.sha256 must be 64 hex digits and pins a plugin or a script,
// not a package; a pinned file whose digest differs is an error of the
// file at load, naming the file, the pinned and the actual digest.
func TestHandlerPin(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "h")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	actual, err := pipelines.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("0", 64)
	for _, c := range []struct{ handler, want string }{
		{"plugin: ./h\n      sha256: xyz", `pipelines[0].handler.sha256: "xyz": want 64 hex digits`},
		{"package: ./pkg\n      sha256: " + actual, "pipelines[0].handler.sha256: pins a plugin binary or a script"},
		{"plugin: ./h\n      sha256: " + other, "pipelines[0].handler.sha256: handler " + bin + ": SHA-256 is " + actual + ", but handler.sha256 pins " + other},
		{"plugin: ./h\n      sha256: " + strings.ToUpper(actual), ""},
	} {
		file := filepath.Join(dir, "p.yaml")
		yaml := "pipelines:\n  - name: p\n    source: {topics: [in], subscription: s}\n    handler:\n      " + c.handler + "\n"
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := pipelines.Load(file, func(string) (string, bool) { return "", false })
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.handler, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.handler, err, c.want)
		}
	}
	// At run time: VerifyPin says the same, as a *PinError.
	h := pipelines.Handler{Plugin: bin, SHA256: other}
	var pe *pipelines.PinError
	if err := h.VerifyPin(); !errors.As(err, &pe) || pe.File != bin || pe.Expected != other || pe.Actual != actual {
		t.Fatalf("VerifyPin: %v", err)
	}
}
