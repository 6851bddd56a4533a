// Package scaffold writes a new handler project, `streamrun new handler`:
// the handler, its unit test on the SDK's test kit (plugin/plugintest, or
// the Python SDK's streamrun_handler fixture), a pipeline file, an input
// to run it with, and a README with the commands. The files are
// templates embedded here (templates/go, templates/python); docs/new.md
// describes what comes out.
//
// The project depends on streamrun's SDK in one of two ways, chosen by
// Options.SDK: a local checkout (a Go replace line, a pip requirement on
// the checkout's sdk/python), which is what a development build of
// streamrun can offer, or the published release Options.Version.
package scaffold

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// ModulePath is the Go module of streamrun's SDK.
const ModulePath = "github.com/streamrun/streamrun"

// Langs are the languages New writes handlers in.
var Langs = []string{"go", "python"}

// ErrUsage marks the errors that are the caller's to fix (a bad name or
// language, a directory that is there already, an SDK directory that is
// not streamrun's): a command reports them as bad usage.
var ErrUsage = errors.New("bad usage")

// Options say what New writes and where.
type Options struct {
	// Name is the handler's name: the pipeline's, the directory's, the
	// topics' (NAME-in, NAME-out) and, for Go, the module's and the
	// binary's. Required: lower-case letters, digits and dashes, starting
	// with a letter, at most 40 characters (CheckName).
	Name string
	// Lang is "go" or "python". Required.
	Lang string
	// Dir is where the project goes; it must not exist, or be an empty
	// directory. Default: Name, in the current directory.
	Dir string
	// SDK is a local checkout of streamrun (the directory of its go.mod)
	// that the project uses the SDK from: a Go module gets a replace line
	// pointing there, a Python project a requirement on its sdk/python.
	// Default "": the published release Version.
	SDK string
	// Version is the release of the SDK a project without SDK requires
	// (a Go module version such as v1.2.0; the same tag for the Python
	// SDK). Required when SDK is "".
	Version string
	// Module is the Go module path. Default: Name. Go only.
	Module string
	// Go is the go command, run for `go mod tidy` (which fills go.sum,
	// from the module cache or GOPROXY). Default "go". Go only.
	Go string
}

// nameRE is CheckName's rule.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// CheckName says what is wrong with name as a handler's name, or nil.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: no handler name given", ErrUsage)
	case !nameRE.MatchString(name) || strings.HasSuffix(name, "-") || strings.Contains(name, "--"):
		return fmt.Errorf("%w: handler name %q: want lower-case letters, digits and single dashes, starting with a letter and ending with a letter or digit, at most 40 characters (it names the pipeline, the directory, the topics and the Go module)", ErrUsage, name)
	}
	return nil
}

// FindSDK returns the streamrun checkout that dir is in (the nearest
// directory at or above it whose go.mod is module ModulePath), and
// whether there is one.
func FindSDK(dir string) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		if isSDK(dir) == nil {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// isSDK says why dir is not a streamrun checkout, or nil.
func isSDK(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("%s has no go.mod: not a checkout of %s", dir, ModulePath)
	}
	if m := moduleLine(b); m != ModulePath {
		return fmt.Errorf("%s/go.mod is module %q, not %s", dir, m, ModulePath)
	}
	return nil
}

// moduleLine is the module path of a go.mod's text.
func moduleLine(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// goLine is the go directive of a go.mod's text, "" when it has none.
func goLine(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

func (o Options) withDefaults() (Options, error) {
	if err := CheckName(o.Name); err != nil {
		return o, err
	}
	switch o.Lang {
	case "go", "python":
	case "":
		return o, fmt.Errorf("%w: no language given: --lang go or --lang python", ErrUsage)
	default:
		return o, fmt.Errorf("%w: language %q: want go or python", ErrUsage, o.Lang)
	}
	if o.Dir == "" {
		o.Dir = o.Name
	}
	if o.Module == "" {
		o.Module = o.Name
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.SDK == "" && o.Version == "" {
		return o, fmt.Errorf("%w: no SDK to depend on: give a streamrun checkout (--sdk DIR), as a development build of streamrun has no published release to require", ErrUsage)
	}
	if o.SDK != "" {
		abs, err := filepath.Abs(o.SDK)
		if err != nil {
			return o, fmt.Errorf("%w: SDK %s: %v", ErrUsage, o.SDK, err)
		}
		o.SDK = abs
		if err := isSDK(abs); err != nil {
			return o, fmt.Errorf("%w: SDK: %v", ErrUsage, err)
		}
		if o.Lang == "python" {
			if _, err := os.Stat(filepath.Join(abs, "sdk", "python", "pyproject.toml")); err != nil {
				return o, fmt.Errorf("%w: SDK: %s has no sdk/python/pyproject.toml (the Python SDK)", ErrUsage, abs)
			}
		}
	}
	return o, nil
}

//go:embed all:templates
var templates embed.FS

// data is what the templates are given.
type data struct {
	Options
	// GoVersion is the go directive of the module written.
	GoVersion string
	// Require is the version of ModulePath the go.mod requires.
	Require string
	// PythonSDK is the pip requirement of the Python SDK.
	PythonSDK string
}

// New writes the project o describes and returns the paths of the files
// written, relative to o.Dir. Nothing is left behind on an error: the
// project is made in a directory beside o.Dir and renamed into place
// once complete (for Go, once `go mod tidy` has filled go.sum).
func New(ctx context.Context, o Options) ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkFree(o.Dir); err != nil {
		return nil, err
	}
	d := data{Options: o, GoVersion: "1.26", Require: o.Version}
	if o.SDK != "" {
		// The placeholder version the go command itself writes for a
		// requirement that a replace line satisfies.
		d.Require = "v0.0.0-00010101000000-000000000000"
		if b, err := os.ReadFile(filepath.Join(o.SDK, "go.mod")); err == nil && goLine(b) != "" {
			d.GoVersion = goLine(b)
		}
		d.PythonSDK = "streamrun @ " + (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Join(o.SDK, "sdk", "python"))}).String()
	} else {
		d.PythonSDK = fmt.Sprintf("streamrun @ git+https://%s@%s#subdirectory=sdk/python", ModulePath, o.Version)
	}

	parent := filepath.Dir(filepath.Clean(o.Dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("make %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(o.Dir)+".new-*")
	if err != nil {
		return nil, fmt.Errorf("make the project's directory: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename; left by a failure
	files, err := render(tmp, o.Lang, d)
	if err != nil {
		return nil, err
	}
	if o.Lang == "go" {
		if err := tidy(ctx, o.Go, tmp); err != nil {
			return nil, err
		}
		files = append(files, "go.sum")
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("make the project's directory: %w", err)
	}
	// An empty directory at o.Dir is replaced (rename(2) allows it).
	if err := os.Rename(tmp, o.Dir); err != nil {
		return nil, fmt.Errorf("move the project to %s: %w", o.Dir, err)
	}
	return files, nil
}

// checkFree refuses a dir that exists, unless it is an empty directory.
func checkFree(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUsage, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s exists and is not a directory: give another name or --dir", ErrUsage, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUsage, dir, err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%w: %s exists and is not empty: give another name or --dir (nothing is overwritten)", ErrUsage, dir)
	}
	return nil
}

// render writes lang's templates into dir: templates/LANG/X.tmpl becomes
// dir/X (with "_" in the template's name for a leading dot).
func render(dir, lang string, d data) ([]string, error) {
	root := path.Join("templates", lang)
	var files []string
	err := fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		if strings.HasPrefix(path.Base(rel), "_") {
			rel = path.Join(path.Dir(rel), "."+strings.TrimPrefix(path.Base(rel), "_"))
		}
		src, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(p).Delims("[[", "]]").Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("template %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return fmt.Errorf("template %s: %w", p, err)
		}
		out := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", rel, err)
		}
		files = append(files, rel)
		return nil
	})
	return files, err
}

// tidy runs `go mod tidy` in dir, so that the module has its go.sum and
// every requirement the SDK brings: it builds as written.
func tidy(ctx context.Context, goCmd, dir string) error {
	cmd := exec.CommandContext(ctx, goCmd, "mod", "tidy")
	cmd.Dir = dir
	// The new module is a module of its own, wherever it is made.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go mod tidy (it fills go.sum from the module cache or GOPROXY): %w\n%s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
