package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/control"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// bin holds the example plugins, built once.
var bin string

func TestMain(m *testing.M) {
	dir, err := brokertest.BuildPlugins()
	if err != nil {
		log.Fatal(err)
	}
	bin = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const testTimeout = 2 * time.Minute

// host is a run of a pipeline file on a real broker (Apache Pulsar with
// STREAMRUN_PULSAR_URL, else the embedded one), with its control API.
type host struct {
	t    *testing.T
	ctx  context.Context
	file string
	run  *streamrun.Run
	srv  *control.Server
	base string // the API's base URL
	c    *http.Client
	// token is sent as a Bearer token when set.
	token string
	// in and out are the topics of the pipeline "up" (the uppercase
	// example plugin).
	in, out string
}

// fileFor is a pipeline file: "up" uppercases in to out, allowing a tap;
// "other" reads other and allows none. extra is added to "up".
func fileFor(in, out, extra string) string {
	return fmt.Sprintf(`# the control API's test file
pipelines:
  - name: up
    source: {topics: [%s], subscription: up, initial_position: earliest}
    handler:
      plugin: %s
      config: {output: %s}
      instances: 2
    outputs: [%s]
    tap: true%s
  - name: other
    source: {topics: [%s-other], subscription: other}
    handler:
      plugin: %s
      config: {output: %s-other-out}
`, in, filepath.Join(bin, "uppercase"), out, out, extra, in, filepath.Join(bin, "uppercase"), in)
}

// startHost starts the run and its control API as o says (Addr and the
// run are filled in).
func startHost(t *testing.T, o control.Options) *host {
	t.Helper()
	peer := brokertest.Target(t)
	ctx := brokertest.Context(t, testTimeout)
	topic := brokertest.TopicName(t)
	h := &host{t: t, ctx: ctx, in: topic, out: topic + "-out", c: &http.Client{Timeout: time.Minute}}
	h.file = filepath.Join(t.TempDir(), "pipelines.yaml")
	if err := os.WriteFile(h.file, []byte(fileFor(h.in, h.out, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(brokertest.LogWriter(t, "run"), nil))
	r, err := streamrun.Start(ctx, streamrun.Options{Files: []string{h.file}, ServiceURL: peer.URL, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	h.run = r
	t.Cleanup(func() {
		r.Stop()
		if err := r.Wait(); err != nil {
			t.Errorf("the run ended with %v", err)
		}
	})
	brokertest.Eventually(t, time.Minute, "the pipelines to run", func() bool { return r.Host().Ready() == nil })
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.RateInterval == 0 {
		o.RateInterval = 200 * time.Millisecond
	}
	o.Logger = logger.With("component", "control")
	srv, err := control.Serve(r, o)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	t.Cleanup(srv.CloseQuietly)
	h.base = strings.TrimSuffix(srv.URL(), "/") + control.APIPrefix
	return h
}

// do sends a request to the API and returns the status and body.
func (h *host) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(h.ctx, method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// want sends a request and fails unless it is answered with status; it
// decodes the body into v when v is not nil.
func (h *host) want(status int, method, path string, body, v any) []byte {
	h.t.Helper()
	code, b := h.do(method, path, body)
	if code != status {
		h.t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, status)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			h.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return b
}

// pipeline is the API's view of one pipeline, the fields the tests read.
type pipeline struct {
	Name      string   `json:"name"`
	File      string   `json:"file"`
	State     string   `json:"state"`
	Paused    bool     `json:"paused"`
	Tap       bool     `json:"tap"`
	Inputs    []string `json:"inputs"`
	Outputs   []string `json:"outputs"`
	Config    map[string]any
	Instances []struct {
		Instance int    `json:"instance"`
		Up       bool   `json:"up"`
		Pid      int    `json:"pid"`
		Restarts int    `json:"restarts"`
		Last     string `json:"last_error"`
	} `json:"instances"`
	Counts struct {
		Received, Acked, InFlight int64
	} `json:"counts"`
	Rates struct {
		Received, Acked float64
	} `json:"rates"`
	Backlog *int64 `json:"backlog"`
}

func (h *host) pipelines() map[string]pipeline {
	h.t.Helper()
	var got struct{ Pipelines []pipeline }
	h.want(http.StatusOK, "GET", "/pipelines", nil, &got)
	m := map[string]pipeline{}
	for _, p := range got.Pipelines {
		m[p.Name] = p
	}
	return m
}

// publish publishes n messages "<prefix>-<i>" to the pipeline's input and
// waits for their receipts.
func (h *host) publish(prefix string, n int) {
	h.t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := range n {
		wg.Add(1)
		h.run.Publish(h.ctx, h.in, pool.Message{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		h.t.Fatalf("publish: %v", errs[0])
	}
}

// outputs reads the pipeline's output topic from the start and counts
// each payload it sees.
type outputs struct {
	mu   sync.Mutex
	seen map[string]int
	stop func()
}

func (h *host) readOutputs() *outputs {
	h.t.Helper()
	c, err := subscribe.New(h.ctx, h.run.Client(), subscribe.Options{Topics: []string{h.out}, Subscription: "control-test",
		InitialPosition: subscribe.Earliest})
	if err != nil {
		h.t.Fatal(err)
	}
	o := &outputs{seen: map[string]int{}}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := c.Receive(ctx)
			if err != nil {
				return
			}
			o.mu.Lock()
			o.seen[string(m.Payload)]++
			o.mu.Unlock()
			_ = c.Ack(ctx, m)
		}
	}()
	o.stop = func() {
		cancel()
		<-done
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = c.Close(cctx)
	}
	h.t.Cleanup(o.stop)
	return o
}

// count is how many distinct payloads with prefix were seen, and whether
// any was seen twice.
func (o *outputs) count(prefix string) (n int, twice bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for p, c := range o.seen {
		if strings.HasPrefix(p, prefix) {
			n++
			twice = twice || c > 1
		}
	}
	return n, twice
}
