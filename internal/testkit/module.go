package testkit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// modulePath is this repository's module path, the first line of its
// go.mod.
const modulePath = "github.com/streamrun/streamrun"

// WriteModule makes dir a Go module named name that builds against the
// repository at repo (its go.mod and go.sum, this checkout's code through
// a replace directive), for tests that build a handler of their own with
// GOPROXY=off.
//
// The module requires everything the repository's go.mod requires, at the
// same versions: its build then needs the go.mod files that building the
// repository itself needs, which the module cache holds once the
// repository has been built. Requiring the repository alone would make
// the go command walk the requirements of its dependencies' own go.mod
// files, some of which (an older version one of them names) a fresh
// module cache does not hold, and the offline build would fail on them.
func WriteModule(dir, name, repo string) error {
	gomod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		return err
	}
	first, rest, ok := bytes.Cut(gomod, []byte("\n"))
	if !ok || string(bytes.TrimSpace(first)) != "module "+modulePath {
		return fmt.Errorf("%s/go.mod does not start with %q", repo, "module "+modulePath)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "module %s\n", name)
	b.Write(rest)
	fmt.Fprintf(&b, "\nrequire %s v0.0.0\n\nreplace %s => %s\n", modulePath, modulePath, repo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
}
