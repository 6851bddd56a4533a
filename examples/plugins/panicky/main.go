// Command panicky is a streamrun handler plugin for crash tests: it acks
// every message, except that it panics on a message whose payload or key is
// the one in its config. The panic kills the plugin process; the host
// restarts it and retries the batch.
package main

import (
	"context"
	"fmt"

	"github.com/streamrun/streamrun/plugin"
)

type config struct {
	Payload string `json:"payload"` // panic on a message with this payload ("" for none)
	Key     string `json:"key"`     // panic on a message with this key ("" for none)
	Output  string `json:"output"`  // if set, echo every other message to this topic
}

func main() {
	plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			if (cfg.Payload != "" && string(m.Payload) == cfg.Payload) || (cfg.Key != "" && m.Key == cfg.Key) {
				panic(fmt.Sprintf("panicky: told to panic on message %s", m.ID))
			}
			if cfg.Output == "" {
				return nil, nil
			}
			return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: m.Payload}}, nil
		}), nil
	}))
}
