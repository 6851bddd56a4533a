package streamrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/runtime"
)

// A running host changes through its files: a new version of a file is
// checked and its effect reported (DryRun), then written and reloaded as
// SIGHUP reloads (Apply); a pause or a resume is an edit of the file's
// paused field applied the same way (SetPaused). The file stays the
// truth: what the run does is what its files say, after a restart too.

// ReloadPlan is what a reload to new files would do.
type ReloadPlan struct {
	// Pipelines: what happens to each pipeline, by name, the removed
	// ones included.
	Pipelines []runtime.PipelineChange
	// Restart lists the settings of the whole file that differ; a
	// reload with any is refused (RestartError).
	Restart []pipelines.Change
}

// ErrReadOnly refuses a change to a file that cannot be written.
var ErrReadOnly = errors.New("the file cannot be written")

// ErrNotAFile refuses a change to a file the run was not started with
// (or to pipelines made in Go, Options.Pipelines).
var ErrNotAFile = errors.New("not one of the run's files")

// ErrNoPipeline refuses a change to a pipeline the run does not have.
var ErrNoPipeline = errors.New("no such pipeline")

// DryRun reports what writing content to file (one of the run's files)
// and reloading would do, and changes nothing: the file checked as
// `streamrun validate` checks it (a *FilesError with FILE:LINE:COL
// errors when it does not load), then runtime.Host.DryRun. A change of
// the settings that take a restart is in the plan's Restart.
func (r *Run) DryRun(ctx context.Context, file string, content []byte) (*ReloadPlan, error) {
	r.rl.mu.Lock()
	defer r.rl.mu.Unlock()
	_, plan, err := r.rl.planLocked(ctx, file, content)
	return plan, err
}

// Apply writes content to file (one of the run's files) and reloads the
// run as SIGHUP does; content that does not load, a change that takes a
// restart, or pipelines the host refuses leave the file and the run as
// they were. A file that cannot be written is refused with ErrReadOnly
// before anything changes. It returns what the reload did.
func (r *Run) Apply(ctx context.Context, file string, content []byte) (*ReloadPlan, error) {
	r.rl.mu.Lock()
	defer r.rl.mu.Unlock()
	return r.rl.writeAndApplyLocked(ctx, file, content)
}

// SetPaused pauses (or resumes) pipeline: its paused field is set in its
// file, which is written and reloaded as Apply does. A paused pipeline
// takes no messages; its consumer, subscription and instances stay
// (runtime.StatePaused).
func (r *Run) SetPaused(ctx context.Context, pipeline string, paused bool) error {
	rl := r.rl
	rl.mu.Lock()
	defer rl.mu.Unlock()
	file := rl.fs.fileOf[pipeline]
	switch {
	case file == "":
		return fmt.Errorf("%w: %q", ErrNoPipeline, pipeline)
	case !slices.Contains(rl.fs.paths, file):
		return fmt.Errorf("pipeline %s: %w: it was made in Go", pipeline, ErrNotAFile)
	}
	old, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	next, err := setPipelineField(file, old, pipeline, "paused", paused)
	if err != nil {
		return err
	}
	_, err = rl.writeAndApplyLocked(ctx, file, next)
	return err
}

// planLocked loads the run's files with content in place of file's and
// says what a reload to them would do.
func (rl *reloader) planLocked(ctx context.Context, file string, content []byte) (*Files, *ReloadPlan, error) {
	if !slices.Contains(rl.fs.paths, file) {
		return nil, nil, fmt.Errorf("%s: %w", file, ErrNotAFile)
	}
	next, err := loadWith(rl.fs.paths, rl.fs.inline, rl.r.opts.LookupEnv, map[string][]byte{file: content})
	if err != nil {
		return nil, nil, &FilesError{err}
	}
	plan := &ReloadPlan{Restart: rl.fs.settings().SettingsChanges(next.settings())}
	if plan.Pipelines, err = rl.r.host.DryRun(ctx, next.pipelines...); err != nil {
		return nil, nil, err
	}
	return next, plan, nil
}

// writeAndApplyLocked is Apply under mu.
func (rl *reloader) writeAndApplyLocked(ctx context.Context, file string, content []byte) (*ReloadPlan, error) {
	next, plan, err := rl.planLocked(ctx, file, content)
	if err != nil {
		return nil, err
	}
	if len(plan.Restart) > 0 {
		return plan, &RestartError{Changes: plan.Restart}
	}
	old, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if err := replaceFile(file, content); err != nil {
		return nil, err
	}
	rl.r.log.Info("reloading", "why", "a change through the control API", "file", file)
	if err := rl.applyLocked(ctx, next); err != nil {
		if werr := replaceFile(file, old); werr != nil {
			rl.r.log.Error("the reload was refused, and the file could not be put back as it was", "file", file, "err", werr)
		}
		return plan, err
	}
	return plan, nil
}

// replaceFile replaces path's content, keeping its mode: written to a file
// beside it, then renamed over it, so that a reader never sees half of
// it. A file or directory that cannot be written is ErrReadOnly.
func replaceFile(path string, content []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o222 == 0 {
		return fmt.Errorf("%s: %w (its mode is %v)", path, ErrReadOnly, fi.Mode().Perm())
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("%s: %w: %v", path, ErrReadOnly, err)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Chmod(fi.Mode().Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
