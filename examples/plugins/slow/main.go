// Command slow is a streamrun handler plugin for backpressure and timeout
// tests: it sleeps a configured time for each batch, then acks every
// message (echoing it to an output topic if one is configured).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

type config struct {
	Delay  string `json:"delay"`  // how long each batch takes, e.g. "250ms"
	Output string `json:"output"` // if set, echo every message to this topic
}

func main() {
	plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		delay, err := time.ParseDuration(cfg.Delay)
		if err != nil {
			return nil, fmt.Errorf("delay: %w", err)
		}
		return plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
			slog.Info("slow batch", "messages", len(batch), "delay", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
			for _, m := range batch {
				if cfg.Output != "" {
					w.Output(m, plugin.Output{Topic: cfg.Output, Key: m.Key, Payload: m.Payload})
				}
			}
			return nil
		}), nil
	}))
}
