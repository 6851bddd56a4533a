package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// The test binary plays four parts, chosen by roleEnv: the tests
// (unset), a handler plugin serving testHandler ("handler"), a handler
// plugin that answers wrongly on the wire (rawRole, rawhandler_test.go),
// and a host running a pipeline until it is killed ("host", for the
// orphan test).
const roleEnv = "STREAMRUN_RUNTIME_TEST_ROLE"

// startChildHost starts the test binary in role (roleEnv) with env
// added, its stderr in the test's log as name, and waits until it prints
// "running"; it is killed when the test ends, unless the test killed it.
func startChildHost(t *testing.T, role, name string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	cmd.Stderr = brokertest.LogWriter(t, name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "running" {
		t.Fatalf("the %s said %q", name, line)
	}
	return cmd
}

// bin holds the example plugins, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "handler":
		if f := os.Getenv("STREAMRUN_TEST_PLUGIN_CPUPROFILE"); f != "" {
			// For looking into the plugin's side of a benchmark: the
			// profile is written when the host closes the handler.
			out, err := os.Create(fmt.Sprintf("%s.%d", f, os.Getpid()))
			if err == nil && pprof.StartCPUProfile(out) == nil {
				profiling = true
			}
		}
		// The test handler keeps no state between calls, so it may take
		// the two batches a Shared pipeline sends at once.
		plugin.ServeWithOptions(plugin.Configure(newTestHandler), plugin.ServeOptions{Concurrency: 2})
		return
	case rawRole:
		serveRawHandler()
		return
	case "windowhandler":
		if f := os.Getenv("STREAMRUN_TEST_PLUGIN_CPUPROFILE"); f != "" {
			// As the handler role's, written when Serve returns (the
			// host closed the handler).
			out, err := os.Create(fmt.Sprintf("%s.%d", f, os.Getpid()))
			if err == nil && pprof.StartCPUProfile(out) == nil {
				defer pprof.StopCPUProfile()
			}
		}
		plugin.Serve(plugin.Configure(newWindowHandler))
		return
	case "windowhost":
		windowChildHost()
		return
	case "host":
		childHost()
		return
	case "statehost":
		stateHost()
		return
	case "eohost":
		eoChildHost()
		return
	}
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

// testTimeout bounds every wait of a test.
const testTimeout = 90 * time.Second

// testContext ends after testTimeout, or with the test.
func testContext(t testing.TB) context.Context { return brokertest.Context(t, testTimeout) }

// example is the path of a built example plugin.
func example(name string) string { return filepath.Join(bin, name) }

// self is the handler config of a pipeline whose plugin is this test
// binary serving testHandler.
func self(cfg testConfig) pipelines.Handler {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return pipelines.Handler{
		Plugin: exe,
		Env:    map[string]string{roleEnv: "handler"},
		Config: cfg.asMap(),
	}
}

// testLogger logs at level and above into a log kept with the test and
// shown if it fails (brokertest.LogWriter); writing after the test ended
// is harmless.
func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(brokertest.LogWriter(t, "log"), &slog.HandlerOptions{Level: level}))
}

// cluster starts an embedded broker for t, logging warnings only.
func cluster(t testing.TB, opts ...func(*broker.Options)) *broker.Cluster {
	return brokertest.Start(t, append([]func(*broker.Options){func(o *broker.Options) {
		o.Logger = testLogger(t, slog.LevelWarn)
	}}, opts...)...)
}

// client opens a pool client of its own (apart from the host's).
func client(t testing.TB, c *broker.Cluster, opts ...func(*pool.Options)) *pool.Client {
	t.Helper()
	return clientURL(t, c.ServiceURL(), opts...)
}

// clientURL is client for the broker at url.
func clientURL(t testing.TB, url string, opts ...func(*pool.Options)) *pool.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := pool.Options{ServiceURL: url}
	for _, f := range opts {
		f(&o)
	}
	cl, err := pool.New(ctx, o)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.Close(ctx)
	})
	return cl
}

// poolOpts are the options of a pool client of c.
func poolOpts(c *broker.Cluster) pool.Options { return pool.Options{ServiceURL: c.ServiceURL()} }

// topic is a fresh topic name for t.
func topic(t testing.TB, what string) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("persistent://public/default/%s-%s", name, what)
}

// running is a host running pipelines on a goroutine.
type running struct {
	host   *streamrun.Host
	cancel context.CancelFunc
	done   chan error
}

// runHost starts a host with opts (its service URL set to c's) running ps
// and stops it at cleanup, failing t if Run fails.
func runHost(t testing.TB, c *broker.Cluster, opts streamrun.Options, ps ...pipelines.Pipeline) *running {
	t.Helper()
	if opts.Pool.ServiceURL == "" && opts.Client == nil {
		opts.Pool.ServiceURL = c.ServiceURL()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t, slog.LevelWarn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := streamrun.New(ctx, opts)
	if err != nil {
		t.Fatalf("runtime.New: %v", err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	r := &running{host: h, cancel: rcancel, done: make(chan error, 1)}
	go func() { r.done <- h.Run(rctx, ps...) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	r.waitRunning(t)
	return r
}

// stop cancels Run and returns its result.
func (r *running) stop() error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if !ok {
			return nil
		}
		close(r.done)
		return err
	case <-time.After(60 * time.Second):
		return errors.New("Run did not return within 60s of its ctx ending")
	}
}

// waitRunning waits until every pipeline runs.
func (r *running) waitRunning(t testing.TB) {
	t.Helper()
	waitFor(t, "pipelines running", func() bool {
		hs := r.host.Health()
		if len(hs) == 0 {
			return false
		}
		for _, h := range hs {
			if h.State != streamrun.StateHealthy && h.State != streamrun.StateDegraded {
				return false
			}
		}
		return true
	})
}

func (r *running) stats(name string) streamrun.Stats {
	for _, s := range r.host.Stats() {
		if s.Pipeline == name {
			return s
		}
	}
	return streamrun.Stats{}
}

func (r *running) health(name string) streamrun.PipelineHealth {
	for _, h := range r.host.Health() {
		if h.Pipeline == name {
			return h
		}
	}
	return streamrun.PipelineHealth{}
}

// waitFor waits until cond holds, failing t after testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	brokertest.Eventually(t, testTimeout, what, cond)
}

// publish publishes payloads to topic with keys from key (nil: none) and
// waits for every receipt.
func publish(t testing.TB, cl *pool.Client, topic string, n int, payload func(i int) string, key func(i int) string) {
	t.Helper()
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for i := range n {
		m := pool.Message{Payload: []byte(payload(i))}
		if key != nil {
			m.Key = key(i)
		}
		wg.Add(1)
		cl.PublishAsync(ctx, topic, m, func(_ pulsarID, err error) {
			defer wg.Done()
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("publish to %s: %v", topic, err)
	default:
	}
}

// collector reads a topic from its start into memory: what the topic
// holds, each message once. A message the broker sends the collector
// again (its connection dropped while its acknowledgements were still
// grouped, DefaultAckGroupTime) has the ID of one it holds and is only
// counted in repeats: it is the test's own consumer seeing a message
// twice, not a second output.
type collector struct {
	mu      sync.Mutex
	msgs    []*subscribe.Message
	ids     map[collectedID]bool
	repeats int
	wake    chan struct{}

	cons   *subscribe.Consumer
	cancel context.CancelFunc
	done   chan struct{}
}

func collect(t testing.TB, cl *pool.Client, topic string) *collector {
	t.Helper()
	ctx := testContext(t)
	cons, err := subscribe.New(ctx, cl, subscribe.Options{
		Topics: []string{topic}, Subscription: "collector", InitialPosition: subscribe.Earliest,
		ReceiverQueue: 5000,
	})
	if err != nil {
		t.Fatalf("collect %s: %v", topic, err)
	}
	return startCollector(t, cons, true)
}

// startCollector reads what cons receives into a collector until the
// test ends, acknowledging it if ack.
func startCollector(t testing.TB, cons *subscribe.Consumer, ack bool) *collector {
	rctx, cancel := context.WithCancel(context.Background())
	c := &collector{cons: cons, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1), ids: map[collectedID]bool{}}
	go func() {
		defer close(c.done)
		buf := make([]*subscribe.Message, 1000)
		for {
			n, err := cons.ReceiveBatch(rctx, buf)
			if err != nil {
				return
			}
			c.mu.Lock()
			for _, m := range buf[:n] {
				id := collectedID{m.Topic, m.ID}
				id.id.BatchSize = 0 // carried along, not part of the identity
				if c.ids[id] {
					c.repeats++
					continue
				}
				c.ids[id] = true
				c.msgs = append(c.msgs, m)
			}
			c.mu.Unlock()
			for _, m := range buf[:n] {
				if ack {
					cons.Ack(rctx, m)
				}
			}
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(c.close)
	return c
}

// collectedID is a message's identity: its topic and its ID.
type collectedID struct {
	topic string
	id    pulsarID
}

func (c *collector) close() {
	c.cancel()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.cons.Close(ctx)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

func (c *collector) all() []*subscribe.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*subscribe.Message(nil), c.msgs...)
}

// waitLen waits until at least n messages arrived.
// checkOutputs fails t unless msgs are exactly the payloads of want,
// each once, each with the key want gives it.
func checkOutputs(t testing.TB, msgs []*subscribe.Message, want map[string]string) {
	t.Helper()
	want = maps.Clone(want)
	for _, m := range msgs {
		key, ok := want[string(m.Payload)]
		if !ok {
			t.Fatalf("unexpected output %q", m.Payload)
		}
		if m.Key != key {
			t.Errorf("output %q has key %q, want %q", m.Payload, m.Key, key)
		}
		delete(want, string(m.Payload))
	}
	if len(want) > 0 {
		t.Fatalf("%d outputs missing", len(want))
	}
}

func (c *collector) waitLen(t testing.TB, n int) []*subscribe.Message {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d messages (have %d)", n, c.len()), func() bool { return c.len() >= n })
	return c.all()
}

// waitQuiet waits until n messages arrived and then asserts nothing more
// arrives for a while.
func (c *collector) payloads() []string {
	var out []string
	for _, m := range c.all() {
		out = append(out, string(m.Payload))
	}
	return out
}

// unbatched makes a client publish every message as an entry of its own,
// so that the broker counts each one's redeliveries apart.
func unbatched(o *pool.Options) { o.Producer.Batching.Disabled = true }

func seqOf(t testing.TB, payload string) int {
	t.Helper()
	i := strings.LastIndexByte(payload, '-')
	n, err := strconv.Atoi(payload[i+1:])
	if err != nil {
		t.Fatalf("payload %q: no sequence number", payload)
	}
	return n
}

type pulsarID = pulsarwire.MessageID
