package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repoLines returns the lines of a file at the repository's root that
// are neither blank nor comments.
func repoLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// The data directories users make by following the README (`broker
// --data ./data`) and `run`'s default (./.streamrun) stay out of git and
// out of the Docker build context.
func TestDataDirectoriesAreIgnored(t *testing.T) {
	docker := repoLines(t, ".dockerignore")
	for _, want := range []string{"/data/", "/.streamrun/"} {
		if !slices.Contains(docker, want) {
			t.Errorf(".dockerignore lacks %s: %v", want, docker)
		}
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: .gitignore not checked")
	}
	for _, p := range []string{"data/topic/00000.seg", ".streamrun/data/x"} {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", p)
		cmd.Dir = filepath.Join("..", "..")
		if err := cmd.Run(); err != nil {
			t.Errorf("git does not ignore %s: %v", p, err)
		}
	}
}

// The image: built by scripts/build-release (what CI runs), run as a
// non-root user, with a health check, `streamrun run` as the entry point
// (image_test.go checks the check asks what the entry point serves).
func TestDockerfileUsesTheTestedBuild(t *testing.T) {
	df := strings.Join(repoLines(t, "Dockerfile"), "\n")
	for _, want := range []string{
		"scripts/build-release /out",
		"USER nonroot",
		"HEALTHCHECK",
		`ENTRYPOINT ["/usr/local/bin/streamrun", "run", `,
		"/usr/local/lib/streamrun/plugins/",
		"--advertised-host",
	} {
		if !strings.Contains(df, want) && !strings.Contains(strings.Join(readRaw(t, "Dockerfile"), "\n"), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The health check's command exists.
	if code, _, _ := runArgs("health", "--help"); code != 0 {
		t.Errorf("streamrun health --help: exit %d", code)
	}
}

func readRaw(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
