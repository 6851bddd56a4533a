package main

import (
	"context"

	"github.com/streamrun/streamrun/plugin"
)

// identityConfig is the identity handler's config.
type identityConfig struct {
	Output string `json:"output"` // the topic each message goes to
}

// identityHandler passes every message on to the configured output
// topic, unchanged with its key: what `streamrun bench pipeline`
// measures the framework with, without a handler's own cost.
func identityHandler() plugin.Handler {
	return plugin.Configure(func(_ context.Context, cfg identityConfig) (plugin.Handler, error) {
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: m.Payload}}, nil
		}), nil
	})
}

// benchIdentityHandler serves the identity handler as a plugin process:
// `streamrun bench handler`, started by `streamrun bench pipeline`.
func benchIdentityHandler() int {
	plugin.Serve(identityHandler())
	return exitOK
}
