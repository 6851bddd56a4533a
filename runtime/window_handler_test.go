package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// windowConfig is the config of the window handler the test binary
// serves as a plugin (role "windowhandler"): for each window, one output
// to Output, keyed by the window's key, whose payload is windowResult.
type windowConfig struct {
	Output string `json:"output"`
	// Crash: the plugin panics the first time (across processes, by a
	// marker file in MarkerDir) it is handed a key's window whose start,
	// in whole seconds, is a multiple of 3, once a key in each minute of
	// starts (every third tumbling window, every twelfth sliding one):
	// each crash is a new process, about a second under the race
	// detector on a loaded 2-core machine, and at every third sliding
	// window the restarts alone outlasted the tests' 90 s wait.
	Crash      bool          `json:"crash,omitempty"`
	MarkerDir  string        `json:"marker_dir,omitempty"`
	BatchDelay time.Duration `json:"batch_delay,omitempty"`
	// Incremental: the windows are incremental; the accumulator counts
	// and sums (messageSum) the messages, and the handler crashes, as
	// Crash says, on its first add of each key's window whose start in
	// seconds is 1 more than a multiple of 3, and on the first fire of
	// those at a multiple of 3, maxCrashes times of each at most.
	Incremental bool `json:"incremental,omitempty"`
}

// windowResult is what the window handler outputs for a window.
type windowResult struct {
	Key      string   `json:"key"`
	Start    int64    `json:"start"`
	End      int64    `json:"end"`
	Fire     int      `json:"fire"`
	Payloads []string `json:"payloads"`
	Times    []int64  `json:"times"`
	// Replaces are the starts of the sessions this one took in.
	Replaces []int64 `json:"replaces,omitempty"`
	// Incremental windows: the accumulator's count and sum.
	Count int    `json:"count,omitempty"`
	Sum   uint64 `json:"sum,omitempty"`
}

// sortPayloads sorts the payloads, each time kept beside its payload.
func (r *windowResult) sortPayloads() {
	if len(r.Times) != len(r.Payloads) {
		slices.Sort(r.Payloads)
		return
	}
	idx := make([]int, len(r.Payloads))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(r.Payloads[a], r.Payloads[b]) })
	ps, ts := make([]string, len(idx)), make([]int64, len(idx))
	for i, j := range idx {
		ps[i], ts[i] = r.Payloads[j], r.Times[j]
	}
	r.Payloads, r.Times = ps, ts
}

// windowAcc is the incremental test handler's accumulator.
type windowAcc struct {
	Count int    `json:"count"`
	Sum   uint64 `json:"sum"`
}

// messageSum is what a message adds to a window's sum: a hash of its
// payload, so that a sum equal to the reference's says the same
// messages were added, each once.
func messageSum(payload []byte) uint64 {
	h := fnv.New32a()
	h.Write(payload)
	return uint64(h.Sum32())
}

// maxCrashes bounds the incremental handler's crashes of each kind (add,
// fire): enough to crash it mid-stream again and again, few enough that
// the restarts (each a new process, slower under the race detector) do
// not make the test's time, since a sliding window's every message is in
// several windows.
const maxCrashes = 12

// crashOnce panics the first time (across processes) it is called for
// kind-name, unless it already did for maxCrashes names of that kind.
func crashOnce(dir, kind, name string) {
	if done, _ := filepath.Glob(filepath.Join(dir, kind+"-*")); len(done) >= maxCrashes {
		return
	}
	path := filepath.Join(dir, kind+"-"+name)
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
		f.Close()
		panic("the window handler crashes, as asked, on " + path)
	}
}

func newIncrementalHandler(cfg windowConfig) plugin.Handler {
	return plugin.IncrementalWindow{
		Add: func(ctx context.Context, w *plugin.Window) ([]byte, error) {
			if cfg.Crash && (w.Start.UnixMilli()/1000)%3 == 1 {
				crashOnce(cfg.MarkerDir, "add", fmt.Sprintf("%s-%d", w.Key, w.Start.UnixMilli()))
			}
			var a windowAcc
			if w.Accumulator != nil {
				if err := json.Unmarshal(w.Accumulator, &a); err != nil {
					return nil, plugin.DeadLetter(err)
				}
			}
			for _, m := range w.Messages {
				a.Count++
				a.Sum += messageSum(m.Payload)
			}
			return json.Marshal(a)
		},
		Fire: func(ctx context.Context, w *plugin.Window) ([]plugin.Output, error) {
			if cfg.Crash && (w.Start.UnixMilli()/1000)%3 == 0 && w.Fire == 1 {
				crashOnce(cfg.MarkerDir, "fire", fmt.Sprintf("%s-%d", w.Key, w.Start.UnixMilli()))
			}
			var a windowAcc
			if err := json.Unmarshal(w.Accumulator, &a); err != nil {
				return nil, plugin.DeadLetter(err)
			}
			b, err := json.Marshal(windowResult{Key: w.Key, Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Fire: w.Fire, Count: a.Count, Sum: a.Sum})
			if err != nil {
				return nil, err
			}
			return []plugin.Output{{Topic: cfg.Output, Key: w.Key, Payload: b}}, nil
		},
	}
}

func newWindowHandler(_ context.Context, cfg windowConfig) (plugin.Handler, error) {
	if cfg.Output == "" {
		return nil, errors.New(`"output" is required`)
	}
	var f plugin.Handler = plugin.WindowFunc(func(ctx context.Context, w *plugin.Window) ([]plugin.Output, error) {
		if cfg.Crash && (w.Start.UnixMilli()/1000)%3 == 0 && w.Fire == 1 {
			name := filepath.Join(cfg.MarkerDir, fmt.Sprintf("crash-%s-%d", w.Key, w.Start.UnixMilli()/60_000))
			if f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				f.Close()
				panic("the window handler crashes, as asked, on " + name)
			}
		}
		r := windowResult{Key: w.Key, Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Fire: w.Fire}
		for _, s := range w.Replaces {
			r.Replaces = append(r.Replaces, s.UnixMilli())
		}
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
	if cfg.Incremental {
		f = newIncrementalHandler(cfg)
	}
	// Capped at contract version 4 it stands for an older binary, whose
	// SDK does not read an add and fire in one: the host must not send it
	// one, and it dies of one.
	older := os.Getenv("STREAMRUN_PLUGIN_MAX_CONTRACT_VERSION") == "4"
	return plugin.HandlerFunc(func(ctx context.Context, rw plugin.ResultWriter, batch []*plugin.Message) error {
		if cfg.BatchDelay > 0 {
			time.Sleep(cfg.BatchDelay)
		}
		for _, m := range batch {
			_, add := m.Properties[streamrun.PropertyWindowAdd]
			if _, fire := m.Properties[streamrun.PropertyWindowFire]; older && add && fire {
				panic("an add and fire in one reached a handler of contract version 4: " + m.Key)
			}
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
	m := map[string]any{"output": cfg.Output, "crash": cfg.Crash, "marker_dir": cfg.MarkerDir, "batch_delay": int64(cfg.BatchDelay), "incremental": cfg.Incremental}
	return pipelines.Handler{Plugin: exe, Env: map[string]string{roleEnv: "windowhandler"}, Config: m}
}
