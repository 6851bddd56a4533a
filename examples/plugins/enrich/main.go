// Command enrich is a streamrun handler plugin that reads JSON orders,
// adds the region their country belongs to and routes them by amount:
// large orders to one topic, the rest to another. A payload that is not an
// order goes to the dead-letter topic.
package main

import (
	"context"
	"errors"

	"github.com/streamrun/streamrun/plugin"
)

type config struct {
	Large     string  `json:"large"`     // topic for orders of at least Threshold
	Small     string  `json:"small"`     // topic for the others
	Threshold float64 `json:"threshold"` // default 1000
}

type order struct {
	ID      string  `json:"id"`
	Country string  `json:"country"`
	Amount  float64 `json:"amount"`
}

type enriched struct {
	order
	Region string `json:"region"`
}

var regions = map[string]string{"US": "amer", "CA": "amer", "BR": "amer", "DE": "emea", "FR": "emea", "JP": "apac"}

func main() {
	plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		if cfg.Large == "" || cfg.Small == "" {
			return nil, errors.New(`both "large" and "small" topics are required`)
		}
		if cfg.Threshold == 0 {
			cfg.Threshold = 1000
		}
		return plugin.JSON(func(_ context.Context, o order, m *plugin.Message) ([]plugin.Emit[enriched], error) {
			if o.ID == "" {
				return nil, plugin.DeadLetter(errors.New("order without id"))
			}
			topic := cfg.Small
			if o.Amount >= cfg.Threshold {
				topic = cfg.Large
			}
			region, ok := regions[o.Country]
			if !ok {
				region = "unknown"
			}
			return []plugin.Emit[enriched]{{Topic: topic, Key: o.ID, Value: enriched{o, region}}}, nil
		}), nil
	}))
}
