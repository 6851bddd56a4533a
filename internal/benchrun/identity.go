package benchrun

import (
	"context"

	"github.com/streamrun/streamrun/plugin"
)

// identityConfig is the identity handler's config.
type identityConfig struct {
	Output string `json:"output"` // the topic each message goes to
}

// IdentityHandler passes every message on to the configured output
// topic, unchanged with its key: what a pipeline run measures the
// framework with, without a handler's own cost. A plugin process serves
// it with plugin.Serve (HandlerOptions.Identity).
func IdentityHandler() plugin.Handler {
	return plugin.Configure(func(_ context.Context, cfg identityConfig) (plugin.Handler, error) {
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: m.Payload}}, nil
		}), nil
	})
}
