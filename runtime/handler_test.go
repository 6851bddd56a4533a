package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/streamrun/streamrun/plugin"
)

// testConfig is the handler config of testHandler, the handler the test
// binary serves as a plugin (and that tests also run in-process).
//
// By default it echoes every message to Output, keeping its key and
// properties. A
// payload's prefix picks another outcome:
//
//	retry:N:...   retried (after 20ms) while its redelivery count is below N
//	retryall:...  retried every time
//	dead:...      dead-lettered with reason "asked to"
//	drop:...      dropped
//	hang:...      the first time: the handler sleeps for a minute
//	boom:...      the handler panics, every time
//	exit:...      the plugin process exits (status 3), every time
//	fields:...    its output's payload is what the handler was given of
//	              the message, as JSON (seen)
type testConfig struct {
	Output string `json:"output"`
	// Upper uppercases the payloads it echoes.
	Upper bool `json:"upper,omitempty"`
	// PanicEvery: the handler panics, once per message, on messages whose
	// payload's trailing number is a multiple of it. Once is kept in
	// marker files in MarkerDir, so it holds across processes.
	PanicEvery int    `json:"panic_every,omitempty"`
	MarkerDir  string `json:"marker_dir,omitempty"`
	// Jitter sleeps up to this long on each batch, at random.
	Jitter time.Duration `json:"jitter,omitempty"`
	// BatchDelay sleeps this long on each batch.
	BatchDelay time.Duration `json:"batch_delay,omitempty"`
	// SlowUntil (Unix milliseconds, 0: always) ends Jitter and BatchDelay:
	// the handler is fast from then on.
	SlowUntil int64 `json:"slow_until,omitempty"`
	// Count keeps a count per key in the pipeline's keyed state: each
	// message adds one, and its output's payload is "key=count" (the
	// other payload prefixes keep their meaning); a message whose payload
	// starts "undo:" is retried, the first time, after its change.
	Count bool `json:"count,omitempty"`
}

func (c testConfig) asMap() map[string]any {
	m := map[string]any{"output": c.Output}
	if c.Upper {
		m["upper"] = true
	}
	if c.PanicEvery > 0 {
		m["panic_every"] = c.PanicEvery
		m["marker_dir"] = c.MarkerDir
	}
	if c.MarkerDir != "" {
		m["marker_dir"] = c.MarkerDir
	}
	if c.Jitter > 0 {
		m["jitter"] = int64(c.Jitter)
	}
	if c.BatchDelay > 0 {
		m["batch_delay"] = int64(c.BatchDelay)
	}
	if c.Count {
		m["count"] = true
	}
	if c.SlowUntil != 0 {
		m["slow_until"] = c.SlowUntil
	}
	return m
}

type testHandler struct {
	cfg testConfig
}

// profiling: the plugin writes a CPU profile, to be stopped at Close.
var profiling bool

func (h *testHandler) Close(context.Context) error {
	if profiling {
		pprof.StopCPUProfile()
	}
	slog.Info("test handler closed")
	return nil
}

func newTestHandler(_ context.Context, cfg testConfig) (plugin.Handler, error) {
	if cfg.Output == "" {
		return nil, errors.New(`"output" is required`)
	}
	return &testHandler{cfg: cfg}, nil
}

// once reports whether this is the first time name is asked for, across
// processes.
func (h *testHandler) once(name string) bool {
	f, err := os.OpenFile(filepath.Join(h.cfg.MarkerDir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// delay waits as the config says before a batch is handled.
func (h *testHandler) delay(ctx context.Context) error {
	if h.cfg.SlowUntil != 0 && time.Now().UnixMilli() >= h.cfg.SlowUntil {
		return nil
	}
	if h.cfg.Jitter > 0 {
		time.Sleep(rand.N(h.cfg.Jitter))
	}
	if h.cfg.BatchDelay > 0 {
		select {
		case <-time.After(h.cfg.BatchDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (h *testHandler) Process(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
	if err := h.delay(ctx); err != nil {
		return err
	}
	for _, m := range batch {
		// A view of the payload, not a copy: the benchmark's identity
		// handler allocates nothing per message of its own (a copy of
		// each payload made the plugin process, whose heap is small,
		// collect garbage several times a second: docs/benchmarks/design.md,
		// "The benchmark's handler stops allocating"). p is read during
		// the call only; what keeps any of it makes a string of its own.
		p := unsafe.String(unsafe.SliceData(m.Payload), len(m.Payload))
		switch {
		case strings.HasPrefix(p, "retry:"):
			n, _ := strconv.Atoi(strings.SplitN(p, ":", 3)[1])
			if int(m.RedeliveryCount) < n {
				w.Retry(m, 20*time.Millisecond, fmt.Sprintf("delivery %d of %d", m.RedeliveryCount+1, n+1))
				continue
			}
		case strings.HasPrefix(p, "retryall:"):
			w.Retry(m, 0, "never good enough")
			continue
		case strings.HasPrefix(p, "dead:"):
			w.DeadLetter(m, "asked to")
			continue
		case strings.HasPrefix(p, "drop:"):
			w.Drop(m, "asked to")
			continue
		case strings.HasPrefix(p, "hang:"):
			if h.once(p) {
				time.Sleep(time.Minute)
			}
		case strings.HasPrefix(p, "stale:"):
			// Once: an answer about a message that is not in the batch.
			if h.once(p) {
				w.Ack(&plugin.Message{Payload: []byte("of no batch")})
			}
		case strings.HasPrefix(p, "huge:"):
			// An output over the broker's 5 MiB limit.
			w.Output(m, plugin.Output{Topic: h.cfg.Output, Payload: bytes.Repeat([]byte("x"), 6<<20)})
			continue
		case strings.HasPrefix(p, "fields:"):
			// What the handler was given of the message, as JSON.
			b, err := json.Marshal(seenMessage(m))
			if err != nil {
				return err
			}
			w.Output(m, plugin.Output{Topic: h.cfg.Output, Payload: b})
			continue
		case strings.HasPrefix(p, "boom:"):
			panic("boom on " + p)
		case strings.HasPrefix(p, "exit:"):
			os.Exit(3)
		case h.cfg.PanicEvery > 0:
			if i := strings.LastIndexByte(p, '-'); i >= 0 {
				if n, err := strconv.Atoi(p[i+1:]); err == nil && n%h.cfg.PanicEvery == 0 && h.once(p) {
					panic("told to panic on " + p)
				}
			}
		}
		out := m.Payload
		if h.cfg.Upper {
			out = bytes.ToUpper(out)
		}
		if h.cfg.Count {
			var n int
			if _, err := m.State().GetJSON(&n); err != nil {
				return err
			}
			n++
			if err := m.State().PutJSON(n); err != nil {
				w.DeadLetter(m, err.Error())
				continue
			}
			out = fmt.Appendf(nil, "%s=%d", m.Key, n)
			if strings.HasPrefix(p, "undo:") && h.once(p) {
				// Its change was made; the retry must discard it.
				w.Retry(m, 10*time.Millisecond, "undo")
				continue
			}
		}
		w.Output(m, plugin.Output{Topic: h.cfg.Output, Key: m.Key, Properties: m.Properties, Payload: out})
	}
	return nil
}

// seen is what a handler was given of a message (the "fields:" payload).
type seen struct {
	ID, Topic, Key, TraceParent, TraceState string
	OrderingKey                             []byte
	Properties                              map[string]string
	Payload                                 []byte
	PublishTime, EventTime                  time.Time
	RedeliveryCount                         uint32
	Index                                   int
}

func seenMessage(m *plugin.Message) seen {
	return seen{m.ID, m.Topic, m.Key, m.TraceParent, m.TraceState, m.OrderingKey, m.Properties,
		m.Payload, m.PublishTime, m.EventTime, m.RedeliveryCount, m.Index()}
}
