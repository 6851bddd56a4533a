// Command counter is a streamrun handler plugin with keyed state: it
// counts the messages of each key in the key's state and publishes
// "KEY=COUNT" to the topic named in its config. Run it in a pipeline with
// state.enabled (examples/pipelines/counter.yaml).
package main

import (
	"context"
	"fmt"

	"github.com/streamrun/streamrun/plugin"
)

type config struct {
	Output string `json:"output"` // the topic to publish to
}

func main() {
	plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		if cfg.Output == "" {
			return nil, fmt.Errorf(`"output" is required`)
		}
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			var n int
			if _, err := m.State().GetJSON(&n); err != nil {
				return nil, plugin.DeadLetter(fmt.Errorf("the count of key %q: %w", m.Key, err))
			}
			n++
			// The change counts only if the message is acknowledged: a
			// crash or a retry gives the next attempt the count as it was.
			if err := m.State().PutJSON(n); err != nil {
				return nil, err
			}
			return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: fmt.Appendf(nil, "%s=%d", m.Key, n)}}, nil
		}), nil
	}))
}
