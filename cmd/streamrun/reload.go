package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/runtime"
)

// `streamrun run` changes without a restart: on SIGHUP, and with --watch
// when a file or a handler changes, it re-reads its files as at start
// (the loader and checks of `streamrun validate`) and hands the pipelines
// to runtime.Host.Reload. A file that does not load, or a set of
// pipelines the host refuses, is logged with its errors and the run goes
// on unchanged.

// reloadConfig is what the reload flags say.
type reloadConfig struct {
	// watch re-reads the files when they, or a handler's binary or Go
	// source, change.
	watch bool
	// every is how often --watch looks.
	every time.Duration
}

// defaultWatchInterval is --watch-interval's default.
const defaultWatchInterval = time.Second

// addReloadFlags adds the reload flags to `streamrun run`'s.
func addReloadFlags(fs *pflag.FlagSet, c *reloadConfig) {
	fs.BoolVar(&c.watch, "watch", false, "re-read the files when they change, or a handler's binary or Go package source does (as SIGHUP does)")
	fs.DurationVar(&c.every, "watch-interval", defaultWatchInterval, "how often --watch looks for changes")
}

// reloader applies SIGHUP and --watch to a running host. It catches
// SIGHUP from its making (SIGHUP would otherwise end the process), and
// reloads once start has given it the host.
type reloader struct {
	r    *runner
	hup  chan os.Signal
	quit chan struct{}
	wg   sync.WaitGroup
}

func (r *runner) newReloader() *reloader {
	rl := &reloader{r: r, hup: make(chan os.Signal, 1), quit: make(chan struct{})}
	signal.Notify(rl.hup, syscall.SIGHUP)
	return rl
}

// start reloads host, running what l says, until ctx ends or close.
func (rl *reloader) start(ctx context.Context, host *runtime.Host, l *loaded) {
	rl.wg.Go(func() { rl.loop(ctx, host, l) })
}

// close stops reloading and waits for a reload under way.
func (rl *reloader) close() {
	signal.Stop(rl.hup)
	close(rl.quit)
	rl.wg.Wait()
}

func (rl *reloader) loop(ctx context.Context, host *runtime.Host, l *loaded) {
	var tick <-chan time.Time
	var seen string
	if c := rl.r.cfg.reload; c.watch && c.every > 0 {
		t := time.NewTicker(c.every)
		defer t.Stop()
		tick = t.C
		seen = fingerprint(rl.r.cfg.files, l)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-rl.quit:
			return
		case <-rl.hup:
			l = rl.reload(ctx, host, l, "SIGHUP")
			seen = fingerprint(rl.r.cfg.files, l)
		case <-tick:
			now := fingerprint(rl.r.cfg.files, l)
			if now == seen {
				continue
			}
			seen = now
			l = rl.reload(ctx, host, l, "a file or handler changed")
			seen = fingerprint(rl.r.cfg.files, l)
		}
	}
}

// reload re-reads the files and applies them; it returns what now runs.
func (rl *reloader) reload(ctx context.Context, host *runtime.Host, l *loaded, why string) *loaded {
	log := rl.r.log
	t0 := time.Now()
	log.Info("reloading", "why", why, "files", rl.r.cfg.files)
	next, err := rl.r.load()
	if err != nil {
		log.Error("reload refused: the files do not load; running on unchanged", "err", err)
		return l
	}
	if next.conn != l.conn {
		log.Error("reload refused: service_url, tls, auth or operation_retries changed; they take a restart (the connections stay as they are); running on unchanged")
		return l
	}
	if err := host.Reload(ctx, next.pipelines...); err != nil {
		log.Error("reload refused; running on unchanged", "err", err)
		return l
	}
	log.Info("reloaded", "pipelines", len(next.pipelines), "took", time.Since(t0).Round(time.Millisecond))
	return next
}

// fingerprint sums what --watch watches: the files' content, and each
// handler's binary or Go package directory (its files' sizes and
// modification times).
func fingerprint(files []string, l *loaded) string {
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
	for _, p := range l.pipelines {
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
