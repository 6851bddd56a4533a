package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
)

// instance is one running copy of a pipeline's handler: a plugin process
// (*host.Instance) or a handler in the host's own process.
type instance interface {
	// ProcessBatch gets the handler's answer for every message of batch
	// (host.Instance's).
	ProcessBatch(ctx context.Context, batch host.Batch) ([]plugin.Result, error)
	// Close stops it gracefully (the handler's Close runs).
	Close(ctx context.Context) error
	// Kill stops it at once and waits for it.
	Kill()
	// Pid is the plugin process's id, 0 for an in-process handler.
	Pid() int
	// Exited is closed when the plugin process has exited (nil for an
	// in-process handler); ExitStatus says how.
	Exited() <-chan struct{}
	ExitStatus() string
}

// starter starts instance number slot of a pipeline's handler, Init
// included.
type starter func(ctx context.Context, slot int) (instance, error)

// pluginStarter starts plugin processes of cmd, with the handler's Args
// after cmd's own, the host's Options.PluginEnv and PluginStartTimeout.
func pluginStarter(h *Host, p *pipelines.Pipeline, cmd pluginCommand, config []byte, log *slog.Logger) starter {
	return plugins(h.opts.PluginEnv, h.opts.PluginStartTimeout, p, cmd, config, log)
}

// plugins starts plugin processes of cmd, with the handler's Args after
// cmd's own, env and the handler's Env added to their environment, each
// start bounded by startTimeout.
func plugins(hostEnv []string, startTimeout time.Duration, p *pipelines.Pipeline, cmd pluginCommand, config []byte, log *slog.Logger) starter {
	env := slices.Clone(hostEnv)
	for _, k := range slices.Sorted(maps.Keys(p.Handler.Env)) {
		env = append(env, k+"="+p.Handler.Env[k])
	}
	return func(ctx context.Context, slot int) (instance, error) {
		// Checked at every start and restart: a file replaced while the
		// pipeline runs is refused at its next start.
		if err := p.Handler.VerifyPin(); err != nil {
			return nil, err
		}
		inst, err := host.Start(ctx, host.ClientOptions{
			Path:         cmd.path,
			Args:         append(slices.Clip(cmd.args), p.Handler.Args...),
			Name:         cmd.name,
			Env:          env,
			Pipeline:     p.Name,
			InstanceID:   strconv.Itoa(slot),
			Logger:       log,
			StartTimeout: startTimeout,
			KeyedState:   p.State.Enabled || p.Window.Incremental(),
		})
		if err != nil {
			return nil, err
		}
		if err := inst.Init(ctx, config); err != nil {
			inst.Kill()
			return nil, err
		}
		return inst, nil
	}
}

// localStarter runs a handler made by newHandler in the host's process,
// through host.ProcessLocal: the same semantics as a plugin (defaults
// to ack, a panic is a *host.CrashError naming the message), without
// the isolation. A hang cannot be killed: the worker waits for the
// handler to return after its ctx ends.
func localStarter(p *pipelines.Pipeline, newHandler func() plugin.Handler, config []byte) starter {
	return func(ctx context.Context, slot int) (instance, error) {
		h := newHandler()
		if h == nil {
			return nil, fmt.Errorf("local handler of pipeline %s: the factory returned nil", p.Name)
		}
		if in, ok := h.(plugin.Initializer); ok {
			if err := in.Init(ctx, plugin.Info{Pipeline: p.Name, InstanceID: strconv.Itoa(slot), Config: config}); err != nil {
				return nil, fmt.Errorf("local handler of pipeline %s: %w: %v", p.Name, host.ErrInit, err)
			}
		}
		return &localInstance{h: h}, nil
	}
}

type localInstance struct {
	h    plugin.Handler
	once sync.Once
}

func (l *localInstance) ProcessBatch(ctx context.Context, batch host.Batch) ([]plugin.Result, error) {
	return host.ProcessLocalBatch(ctx, l.h, batch)
}

func (l *localInstance) Close(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		if c, ok := l.h.(plugin.Closer); ok {
			err = c.Close(ctx)
		}
	})
	return err
}

func (l *localInstance) Kill() {}

// CompactWindows: an in-process handler is built with this module's SDK,
// which reads contract version 5's windows (window_compact.go).
func (l *localInstance) CompactWindows() bool { return true }

func (l *localInstance) Pid() int { return 0 }

func (l *localInstance) Exited() <-chan struct{} { return nil }

func (l *localInstance) ExitStatus() string { return "" }
