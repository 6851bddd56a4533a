package streamrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/runtime"
)

// CheckHandlersOptions say how CheckHandlers starts handlers. The zero
// value works.
type CheckHandlersOptions struct {
	// HandlerCache is where handlers given as a Go package are built and
	// cached, as Options.HandlerCache. Default
	// runtime.DefaultHandlerCacheDir().
	HandlerCache string
	// Logger receives the handlers' own logs. Default: discards.
	Logger *slog.Logger
}

// CheckHandlers starts each handler of f (a file Check or pipelines.Load
// read), one at a time, hands it its config and closes it, as a run's
// start would but without a broker (runtime.CheckHandler): so that a
// typo in a handler's own config is found before a run. What a handler
// refuses of its config is an error placed at the pipeline's
// handler.config (at the key the handler's words quote, when they quote
// exactly one key of it); a handler that does not build or start, at its
// handler.plugin, package or script. The error is pipelines.Errors; nil
// when every handler takes its config.
func CheckHandlers(ctx context.Context, f *pipelines.File, o CheckHandlersOptions) error {
	co := runtime.CheckOptions{
		Build:  runtime.BuildOptions{CacheDir: o.HandlerCache},
		Logger: o.Logger,
		// A handler checked exports no spans.
		PluginEnv: []string{"OTEL_TRACES_EXPORTER=none"},
	}
	var errs pipelines.Errors
	for i, p := range f.Pipelines {
		err := runtime.CheckHandler(ctx, p, co)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		prefix := fmt.Sprintf("pipelines[%d].handler.", i)
		if errors.Is(err, host.ErrInit) {
			field := prefix + "config"
			if key := quotedKey(p.Handler.Config, err.Error()); key != "" {
				field += "." + key
			}
			errs = append(errs, f.ErrorAt(field, "the handler refuses its config: "+initWords(err)))
			continue
		}
		errs = append(errs, f.ErrorAt(prefix+programField(p.Handler), "the handler does not start: "+err.Error()))
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// initWords is what the handler said refusing its config, without the
// host's prefix ("plugin NAME: plugin init failed: ").
func initWords(err error) string {
	s := err.Error()
	if _, words, ok := strings.Cut(s, host.ErrInit.Error()+": "); ok {
		return words
	}
	return s
}

// programField names the field that says what runs the handler.
func programField(h pipelines.Handler) string {
	switch {
	case h.Plugin != "":
		return "plugin"
	case h.Script != "":
		return "script"
	}
	return "package"
}

// quotedKey is the path, below config, of the one key of config (at any
// depth) that msg quotes ("key", 'key' or `key`); "" when it quotes none
// or more than one.
func quotedKey(config map[string]any, msg string) string {
	var found []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				path := k
				if prefix != "" {
					path = prefix + "." + k
				}
				if quotes(msg, k) {
					found = append(found, path)
				}
				walk(path, sub)
			}
		case []any:
			for i, sub := range v {
				walk(fmt.Sprintf("%s[%d]", prefix, i), sub)
			}
		}
	}
	walk("", map[string]any(config))
	slices.Sort(found)
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

func quotes(msg, key string) bool {
	for _, q := range []string{`"`, `'`, "`"} {
		if strings.Contains(msg, q+key+q) {
			return true
		}
	}
	return false
}
