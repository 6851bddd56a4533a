// Command tagger is a handler plugin for the `streamrun run` tests: it
// echoes each message to the topic in its config, with a "host" property
// naming the streamrun process that ran it (STREAMRUN_TEST_HOST in the
// host's environment, which plugins inherit), after an optional delay
// per batch so that a run stays busy long enough to be interrupted.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

type config struct {
	Output string `json:"output"`
	Delay  string `json:"delay"` // per batch, e.g. "5ms"; default none
}

func main() {
	host := os.Getenv("STREAMRUN_TEST_HOST")
	plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		var delay time.Duration
		if cfg.Delay != "" {
			d, err := time.ParseDuration(cfg.Delay)
			if err != nil {
				return nil, fmt.Errorf("delay: %w", err)
			}
			delay = d
		}
		return plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
			if delay > 0 {
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			for _, m := range batch {
				w.Output(m, plugin.Output{Topic: cfg.Output, Key: m.Key, Payload: m.Payload,
					Properties: map[string]string{"host": host}})
			}
			return nil
		}), nil
	}))
}
