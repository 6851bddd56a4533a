// Command uppercase is a streamrun handler plugin that publishes each
// message's payload, uppercased, to the topic named in its config.
package main

import (
	"bytes"
	"context"

	"github.com/streamrun/streamrun/plugin"
)

type config struct {
	Output string `json:"output"` // the topic to publish to
}

func main() {
	plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: bytes.ToUpper(m.Payload)}}, nil
		}), nil
	}))
}
