package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// stream publishes n messages "prefix-i" to topic at an even pace over
// about d, in steps of 10 ms; sent counts the publish calls made so far.
type stream struct {
	sent atomic.Int64
	done chan struct{}
	err  atomic.Pointer[error]
}

func startStream(t *testing.T, cl *pool.Client, topic, prefix string, n int, d time.Duration) *stream {
	t.Helper()
	ctx := testContext(t)
	s := &stream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		steps := max(int(d/(10*time.Millisecond)), 1)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		i := 0
		for step := 1; step <= steps && ctx.Err() == nil; step++ {
			for end := n * step / steps; i < end; i++ {
				wg.Add(1)
				s.sent.Add(1)
				cl.PublishAsync(ctx, topic, pool.Message{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)},
					func(_ pulsarwire.MessageID, err error) {
						if err != nil {
							s.err.CompareAndSwap(nil, &err)
						}
						wg.Done()
					})
			}
			<-tick.C
		}
		wg.Wait()
	}()
	return s
}

func (s *stream) wait(t *testing.T) {
	t.Helper()
	<-s.done
	if err := s.err.Load(); err != nil {
		t.Fatalf("publish: %v", *err)
	}
}

// pids are the plugin processes of a pipeline's instances.
func pids(r *running, name string) []int {
	var out []int
	for _, ih := range r.health(name).Instances {
		out = append(out, ih.Pid)
	}
	return out
}

// everyOne waits until c holds every sequence number below n at least
// once, and returns how many outputs it holds.
func everyOne(t *testing.T, c *collector, n int) int {
	t.Helper()
	seen := make([]int, n)
	waitFor(t, fmt.Sprintf("all %d outputs (have %d)", n, c.len()), func() bool { return c.len() >= n && distinct(t, c, seen) == n })
	return c.len()
}

// During a 100,000-message run the host's pipelines are reloaded: one
// keeps its configuration, one gets a new batch size, one is removed and
// one is new. The unchanged pipeline keeps its plugin processes, the
// resized one keeps its processes and subscription and takes batches of
// the new size, the removed one's processes stop with everything it took
// acknowledged only after its output, the new one runs; the broker sees
// the same connections before and after; nothing is lost. Then bad edits
// (an invalid pipeline, a handler that does not exist) are refused and
// the pipelines run on untouched.
func TestReload(t *testing.T) {
	const (
		n       = 100_000
		nKeep   = 45_000
		nResize = 45_000
		nGone   = n - nKeep - nResize
		nFresh  = 1000
	)
	c := cluster(t)
	pub := client(t, c)
	in := map[string]string{}
	out := map[string]string{}
	got := map[string]*collector{}
	for _, name := range []string{"keep", "resize", "gone", "fresh"} {
		in[name], out[name] = topic(t, name+"-in"), topic(t, name+"-out")
		got[name] = collect(t, client(t, c), out[name])
	}
	pipe := func(name string, batch int) pipelines.Pipeline {
		h := self(testConfig{Output: out[name]})
		h.Instances, h.BatchSize = 2, batch
		return pipelines.Pipeline{
			Name:    name,
			Source:  pipelines.Source{Topics: []string{in[name]}, Subscription: name, Type: pipelines.Shared, InitialPosition: pipelines.Earliest},
			Handler: h,
			Outputs: []string{out[name]},
		}
	}
	// Batch sizes seen by the resized pipeline, after the reload.
	var reloaded atomic.Bool
	var biggest atomic.Int64
	hooks := streamrun.Hooks{Handled: func(pipeline string, _, size int, _ time.Duration, err error) {
		if pipeline == "resize" && reloaded.Load() && err == nil && int64(size) > biggest.Load() {
			biggest.Store(int64(size))
		}
	}}
	r := runHost(t, c, streamrun.Options{Hooks: hooks}, pipe("keep", 100), pipe("resize", 100), pipe("gone", 100))
	accepted, conns := c.AcceptedConnections(0), connIDs(c)
	keepPids, resizePids, gonePids := pids(r, "keep"), pids(r, "resize"), pids(r, "gone")

	streams := []*stream{
		startStream(t, pub, in["keep"], "keep", nKeep, 8*time.Second),
		startStream(t, pub, in["resize"], "resize", nResize, 8*time.Second),
		startStream(t, pub, in["gone"], "gone", nGone, 8*time.Second),
	}
	waitFor(t, "a fifth of the stream through", func() bool { return got["keep"].len() >= nKeep/5 })

	ctx := testContext(t)
	t0 := time.Now()
	resized := pipe("resize", 10)
	if err := r.host.Reload(ctx, pipe("keep", 100), resized, pipe("fresh", 100)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	reloaded.Store(true)
	t.Logf("reload applied in %v", time.Since(t0))
	checkReloadApplied(t, r, keepPids, resizePids, gonePids)
	publish(t, pub, in["fresh"], nFresh, func(i int) string { return fmt.Sprintf("fresh-%d", i) }, nil)
	checkBadEditsRefused(ctx, t, r, pipe, resized, keepPids)

	for _, s := range streams {
		s.wait(t)
	}
	everyOne(t, got["keep"], nKeep)
	everyOne(t, got["resize"], nResize)
	everyOne(t, got["fresh"], nFresh)
	waitFor(t, "every input acknowledged", func() bool {
		return r.stats("keep").Acked == nKeep && r.stats("resize").Acked == nResize
	})
	for _, name := range []string{"keep", "resize"} {
		if s := r.stats(name); s.Received != s.Acked || s.Crashes != 0 {
			t.Errorf("%s: %+v: want every message received once, acknowledged once", name, s)
		}
	}
	if b := biggest.Load(); b == 0 || b > 10 {
		t.Errorf("after the reload the resized pipeline took batches of up to %d, want at most 10", b)
	}
	if a := c.AcceptedConnections(0); a != accepted {
		t.Errorf("the broker accepted %d connections during the test (the host's pool keeps its connections)", a-accepted)
	}
	if now := connIDs(c); !slices.Equal(now, conns) {
		t.Errorf("live connections changed: %v before, %v after", conns, now)
	}
	checkRemovedPipelineLostNothing(t, c, r, got["gone"], in["gone"], nGone)
}

// checkReloadApplied checks the processes and pipelines after the reload:
// the unchanged and resized pipelines keep their plugins, the removed
// one's have stopped, and the new one runs.
func checkReloadApplied(t *testing.T, r *running, keepPids, resizePids, gonePids []int) {
	if got := pids(r, "keep"); !slices.Equal(got, keepPids) {
		t.Errorf("the unchanged pipeline's plugins are %v, were %v", got, keepPids)
	}
	if got := pids(r, "resize"); !slices.Equal(got, resizePids) {
		t.Errorf("the resized pipeline's plugins are %v, were %v", got, resizePids)
	}
	for _, pid := range gonePids {
		if alive(pid) {
			t.Errorf("plugin %d of the removed pipeline still runs", pid)
		}
	}
	var names []string
	for _, h := range r.host.Health() {
		names = append(names, h.Pipeline)
	}
	if want := []string{"fresh", "keep", "resize"}; !slices.Equal(names, want) {
		t.Errorf("pipelines after the reload: %v, want %v", names, want)
	}
}

// checkBadEditsRefused reloads an invalid pipeline and one whose handler
// does not exist: both are refused, and nothing changes.
func checkBadEditsRefused(ctx context.Context, t *testing.T, r *running, pipe func(string, int) pipelines.Pipeline, resized pipelines.Pipeline, keepPids []int) {
	bad := pipe("keep", 100)
	bad.Source.Subscription = ""
	err := r.host.Reload(ctx, bad, resized, pipe("fresh", 100))
	var fe *pipelines.FieldError
	if !errors.As(err, &fe) || fe.Path != "pipelines[0].source.subscription" {
		t.Errorf("Reload of an invalid pipeline: %v", err)
	}
	missing := pipe("keep", 100)
	missing.Handler.Plugin = filepath.Join(t.TempDir(), "nonesuch")
	if err := r.host.Reload(ctx, missing, resized, pipe("fresh", 100)); err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("Reload with a missing handler: %v", err)
	}
	if got := pids(r, "keep"); !slices.Equal(got, keepPids) {
		t.Errorf("after the refused reloads the plugins are %v, were %v", got, keepPids)
	}
}

// checkRemovedPipelineLostNothing checks the removed pipeline: what it
// acknowledged reached its output (got); the rest of its n inputs waits
// in its subscription on topic in, where a consumer that takes it over
// finds it; and its stats are no longer reported.
func checkRemovedPipelineLostNothing(t *testing.T, c *broker.Cluster, r *running, got *collector, in string, n int) {
	seen := make([]int, n)
	outs := distinct(t, got, seen)
	if a := r.stats("gone").Acked; a != 0 {
		t.Errorf("the removed pipeline's stats are still reported: %d acked", a)
	}
	rest := takeOver(t, client(t, c), in, "gone")
	waitFor(t, fmt.Sprintf("every message of the removed pipeline at its output or in its subscription (%d outputs)", outs), func() bool {
		for _, m := range rest.all() {
			seen[seqOf(t, string(m.Payload))]++
		}
		missing := slices.Index(seen, 0)
		if missing >= 0 {
			distinct(t, got, seen)
		}
		return missing < 0
	})
	t.Logf("removed pipeline: %d outputs, %d left in its subscription", outs, rest.len())
}

// takeOver reads what is left in subscription sub of topic, without
// acknowledging it.
func takeOver(t *testing.T, cl *pool.Client, topic, sub string) *collector {
	t.Helper()
	cons, err := subscribe.New(testContext(t), cl, subscribe.Options{Topics: []string{topic}, Subscription: sub, Type: subscribe.Shared})
	if err != nil {
		t.Fatalf("subscribe %s: %v", sub, err)
	}
	return startCollector(t, cons, false)
}

// buildMarked builds a handler plugin from the uppercase example's
// source, changed to prefix each output with marker, into bin, in a
// module of its own under dir.
func buildMarked(t *testing.T, dir, marker, bin string) {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(repo, "examples", "plugins", "uppercase", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	const was = "Payload: bytes.ToUpper(m.Payload)"
	if !strings.Contains(string(src), was) {
		t.Fatalf("the uppercase example no longer says %q", was)
	}
	changed := strings.Replace(string(src), was, fmt.Sprintf("Payload: append([]byte(%q), m.Payload...)", marker+":"), 1)
	changed = strings.Replace(changed, "\t\"bytes\"\n", "", 1)
	mod := filepath.Join(dir, marker)
	if err := testkit.WriteModule(mod, "swaptest", repo); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = mod
	// Offline: everything comes from the module cache.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the %s handler: %v\n%s", marker, err, b)
	}
}

// During a 100,000-message run the handler binary is rebuilt with a
// visible change and the host reloaded: the new version is rolled out
// one instance at a time, every instance slot up throughout; every
// message submitted after the roll-out has its output from the new
// version; every message is received once, acknowledged once, none lost;
// the broker sees no new connection. The time from the change to the
// last old instance stopping is logged.
func TestLiveHandlerSwap(t *testing.T) {
	const n = 100_000
	dir := t.TempDir()
	bin, next := filepath.Join(dir, "handler"), filepath.Join(dir, "handler.next")
	var wg sync.WaitGroup
	wg.Go(func() { buildMarked(t, dir, "v1", bin) })
	wg.Go(func() { buildMarked(t, dir, "v2", next) })
	wg.Wait()
	if t.Failed() {
		return
	}

	c := cluster(t)
	pub := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	got := collect(t, client(t, c), out)
	p := pipelines.Pipeline{
		Name:   "swap",
		Source: pipelines.Source{Topics: []string{in}, Subscription: "swap", Type: pipelines.Shared, InitialPosition: pipelines.Earliest},
		Handler: pipelines.Handler{Plugin: bin, Config: map[string]any{"output": out}, Instances: 3,
			BatchSize: 100},
		Outputs: []string{out},
	}
	r := runHost(t, c, streamrun.Options{}, p)
	accepted, conns := c.AcceptedConnections(0), connIDs(c)
	old := pids(r, "swap")
	s := startStream(t, pub, in, "m", n, 8*time.Second)
	waitFor(t, "a fifth of the stream through", func() bool { return got.len() >= n/5 })

	// The change: the binary is rebuilt in place (a new file renamed over
	// the old path, as a build does), and the host told to reload.
	ctx := testContext(t)
	stopWatch := watchSlotsDown(r, "swap")
	t0 := time.Now()
	if err := os.Rename(next, bin); err != nil {
		t.Fatal(err)
	}
	if err := r.host.Reload(ctx, p); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	took := time.Since(t0)
	after := s.sent.Load() // every message submitted from here on goes to v2
	down := stopWatch()
	t.Logf("from the change to the last old instance stopping: %v (3 instances, batches of 100, %d of %d messages submitted)", took, after, n)
	checkRolledOut(t, r, old, down)

	s.wait(t)
	total := everyOne(t, got, n)
	waitFor(t, "every input acknowledged", func() bool { return r.stats("swap").Acked == n })
	if st := r.stats("swap"); st.Received != n || st.Acked != n || st.Crashes != 0 || total != n {
		t.Errorf("stats %+v, %d outputs: want %d received, acknowledged and output once each", st, total, n)
	}
	checkOutputsByVersion(t, got, after)
	if a := c.AcceptedConnections(0); a != accepted {
		t.Errorf("the broker accepted %d connections during the test", a-accepted)
	}
	if now := connIDs(c); !slices.Equal(now, conns) {
		t.Errorf("live connections changed: %v before, %v after", conns, now)
	}
}

// A reload that changes a pipeline's source, instances and handler config
// at once drains it, subscribes to the new source, starts the new
// instances with the new config and closes the old ones; a pipeline can
// be reloaded again after; Reload refuses when the host does not run.
func TestReloadChangesSourceInstancesAndConfig(t *testing.T) {
	c := cluster(t)
	cl := client(t, c)
	a, b, out := topic(t, "a"), topic(t, "b"), topic(t, "out")
	got := collect(t, cl, out)
	p := pipelines.Pipeline{
		Name:    "move",
		Source:  pipelines.Source{Topics: []string{a}, Subscription: "move", InitialPosition: pipelines.Earliest},
		Handler: self(testConfig{Output: out}),
		Outputs: []string{out},
	}
	h, err := streamrun.New(testContext(t), streamrun.Options{Pool: poolOpts(c), Logger: testLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(testContext(t), p); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Reload before Run: %v", err)
	}
	h.Close(testContext(t))

	r := runHost(t, c, streamrun.Options{}, p)
	publish(t, cl, a, 10, func(i int) string { return fmt.Sprintf("a-%d", i) }, nil)
	got.waitLen(t, 10)
	old := pids(r, "move")

	moved := p
	moved.Source.Topics = []string{b}
	moved.Handler = self(testConfig{Output: out, Upper: true})
	moved.Handler.Instances = 2
	if err := r.host.Reload(testContext(t), moved); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	now := pids(r, "move")
	if len(now) != 2 || slices.Contains(now, old[0]) || alive(old[0]) {
		t.Errorf("instances %v after the reload (were %v; old alive %v)", now, old, alive(old[0]))
	}
	publish(t, cl, a, 5, func(i int) string { return fmt.Sprintf("a-late-%d", i) }, nil)
	publish(t, cl, b, 10, func(i int) string { return fmt.Sprintf("b-%d", i) }, nil)
	msgs := got.waitLen(t, 20)
	for _, m := range msgs[10:] {
		if !strings.HasPrefix(string(m.Payload), "B-") {
			t.Errorf("output %q after the reload: want only b's messages, uppercased", m.Payload)
		}
	}
	if n := c.Backlog(a, "move"); n <= 0 {
		t.Errorf("the old subscription's backlog is %d: the late messages on a were taken", n)
	}
	if err := r.host.Reload(testContext(t), p); err != nil {
		t.Fatalf("Reload back: %v", err)
	}
	got.waitLen(t, 25) // a's late messages, now read again
	if s := r.stats("move"); s.Crashes != 0 || s.Restarts != 0 {
		t.Errorf("stats %+v", s)
	}
}

// watchSlotsDown counts, every millisecond on a goroutine, the instance
// slots of pipeline that are down. The function it returns stops the
// watch and returns the count.
func watchSlotsDown(r *running, pipeline string) (stop func() int64) {
	stopWatch := make(chan struct{})
	var down atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			for _, ih := range r.health(pipeline).Instances {
				if !ih.Up {
					down.Add(1)
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	return func() int64 {
		close(stopWatch)
		watch.Wait()
		return down.Load()
	}
}

// checkRolledOut checks the roll-out replaced every old plugin process
// by a swap, not a restart, and no slot was ever seen down.
func checkRolledOut(t *testing.T, r *running, old []int, down int64) {
	for _, pid := range old {
		if alive(pid) {
			t.Errorf("old plugin %d still runs after the roll-out", pid)
		}
	}
	h := r.health("swap")
	for _, ih := range h.Instances {
		if ih.Swaps != 1 || ih.Restarts != 0 || slices.Contains(old, ih.Pid) {
			t.Errorf("instance after the roll-out: %+v", ih)
		}
	}
	if down != 0 {
		t.Errorf("an instance slot was seen down %d times during the roll-out", down)
	}
}

// checkOutputsByVersion checks every output came from v1 or v2, none from
// v1 for a message submitted from after on, and some from each.
func checkOutputsByVersion(t *testing.T, got *collector, after int64) {
	v1, v2 := 0, 0
	for _, m := range got.all() {
		payload := string(m.Payload)
		seq := seqOf(t, payload)
		switch {
		case strings.HasPrefix(payload, "v1:"):
			v1++
			if int64(seq) >= after {
				t.Fatalf("output %q from the old version, submitted after the roll-out", payload)
			}
		case strings.HasPrefix(payload, "v2:"):
			v2++
		default:
			t.Fatalf("output %q from neither version", payload)
		}
	}
	t.Logf("%d outputs from v1, %d from v2", v1, v2)
	if v1 == 0 || v2 == 0 {
		t.Errorf("%d outputs from v1, %d from v2: want both", v1, v2)
	}
}
