package runtime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/streamrun/streamrun/pipelines"
)

// pluginCommand is how a plugin process is started: a program, its
// arguments (before the handler's own Args) and its name in logs.
type pluginCommand struct {
	path string
	args []string
	name string // "" for the program's base name
}

// scriptCommand is the command that runs h.Script, a handler written in
// Python on the Python SDK (sdk/python): the interpreter h names (a
// path, a command looked up in PATH, or a virtual environment's
// directory; default python3) with the script as its first argument. The
// script is named by an absolute path, so that the process's working
// directory does not matter. The process is then an ordinary plugin: same
// handshake, contract, supervision and logs as a Go one.
func scriptCommand(h pipelines.Handler) (pluginCommand, error) {
	script, err := filepath.Abs(h.Script)
	if err != nil {
		return pluginCommand{}, fmt.Errorf("handler.script %s: %w", h.Script, err)
	}
	fi, err := os.Stat(script)
	switch {
	case err != nil:
		return pluginCommand{}, fmt.Errorf("handler.script: %w", err)
	case !fi.Mode().IsRegular():
		return pluginCommand{}, fmt.Errorf("handler.script %s: not a regular file", script)
	}
	python := h.PythonCommand()
	if !strings.ContainsRune(python, filepath.Separator) {
		p, err := exec.LookPath(python)
		if err != nil {
			return pluginCommand{}, fmt.Errorf("handler.python %q: %w", python, errors.Unwrap(err))
		}
		python = p
	} else if _, err := os.Stat(python); err != nil {
		return pluginCommand{}, fmt.Errorf("handler.python: %w", err)
	}
	return pluginCommand{path: python, args: []string{script}, name: filepath.Base(script)}, nil
}
