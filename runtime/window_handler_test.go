package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
)

// windowConfig is the config of the window handler the test binary
// serves as a plugin (role "windowhandler"): for each window, one output
// to Output, keyed by the window's key, whose payload is windowResult.
type windowConfig struct {
	Output string `json:"output"`
	// Crash: the plugin panics the first time (across processes, by a
	// marker file in MarkerDir) it is handed each key's window whose
	// start, in whole seconds, is a multiple of 3.
	Crash      bool          `json:"crash,omitempty"`
	MarkerDir  string        `json:"marker_dir,omitempty"`
	BatchDelay time.Duration `json:"batch_delay,omitempty"`
}

// windowResult is what the window handler outputs for a window.
type windowResult struct {
	Key      string   `json:"key"`
	Start    int64    `json:"start"`
	End      int64    `json:"end"`
	Fire     int      `json:"fire"`
	Payloads []string `json:"payloads"`
	Times    []int64  `json:"times"`
}

func newWindowHandler(_ context.Context, cfg windowConfig) (plugin.Handler, error) {
	if cfg.Output == "" {
		return nil, errors.New(`"output" is required`)
	}
	f := plugin.WindowFunc(func(ctx context.Context, w *plugin.Window) ([]plugin.Output, error) {
		if cfg.Crash && (w.Start.UnixMilli()/1000)%3 == 0 && w.Fire == 1 {
			name := filepath.Join(cfg.MarkerDir, fmt.Sprintf("crash-%s-%d", w.Key, w.Start.UnixMilli()))
			if f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				f.Close()
				panic("the window handler crashes, as asked, on " + name)
			}
		}
		r := windowResult{Key: w.Key, Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Fire: w.Fire}
		for _, m := range w.Messages {
			r.Payloads = append(r.Payloads, string(m.Payload))
			r.Times = append(r.Times, m.Time)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		return []plugin.Output{{Topic: cfg.Output, Key: w.Key, Payload: b}}, nil
	})
	return plugin.HandlerFunc(func(ctx context.Context, rw plugin.ResultWriter, batch []*plugin.Message) error {
		if cfg.BatchDelay > 0 {
			time.Sleep(cfg.BatchDelay)
		}
		return f.Process(ctx, rw, batch)
	}), nil
}

// windowHandler is the handler config of a pipeline whose plugin is this
// test binary serving the window handler.
func windowHandler(cfg windowConfig) pipelines.Handler {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	m := map[string]any{"output": cfg.Output, "crash": cfg.Crash, "marker_dir": cfg.MarkerDir, "batch_delay": int64(cfg.BatchDelay)}
	return pipelines.Handler{Plugin: exe, Env: map[string]string{roleEnv: "windowhandler"}, Config: m}
}
