package benchrun

import (
	"context"

	"github.com/streamrun/streamrun/plugin"
)

// identityConfig is the identity handler's config.
type identityConfig struct {
	Output string `json:"output"` // the topic each message goes to
	// Copies is how many outputs each message makes, all alike (0: one),
	// to measure what outputs per input cost.
	Copies int `json:"copies"`
}

// IdentityHandler passes every message on to the configured output
// topic, unchanged with its key (Copies times): what a pipeline run measures the
// framework with, without a handler's own cost. A plugin process serves
// it with plugin.Serve (HandlerOptions.Identity).
func IdentityHandler() plugin.Handler {
	return plugin.Configure(func(_ context.Context, cfg identityConfig) (plugin.Handler, error) {
		n := max(cfg.Copies, 1)
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			out := make([]plugin.Output, n)
			for i := range out {
				out[i] = plugin.Output{Topic: cfg.Output, Key: m.Key, Payload: m.Payload}
			}
			return out, nil
		}), nil
	})
}
