package runtime

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeModule writes a small module: a main package ./cmd/hello that
// prints what package ./greet returns.
func writeModule(t *testing.T, greeting string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":            "module example.com/hello\n\ngo 1.22\n",
		"cmd/hello/main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/hello/greet\"\n)\n\nfunc main() { fmt.Println(greet.Greeting()) }\n",
		"greet/greet.go":    "package greet\n\nfunc Greeting() string { return \"" + greeting + "\" }\n",
		"unused/unused.go":  "package unused\n\nconst X = 1\n",
	}
	for name, body := range files {
		writeFile(t, filepath.Join(dir, name), body)
	}
	return dir
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runBinary(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(path).Output()
	if err != nil {
		t.Fatalf("run %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

func TestBuildHandlerCachesByContent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mod := writeModule(t, "hello one")
	opts := BuildOptions{CacheDir: t.TempDir(), Dir: mod}

	first, err := BuildHandler(ctx, "./cmd/hello", opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached {
		t.Fatal("first build reported a cache hit in an empty cache")
	}
	if got := runBinary(t, first.Path); got != "hello one" {
		t.Fatalf("binary says %q, want %q", got, "hello one")
	}
	fi1, err := os.Stat(first.Path)
	if err != nil {
		t.Fatal(err)
	}

	// Same content: the same binary, not rebuilt.
	second, err := BuildHandler(ctx, "./cmd/hello", opts)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || second.Hash != first.Hash || second.Path != first.Path {
		t.Fatalf("second build: %+v, want a cache hit of %+v", second, first)
	}
	fi2, err := os.Stat(second.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi1, fi2) || !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Fatal("the cached binary was replaced on a cache hit")
	}

	// A package the handler does not import changes nothing.
	writeFile(t, filepath.Join(mod, "unused/unused.go"), "package unused\n\nconst X = 2\n")
	if b, err := BuildHandler(ctx, "./cmd/hello", opts); err != nil || !b.Cached || b.Hash != first.Hash {
		t.Fatalf("after editing an unimported package: %+v, %v; want the cached binary", b, err)
	}

	// A changed imported package of the module: a new hash and binary.
	writeFile(t, filepath.Join(mod, "greet/greet.go"), "package greet\n\nfunc Greeting() string { return \"hello two\" }\n")
	third, err := BuildHandler(ctx, "./cmd/hello", opts)
	if err != nil {
		t.Fatal(err)
	}
	if third.Cached || third.Hash == first.Hash || third.Path == first.Path {
		t.Fatalf("after a source change: %+v, want a new build (first %+v)", third, first)
	}
	if got := runBinary(t, third.Path); got != "hello two" {
		t.Fatalf("rebuilt binary says %q, want %q", got, "hello two")
	}
	// The old binary stays, for hosts still running it.
	if got := runBinary(t, first.Path); got != "hello one" {
		t.Fatalf("old binary says %q", got)
	}

	// go.mod is part of the content.
	writeFile(t, filepath.Join(mod, "go.mod"), "module example.com/hello\n\ngo 1.23\n")
	if b, err := BuildHandler(ctx, "./cmd/hello", opts); err != nil || b.Cached || b.Hash == third.Hash {
		t.Fatalf("after a go.mod change: %+v, %v; want a new build", b, err)
	}
}

func TestBuildHandlerErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mod := writeModule(t, "hi")
	opts := BuildOptions{CacheDir: t.TempDir(), Dir: mod}
	for _, tc := range []struct{ pkg, want string }{
		{"./greet", "not a main package"},
		{"./nowhere", "nowhere"},
	} {
		_, err := BuildHandler(ctx, tc.pkg, opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("BuildHandler(%s): %v, want an error containing %q", tc.pkg, err, tc.want)
		}
	}
	writeFile(t, filepath.Join(mod, "greet/greet.go"), "package greet\n\nfunc Greeting() string { return 1 }\n")
	if _, err := BuildHandler(ctx, "./cmd/hello", opts); err == nil || !strings.Contains(err.Error(), "greet.go") {
		t.Errorf("a compile error: %v, want the compiler's message naming greet.go", err)
	}
	entries, _ := os.ReadDir(opts.CacheDir)
	for _, e := range entries {
		sub, _ := os.ReadDir(filepath.Join(opts.CacheDir, e.Name()))
		for _, f := range sub {
			t.Errorf("a failed build left %s/%s in the cache", e.Name(), f.Name())
		}
	}
}
