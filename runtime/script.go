package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

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

// ErrNoSDK is matched (errors.Is) by CheckScript's error when the
// interpreter runs but cannot import the Python SDK.
var ErrNoSDK = errors.New("cannot import the streamrun SDK")

// scriptCheckTimeout bounds CheckScript's interpreter: an import that
// hangs (a site hook waiting on the network) is reported, not waited on.
const scriptCheckTimeout = 30 * time.Second

// CheckScript checks that the interpreter of h, a script handler, runs
// and imports the Python SDK (the streamrun package, sdk/python), as the
// script will: from the script's directory, with h.Env added to this
// process's environment. A plugin started without the SDK dies before
// its handshake; this says so before anything starts (streamrun
// validate). ctx bounds the interpreter's run, as does
// scriptCheckTimeout. The error quotes the
// interpreter's last line on stderr; it matches ErrNoSDK when the
// interpreter ran but the import failed.
func CheckScript(ctx context.Context, h pipelines.Handler) error {
	cmd, err := scriptCommand(h)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, scriptCheckTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.path, "-c", "import streamrun")
	c.Dir = filepath.Dir(cmd.args[0])
	c.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(h.Env)) {
		c.Env = append(c.Env, k+"="+h.Env[k])
	}
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err = c.Run()
	if err == nil {
		return nil
	}
	python := h.PythonCommand()
	if python != cmd.path {
		python += " (" + cmd.path + ")"
	}
	said := lastLine(stderr.Bytes())
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: importing the streamrun SDK: %w", python, ctx.Err())
	case errors.As(err, &exit) && said != "":
		return fmt.Errorf("%s %w: %s; install it into that interpreter (pip install sdk/python), "+
			"or set handler.python to a virtual environment that has it", python, ErrNoSDK, said)
	case said != "":
		return fmt.Errorf("%s: %v: %s", python, err, said)
	}
	return fmt.Errorf("%s: %w", python, err)
}

// lastLine is the last line of b that is not blank.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// CheckScripts runs CheckScript for every script handler of f, each
// interpreter once, and returns what fails as pipelines.Errors placed at
// the pipeline's handler.python (handler.script when python is not
// written); nil when all pass.
func CheckScripts(ctx context.Context, f *pipelines.File) error {
	var errs pipelines.Errors
	done := map[string]error{} // by interpreter, directory and env
	for i, p := range f.Pipelines {
		h := p.Handler
		if h.Script == "" {
			continue
		}
		key := fmt.Sprint(h.PythonCommand(), "\x00", filepath.Dir(h.Script), "\x00", h.Env)
		err, ok := done[key]
		if !ok {
			err = CheckScript(ctx, h)
			done[key] = err
		}
		if err == nil {
			continue
		}
		field := fmt.Sprintf("pipelines[%d].handler.python", i)
		if h.Python == "" {
			field = fmt.Sprintf("pipelines[%d].handler.script", i)
		}
		errs = append(errs, f.ErrorAt(field, err.Error()))
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}
