package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildPlugins builds the module's example plugins (examples/plugins/...)
// into a new temporary directory and returns it; the caller removes it.
// It is for a TestMain, before any test runs, so it takes no testing.TB.
func BuildPlugins() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	dir, err := os.MkdirTemp("", "streamrun-plugins-")
	if err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./examples/plugins/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("build the example plugins: %w\n%s", err, out)
	}
	return dir, nil
}
