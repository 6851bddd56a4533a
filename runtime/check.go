package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

// CheckOptions say how CheckHandler starts a handler. The zero value
// works.
type CheckOptions struct {
	// Build builds a handler given as a Go package, as a run would (the
	// same cache). Default: BuildOptions' defaults.
	Build BuildOptions
	// PluginEnv is added to the plugin's environment, as
	// Options.PluginEnv. Default none.
	PluginEnv []string
	// Timeout bounds the whole check of one handler: build, start, Init
	// and Close. Default DefaultCheckTimeout.
	Timeout time.Duration
	// Logger receives the plugin's logs and output. Default: discards.
	Logger *slog.Logger
}

// DefaultCheckTimeout is CheckOptions.Timeout's default: a build, and a
// plugin's start and Init as DefaultPluginStartTimeout allows them.
const DefaultCheckTimeout = 2 * time.Minute

// CheckHandler starts one instance of p's handler as a run does (a Go
// package built first, a script with its interpreter), hands it p's
// handler config (Init), and closes it gracefully, without a broker:
// nothing is consumed or published. What the handler refuses of its
// config is an error matching host.ErrInit with the handler's own words;
// a handler that does not build or start is an error saying why. A
// pipeline without a handler (steps only) passes.
func CheckHandler(ctx context.Context, p pipelines.Pipeline, o CheckOptions) error {
	if !p.HasHandler() {
		return nil
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultCheckTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Build.Logger == nil {
		o.Build.Logger = o.Logger
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	config, err := handlerConfig(p.Handler)
	if err != nil {
		return err
	}
	cmd, _, err := resolvePlugin(ctx, p.Handler, o.Build)
	if err != nil {
		return err
	}
	inst, err := plugins(o.PluginEnv, o.Timeout, &p, cmd, config, o.Logger)(ctx, 0)
	if err != nil {
		return err
	}
	defer inst.Kill()
	if err := inst.Close(ctx); err != nil {
		return errors.Join(errors.New("the handler took its config but failed to close"), err)
	}
	return nil
}
