package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// BuildOptions say where handler packages are built and cached.
type BuildOptions struct {
	// CacheDir holds one binary per content hash, CacheDir/HASH/handler.
	// Default: os.UserCacheDir()/streamrun/handlers (a temporary directory
	// when the user has no cache directory).
	CacheDir string
	// Dir is the directory the go command runs in, which relative package
	// paths are read from. Default: the current directory.
	Dir string
	// Go is the go command. Default "go".
	Go string
	// Logger is told of builds and cache hits. Default: discards.
	Logger *slog.Logger
}

// Built is a handler package built into a binary.
type Built struct {
	// Path of the binary.
	Path string
	// Hash of everything the binary is built from (see HashPackage): the
	// same hash is the same binary, a new one a changed handler.
	Hash string
	// Cached reports that the binary was already in the cache.
	Cached bool
}

// DefaultHandlerCacheDir is BuildOptions.CacheDir's default.
func DefaultHandlerCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil || dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "streamrun", "handlers")
}

func (o BuildOptions) withDefaults() BuildOptions {
	if o.CacheDir == "" {
		o.CacheDir = DefaultHandlerCacheDir()
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// BuildHandler builds Go package pkg (a path such as ./handlers/enrich,
// or an import path) into a binary, unless the cache holds one built from
// the same content: a second start does not rebuild, and a changed source
// gives a new binary (and a new Hash). Binaries land in the cache
// atomically, so hosts sharing a cache may build side by side.
func BuildHandler(ctx context.Context, pkg string, opts BuildOptions) (Built, error) {
	opts = opts.withDefaults()
	name, opts, err := localPackage(pkg, opts)
	if err != nil {
		return Built{}, err
	}
	hash, err := HashPackage(ctx, name, opts)
	if err != nil {
		return Built{}, err
	}
	dir := filepath.Join(opts.CacheDir, hash)
	bin := filepath.Join(dir, "handler")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		opts.Logger.Debug("handler binary cached", "package", pkg, "hash", hash[:12], "path", bin)
		return Built{Path: bin, Hash: hash, Cached: true}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Built{}, fmt.Errorf("build %s: cache: %w", pkg, err)
	}
	tmp, err := os.CreateTemp(dir, ".build-*")
	if err != nil {
		return Built{}, fmt.Errorf("build %s: cache: %w", pkg, err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName) // gone after the rename; left by a failure
	opts.Logger.Info("building the handler", "package", pkg, "hash", hash[:12])
	if _, err := goCmd(ctx, opts, "build", "-o", tmpName, name); err != nil {
		return Built{}, err
	}
	if err := os.Rename(tmpName, bin); err != nil {
		return Built{}, fmt.Errorf("build %s: cache: %w", pkg, err)
	}
	return Built{Path: bin, Hash: hash}, nil
}

// HashPackage is the content hash of Go package pkg as a handler binary:
// the Go files (and embedded files) of pkg and of every package it
// imports from its own module or from a module replaced by a local
// directory, the go.mod and go.sum of those modules, the path and version
// of every other module it imports (the module cache never changes a
// version's files), the Go version, GOOS, GOARCH, GOFLAGS and
// CGO_ENABLED.
func HashPackage(ctx context.Context, pkg string, opts BuildOptions) (string, error) {
	opts = opts.withDefaults()
	pkg, opts, err := localPackage(pkg, opts)
	if err != nil {
		return "", err
	}
	env, err := goCmd(ctx, opts, "env", "GOVERSION", "GOOS", "GOARCH", "GOFLAGS", "CGO_ENABLED")
	if err != nil {
		return "", err
	}
	out, err := goCmd(ctx, opts, "list", "-deps", "-json=ImportPath,Name,Dir,Standard,GoFiles,CgoFiles,EmbedFiles,Module,Error,DepsErrors", pkg)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "streamrun handler v1\n%s", env)
	modFiles := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	var last listedPackage
	for {
		var lp listedPackage
		if err := dec.Decode(&lp); err == io.EOF {
			break
		} else if err != nil {
			return "", fmt.Errorf("hash %s: go list: %w", pkg, err)
		}
		if lp.Error != nil {
			return "", fmt.Errorf("package %s: %s", lp.ImportPath, lp.Error.Err)
		}
		if len(lp.DepsErrors) > 0 {
			return "", fmt.Errorf("package %s: %s", lp.ImportPath, lp.DepsErrors[0].Err)
		}
		last = lp
		if lp.Standard {
			continue
		}
		m := lp.Module
		if m == nil {
			return "", fmt.Errorf("package %s is in no module", lp.ImportPath)
		}
		if local, dir := m.local(); !local {
			fmt.Fprintf(h, "module %s@%s\n", m.Path, m.Version)
			continue
		} else if dir != "" {
			for _, f := range []string{"go.mod", "go.sum"} {
				modFiles[filepath.Join(dir, f)] = true
			}
		}
		fmt.Fprintf(h, "package %s\n", lp.ImportPath)
		files := slices.Concat(lp.GoFiles, lp.CgoFiles, lp.EmbedFiles)
		slices.Sort(files)
		for _, f := range files {
			if err := hashFile(h, filepath.Join(lp.Dir, f), f); err != nil {
				return "", fmt.Errorf("hash %s: %w", pkg, err)
			}
		}
	}
	// -deps lists the package itself last.
	if last.Name != "main" {
		return "", fmt.Errorf("package %s is not a main package (it is package %s): a handler is a program that calls plugin.Serve", pkg, last.Name)
	}
	for _, f := range slices.Sorted(func(yield func(string) bool) {
		for f := range modFiles {
			if !yield(f) {
				return
			}
		}
	}) {
		if err := hashFile(h, f, f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("hash %s: %w", pkg, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// localPackage turns a package given as a directory (absolute, or
// relative to opts.Dir) into "." built from that directory, so that the
// go command finds the package's own module wherever the host runs.
// Import paths are left to opts.Dir's module.
func localPackage(pkg string, opts BuildOptions) (string, BuildOptions, error) {
	rel := pkg == "." || pkg == ".." || strings.HasPrefix(pkg, "./") || strings.HasPrefix(pkg, "../")
	if !rel && !filepath.IsAbs(pkg) {
		return pkg, opts, nil
	}
	dir := pkg
	if rel && opts.Dir != "" {
		dir = filepath.Join(opts.Dir, pkg)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", opts, fmt.Errorf("package %s: %w", pkg, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", opts, fmt.Errorf("package %s: no such directory %s", pkg, dir)
	}
	opts.Dir = dir
	return ".", opts, nil
}

type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	EmbedFiles []string
	Module     *listedModule
	Error      *struct{ Err string }
	DepsErrors []struct{ Err string }
}

type listedModule struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *listedModule
}

// local reports whether the module's files are on disk outside the module
// cache (the main module, or one replaced by a directory), and where.
func (m *listedModule) local() (bool, string) {
	switch {
	case m.Replace != nil:
		return m.Replace.Version == "", m.Replace.Dir
	case m.Main || m.Version == "":
		return true, m.Dir
	}
	return false, ""
}

// hashFile adds name and the contents of path to h.
func hashFile(h io.Writer, path, name string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "file %s %d\n", name, len(b))
	_, err = h.Write(b)
	return err
}

// goCmd runs the go command and returns its standard output; its error
// carries the command's own words.
func goCmd(ctx context.Context, opts BuildOptions, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, opts.Go, args...)
	cmd.Dir = opts.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 4000 {
			msg = msg[:4000] + "..."
		}
		return nil, fmt.Errorf("%s %s: %w\n%s", opts.Go, strings.Join(args, " "), err, msg)
	}
	return out, nil
}
