package pipelines

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// checkFiles checks what the file names on disk: that a handler's plugin
// binary, Go package directory, script and Python interpreter exist, and
// the TLS files. A Go package given by import path is left to the build.
func (d *decoder) checkFiles(f *File) Errors {
	d.errs = nil
	exists := func(path, p string, what string) os.FileInfo {
		if p == "" {
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil {
			d.errAt(path, fmt.Sprintf("%s %s: %v", what, p, unwrapPath(err)))
			return nil
		}
		return fi
	}
	regular := func(path, p, what string) {
		if fi := exists(path, p, what); fi != nil && !fi.Mode().IsRegular() {
			d.errAt(path, fmt.Sprintf("%s %s is not a file", what, p))
		}
	}
	if spec, ok := strings.CutPrefix(f.Auth.Token, "file:"); ok {
		regular("auth.token", strings.TrimPrefix(spec, "//"), "token file")
	}
	regular("tls.ca_file", f.TLS.CAFile, "CA file")
	regular("tls.cert_file", f.TLS.CertFile, "certificate file")
	regular("tls.key_file", f.TLS.KeyFile, "key file")
	for i := range f.Pipelines {
		h := &f.Pipelines[i].Handler
		prefix := fmt.Sprintf("pipelines[%d].handler.", i)
		if fi := exists(prefix+"plugin", h.Plugin, "plugin"); fi != nil {
			switch {
			case !fi.Mode().IsRegular():
				d.errAt(prefix+"plugin", fmt.Sprintf("plugin %s is not a file (for a Go package to build, use package: ./path)", h.Plugin))
			case fi.Mode().Perm()&0o111 == 0:
				d.errAt(prefix+"plugin", fmt.Sprintf("plugin %s is not executable", h.Plugin))
			}
		}
		if isLocalPackage(h.Package) {
			d.checkPackageDir(prefix+"package", h.Package)
		}
		regular(prefix+"script", h.Script, "script")
		// A file that cannot be read is reported above.
		var pin *PinError
		if err := h.VerifyPin(); errors.As(err, &pin) {
			d.errAt(prefix+"sha256", pin.Error())
		}
		if h.Script != "" {
			d.checkPython(prefix+"python", h.Python)
		}
	}
	return d.sorted()
}

// checkPackageDir checks that dir holds Go source files.
func (d *decoder) checkPackageDir(path, dir string) {
	fi, err := os.Stat(dir)
	if err != nil {
		d.errAt(path, fmt.Sprintf("package %s: %v", dir, unwrapPath(err)))
		return
	}
	if !fi.IsDir() {
		d.errAt(path, fmt.Sprintf("package %s is not a directory (for a binary, use plugin:)", dir))
		return
	}
	gofiles, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(gofiles) == 0 {
		d.errAt(path, fmt.Sprintf("package %s has no .go files", dir))
	}
}

// checkPython checks the interpreter a script handler runs with: a
// virtual environment's directory (its bin/python), an executable path,
// or a command found in PATH. The default is python3.
func (d *decoder) checkPython(path, python string) {
	if python == "" {
		python = DefaultPython
	}
	if !strings.ContainsRune(python, '/') && !strings.ContainsRune(python, filepath.Separator) {
		if _, err := exec.LookPath(python); err != nil {
			d.errAt(path, fmt.Sprintf("%s is not in PATH (set python: to an interpreter or a virtual environment)", python))
		}
		return
	}
	fi, err := os.Stat(python)
	if err != nil {
		d.errAt(path, fmt.Sprintf("python %s: %v", python, unwrapPath(err)))
		return
	}
	if fi.IsDir() {
		if _, err := os.Stat(VenvPython(python)); err != nil {
			d.errAt(path, fmt.Sprintf("%s is a directory but not a virtual environment (no bin/python)", python))
		}
		return
	}
	if fi.Mode().Perm()&0o111 == 0 {
		d.errAt(path, fmt.Sprintf("python %s is not executable", python))
	}
}

// VenvPython is the interpreter of the virtual environment at dir.
func VenvPython(dir string) string { return filepath.Join(dir, "bin", "python") }
