package benchrun

import (
	"context"
	"fmt"

	"github.com/streamrun/streamrun/plugin"
)

// identityConfig is the identity handler's config.
type identityConfig struct {
	Output string `json:"output"` // the topic each message goes to
	// Copies is how many outputs each message makes, all alike (0: one),
	// to measure what outputs per input cost.
	Copies int `json:"copies"`
	// Count keeps a count per key in keyed state (HandlerOptions.State):
	// each message reads its key's count, adds one and writes it back.
	Count bool `json:"count"`
}

// IdentityHandler passes every message on to the configured output
// topic, unchanged with its key (Copies times): what a pipeline run
// measures the framework with, without a handler's own cost. With Count
// it is also the counter of HandlerOptions.State, its outputs still the
// messages unchanged, so that a stateful run differs from a stateless
// one by the keyed state alone. A plugin process serves it with
// plugin.Serve (HandlerOptions.Identity).
func IdentityHandler() plugin.Handler {
	return plugin.Configure(func(_ context.Context, cfg identityConfig) (plugin.Handler, error) {
		n := max(cfg.Copies, 1)
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			if cfg.Count {
				var count int64
				if _, err := m.State().GetJSON(&count); err != nil {
					return nil, plugin.DeadLetter(fmt.Errorf("the count of key %q: %w", m.Key, err))
				}
				if err := m.State().PutJSON(count + 1); err != nil {
					return nil, fmt.Errorf("the count of key %q: %w", m.Key, err)
				}
			}
			out := make([]plugin.Output, n)
			for i := range out {
				out[i] = plugin.Output{Topic: cfg.Output, Key: m.Key, Payload: m.Payload}
			}
			return out, nil
		}), nil
	})
}
