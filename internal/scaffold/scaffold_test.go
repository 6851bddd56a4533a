package scaffold_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamrun/streamrun/internal/scaffold"
)

// A project whose making fails part way (here `go mod tidy`, with a go
// command that is not there) leaves nothing behind: neither the project
// nor the directory it was being made in.
func TestAFailureLeavesNothingBehind(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "p")
	sdk, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	_, err = scaffold.New(context.Background(), scaffold.Options{Name: "p", Lang: "go", Dir: dir, SDK: sdk, Go: filepath.Join(parent, "no-go")})
	if err == nil || !strings.Contains(err.Error(), "go mod tidy") || errors.Is(err, scaffold.ErrUsage) {
		t.Fatalf("err = %v: want go mod tidy's failure, not a usage error", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// Without a checkout, a project requires the release it is told: the
// Python SDK from the release's tag in the repository.
func TestWithoutACheckoutTheReleaseIsRequired(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	files, err := scaffold.New(context.Background(), scaffold.Options{Name: "p", Lang: "python", Dir: dir, Version: "v1.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Errorf("files %v", files)
	}
	req, err := os.ReadFile(filepath.Join(dir, "requirements.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(req), "\nstreamrun @ git+https://github.com/streamrun/streamrun@v1.2.0#subdirectory=sdk/python\n") {
		t.Errorf("requirements.txt:\n%s", req)
	}
	if _, err := scaffold.New(context.Background(), scaffold.Options{Name: "q", Lang: "go", Dir: filepath.Join(t.TempDir(), "q")}); !errors.Is(err, scaffold.ErrUsage) ||
		!strings.Contains(err.Error(), "--sdk DIR") {
		t.Errorf("neither a checkout nor a release: %v", err)
	}
}

func TestFindSDKFindsTheCheckoutAbove(t *testing.T) {
	want, _ := filepath.Abs("../..")
	if got, ok := scaffold.FindSDK("."); !ok || got != want {
		t.Errorf("FindSDK(.) = %q, %v; want %q", got, ok, want)
	}
	if got, ok := scaffold.FindSDK(t.TempDir()); ok {
		t.Errorf("FindSDK(a temporary directory) = %q", got)
	}
}
