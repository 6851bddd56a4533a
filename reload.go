package streamrun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

// A run changes without a restart: on SIGHUP (Options.ReloadOnSIGHUP),
// with Options.Watch when a file or a handler changes, and at Run.Reload,
// it re-reads its files as at start and hands the pipelines to
// runtime.Host.Reload. A file that does not load, or a set of pipelines
// the host refuses, is logged with its errors and the run goes on
// unchanged (docs/reload.md).

// reloader applies SIGHUP and Watch to a running host. It catches SIGHUP
// from its making (SIGHUP would otherwise end the process), and reloads
// once start has given it the host.
type reloader struct {
	r     *Run
	hup   chan os.Signal
	quit  chan struct{}
	wg    sync.WaitGroup
	watch time.Duration // 0: no watching

	mu sync.Mutex // one reload at a time; guards fs
	fs *Files     // what runs
}

func newReloader(r *Run, sighup bool, watch time.Duration) *reloader {
	rl := &reloader{r: r, hup: make(chan os.Signal, 1), quit: make(chan struct{}), watch: watch}
	if sighup {
		signal.Notify(rl.hup, syscall.SIGHUP)
	}
	return rl
}

// start reloads the host, running fs, until ctx ends or close.
func (rl *reloader) start(ctx context.Context, fs *Files) {
	rl.fs = fs
	rl.wg.Go(func() { rl.loop(ctx) })
}

// close stops reloading and waits for a reload under way.
func (rl *reloader) close() {
	signal.Stop(rl.hup)
	close(rl.quit)
	rl.wg.Wait()
}

func (rl *reloader) loop(ctx context.Context) {
	var tick <-chan time.Time
	var seen string
	if rl.watch > 0 {
		t := time.NewTicker(rl.watch)
		defer t.Stop()
		tick = t.C
		seen = rl.fingerprint()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-rl.quit:
			return
		case <-rl.hup:
			_ = rl.reload(ctx, "SIGHUP")
			seen = rl.fingerprint()
		case <-tick:
			now := rl.fingerprint()
			if now == seen {
				continue
			}
			_ = rl.reload(ctx, "a file or handler changed")
			seen = rl.fingerprint()
		}
	}
}

func (rl *reloader) fingerprint() string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return fingerprint(rl.fs.paths, rl.fs)
}

// reload re-reads the files and applies them.
func (rl *reloader) reload(ctx context.Context, why string) error {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	log := rl.r.log
	log.Info("reloading", "why", why, "files", rl.fs.names())
	next, err := rl.fs.reread(rl.r.opts.LookupEnv)
	if err != nil {
		log.Error("reload refused: the files do not load; running on unchanged", "err", err)
		return err
	}
	return rl.applyLocked(ctx, next)
}

// applyLocked applies next, read from the files, to the host, under mu:
// refused when a setting that takes a restart changed, or when the host
// refuses the pipelines.
func (rl *reloader) applyLocked(ctx context.Context, next *Files) error {
	log := rl.r.log
	t0 := time.Now()
	if cs := rl.fs.settings().SettingsChanges(next.settings()); len(cs) > 0 {
		err := &RestartError{Changes: cs}
		log.Error("reload refused; running on unchanged", "err", err)
		return err
	}
	if err := rl.r.host.Reload(ctx, next.pipelines...); err != nil {
		log.Error("reload refused; running on unchanged", "err", err)
		return err
	}
	log.Info("reloaded", "pipelines", len(next.pipelines), "took", time.Since(t0).Round(time.Millisecond))
	rl.fs = next
	return nil
}

// A RestartError refuses a reload that changes settings of the whole
// file (the connection, telemetry, control): they take a restart.
type RestartError struct {
	Changes []pipelines.Change
}

func (e *RestartError) Error() string {
	paths := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		paths[i] = c.Path
	}
	return fmt.Sprintf("%s changed: the connection, telemetry and control take a restart", strings.Join(paths, ", "))
}

// fingerprint sums what Watch watches: the files' content, and each
// handler's binary or Go package directory (its files' sizes and
// modification times).
func fingerprint(files []string, fs *Files) string {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		fmt.Fprintf(h, "file %s %v %x\n", f, err, sha256.Sum256(b))
	}
	stat := func(path string) {
		fi, err := os.Stat(path)
		if err != nil {
			fmt.Fprintf(h, "%s %v\n", path, err)
			return
		}
		fmt.Fprintf(h, "%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
	}
	for _, p := range fs.pipelines {
		if p.Handler.Plugin != "" {
			stat(p.Handler.Plugin)
		}
		if p.Handler.Script != "" {
			stat(p.Handler.Script)
		}
		if dir := p.Handler.Package; dir != "" {
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				names, _ := filepath.Glob(filepath.Join(dir, "*"))
				slices.Sort(names)
				for _, n := range names {
					stat(n)
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
