package streamrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// A run given a data directory (`streamrun run --data`) keeps the spill
// file of a keyed-state pipeline whose values outgrow its cache under it,
// in StateSpillDir, not in the system's temporary directory; the file is
// gone once the run stops. With the embedded broker, which keeps its
// data there, and with Apache Pulsar (STREAMRUN_PULSAR_URL).
func TestARunWithADataDirectorySpillsKeyedStateUnderIt(t *testing.T) {
	dir := t.TempDir()
	ctx := brokertest.Context(t, 2*time.Minute)
	in := brokertest.TopicName(t)
	const n, keys = 200, 50
	count := func(_ context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
		for _, m := range batch {
			var c int
			if _, err := m.State().GetJSON(&c); err != nil {
				return err
			}
			if err := m.State().PutJSON(c + 1); err != nil {
				return err
			}
		}
		return nil
	}
	o := Options{
		Pipelines: []pipelines.File{{Pipelines: []pipelines.Pipeline{{
			Name:    "p",
			Source:  pipelines.Source{Topics: []string{in}, Subscription: "s", Type: pipelines.Exclusive, InitialPosition: pipelines.Earliest},
			Handler: pipelines.Handler{Plugin: "/run/in/this/process"},
			// About 5 keys' worth of memory: the others spill.
			State: pipelines.State{Enabled: true, Changelog: in + "-state", CacheBytes: 5 * 180},
		}}}},
		Broker:        BrokerOptions{DataDir: dir, Listen: "127.0.0.1:0", HTTP: "-"},
		LocalHandlers: map[string]func() plugin.Handler{"p": func() plugin.Handler { return plugin.HandlerFunc(count) }},
		Notices:       io.Discard,
		Logger:        slog.New(slog.NewTextHandler(testkit.LogWriter(t, "run"), nil)),
	}
	if u := brokertest.PulsarURL(); u != "" {
		o.ServiceURL = u
	}
	r, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			r.Stop()
			if err := r.Wait(); err != nil {
				t.Errorf("Wait: %v", err)
			}
		}
	}
	defer stop()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		r.Publish(ctx, in, pool.Message{Key: fmt.Sprintf("k%02d", i%keys), Payload: []byte("x")}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				t.Errorf("publish: %v", err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	brokertest.Eventually(t, time.Minute, "every message acknowledged", func() bool {
		st := r.Host().Stats()
		return len(st) == 1 && st[0].Acked >= n
	})
	spills := func() []string {
		names, err := filepath.Glob(filepath.Join(dir, StateSpillDir, "*.spill"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if f := spills(); len(f) != 1 {
		t.Errorf("spill files %v under the data directory's %s, want one: %d keys in a cache of about 5", f, StateSpillDir, keys)
	}
	stop()
	if f := spills(); len(f) != 0 {
		t.Errorf("spill files %v left once the run stopped", f)
	}
}
