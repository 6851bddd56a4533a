package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// needProc skips t where the plugin processes cannot be found in /proc.
func needProc(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("finds the plugin processes in /proc (Linux)")
	}
}

// children are the plugin processes of streamrun process pid, by the
// TAG their pipeline's handler env gives them, each list sorted.
func children(pid int) map[string][]int {
	out := map[string][]int{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", d.Name(), "status"))
		if err != nil || !bytes.Contains(status, fmt.Appendf(nil, "\nPPid:\t%d\n", pid)) || bytes.Contains(status, []byte("\nState:\tZ")) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if tag, ok := bytes.CutPrefix(kv, []byte("TAG=")); ok {
				out[string(tag)] = append(out[string(tag)], child)
			}
		}
	}
	for _, pids := range out {
		slices.Sort(pids)
	}
	return out
}

// publishStream publishes n messages "prefix-i" to topic over about d;
// sent counts the publish calls so far. Its done is closed once every
// receipt is in.
type publishStream struct {
	sent atomic.Int64
	done chan struct{}
	err  atomic.Pointer[error]
}

func streamTo(cl *pool.Client, topic, prefix string, n int, d time.Duration) *publishStream {
	s := &publishStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		steps := max(int(d/(10*time.Millisecond)), 1)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		i := 0
		for step := 1; step <= steps; step++ {
			for end := n * step / steps; i < end; i++ {
				wg.Add(1)
				s.sent.Add(1)
				cl.PublishAsync(ctx, topic, pool.Message{Payload: fmt.Appendf(nil, "%s-%d", prefix, i)}, func(_ pulsarwire.MessageID, err error) {
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

func (s *publishStream) wait(t *testing.T) {
	t.Helper()
	<-s.done
	if err := s.err.Load(); err != nil {
		t.Fatalf("publish: %v", *err)
	}
}

// seqs waits until o holds every "prefix-i" for i below n and returns
// how many outputs it holds.
func seqs(t *testing.T, o *outputs, n int, strip func(string) string) int {
	t.Helper()
	brokertest.Eventually(t, 2*time.Minute, fmt.Sprintf("all %d outputs (have %d)", n, o.len()), func() bool {
		seen := map[string]bool{}
		for _, m := range o.all() {
			seen[strip(string(m.Payload))] = true
		}
		return len(seen) >= n
	})
	return o.len()
}

func brokerConns(c *broker.Cluster) []uint64 {
	var ids []uint64
	for _, ci := range c.Connections(0) {
		ids = append(ids, ci.ID)
	}
	return ids
}

// On SIGHUP during a 100,000-message run, `streamrun run` re-reads its
// file: the pipeline left as it was keeps its plugin processes, the one
// whose batch size changed keeps them too, the removed one's stop, the
// new one runs; the broker sees the same connections before and after,
// and nothing is lost. A bad edit is refused with the loader's error
// (FILE:LINE:COL) in the log and the run goes on unchanged; SIGINT then
// stops it with status 0.
func TestRunReloadsOnSIGHUP(t *testing.T) {
	needProc(t)
	const (
		nKeep, nResize, nGone = 45_000, 45_000, 10_000
		nFresh                = 1000
	)
	c := brokertest.Start(t)
	dir := t.TempDir()
	bin := buildStreamrun(t)
	plugin := filepath.Join(dir, "uppercase")
	build := exec.Command("go", "build", "-o", plugin, "./examples/plugins/uppercase")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build uppercase: %v\n%s", err, out)
	}
	pub := newClient(t, c.ServiceURL())
	got := map[string]*outputs{}
	for _, name := range []string{"keep", "resize", "gone", "fresh"} {
		got[name] = collect(t, newClient(t, c.ServiceURL()), "rl-"+name+"-out")
	}
	pipe := func(name string, batch int) string {
		return fmt.Sprintf(`
  - name: %[1]s
    source: {topics: [rl-%[1]s-in], subscription: %[1]s, type: shared, initial_position: earliest}
    handler:
      plugin: %[2]s
      env: {TAG: %[1]s}
      config: {output: persistent://public/default/rl-%[1]s-out}
      instances: 2
      batch_size: %[3]d
    outputs: [persistent://public/default/rl-%[1]s-out]
`, name, plugin, batch)
	}
	head := "service_url: " + c.ServiceURL() + "\npipelines:"
	file := writePipelineFile(t, dir, "reload.yaml", head+pipe("keep", 100)+pipe("resize", 100)+pipe("gone", 100))
	p := startProc(t, "streamrun", dir, bin, nil, "run", "--log-format", "json", file)
	brokertest.Eventually(t, time.Minute, "6 plugin processes", func() bool {
		ch := children(p.cmd.Process.Pid)
		return len(ch["keep"]) == 2 && len(ch["resize"]) == 2 && len(ch["gone"]) == 2
	})
	brokertest.Eventually(t, time.Minute, "the pipelines subscribed", func() bool {
		return len(c.Consumers("persistent://public/default/rl-gone-in", "gone")) == 1
	})
	before := children(p.cmd.Process.Pid)
	accepted, conns := c.AcceptedConnections(0), brokerConns(c)

	streams := []*publishStream{
		streamTo(pub, "rl-keep-in", "keep", nKeep, 8*time.Second),
		streamTo(pub, "rl-resize-in", "resize", nResize, 8*time.Second),
		streamTo(pub, "rl-gone-in", "gone", nGone, 8*time.Second),
	}
	brokertest.Eventually(t, time.Minute, "a fifth of the stream through", func() bool { return got["keep"].len() >= nKeep/5 })

	writePipelineFile(t, dir, "reload.yaml", head+pipe("keep", 100)+pipe("resize", 10)+pipe("fresh", 100))
	t0 := time.Now()
	p.signal(t, syscall.SIGHUP)
	brokertest.Eventually(t, time.Minute, "the reload", func() bool { return strings.Contains(p.stderr.String(), `"msg":"reloaded"`) })
	t.Logf("SIGHUP to reloaded: %v", time.Since(t0))
	after := children(p.cmd.Process.Pid)
	for _, name := range []string{"keep", "resize"} {
		if !slices.Equal(after[name], before[name]) {
			t.Errorf("%s: plugin processes %v after the reload, %v before", name, after[name], before[name])
		}
	}
	if len(after["gone"]) != 0 || len(after["fresh"]) != 2 {
		t.Errorf("after the reload: removed pipeline's plugins %v, new pipeline's %v", after["gone"], after["fresh"])
	}
	publishKeyedless(t, pub, "rl-fresh-in", "fresh", nFresh)

	// A bad edit: refused, logged with the loader's position, nothing
	// changes.
	writePipelineFile(t, dir, "reload.yaml", head+pipe("keep", 100)+pipe("resize", 10)+pipe("fresh", 100)+"    batch_sise: 3\n")
	p.signal(t, syscall.SIGHUP)
	brokertest.Eventually(t, time.Minute, "the refusal", func() bool { return strings.Contains(p.stderr.String(), "reload refused") })
	if s := p.stderr.String(); !strings.Contains(s, "reload.yaml:") || !strings.Contains(s, "batch_sise") {
		t.Errorf("the refusal does not give the file's error:\n%s", tail(s, 2000))
	}
	if now := children(p.cmd.Process.Pid); !slices.Equal(now["keep"], before["keep"]) || !slices.Equal(now["fresh"], after["fresh"]) {
		t.Errorf("plugin processes changed after a refused reload: %v, were %v", now, after)
	}

	for _, s := range streams {
		s.wait(t)
	}
	same := func(s string) string { return strings.ToLower(s) }
	if n := seqs(t, got["keep"], nKeep, same); n != nKeep {
		t.Errorf("keep: %d outputs for %d inputs", n, nKeep)
	}
	if n := seqs(t, got["resize"], nResize, same); n != nResize {
		t.Errorf("resize: %d outputs for %d inputs", n, nResize)
	}
	seqs(t, got["fresh"], nFresh, same)
	if a := c.AcceptedConnections(0); a != accepted {
		t.Errorf("the broker accepted %d connections during the run", a-accepted)
	}
	if now := brokerConns(c); !slices.Equal(now, conns) {
		t.Errorf("live connections changed: %v before, %v after", conns, now)
	}
	// The removed pipeline: what is not at its output is still in its
	// subscription.
	var want []string
	outs := map[string]bool{}
	for _, m := range got["gone"].all() {
		outs[strings.ToLower(string(m.Payload))] = true
	}
	for i := range nGone {
		if s := fmt.Sprintf("gone-%d", i); !outs[s] {
			want = append(want, s)
		}
	}
	t.Logf("removed pipeline: %d outputs, %d left in its subscription", len(outs), len(want))
	receiveAll(t, newClient(t, c.ServiceURL()), "rl-gone-in", "gone", want)

	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGINT", code)
	}
}

// publishKeyedless publishes n messages "prefix-i" to topic and waits
// for their receipts.
func publishKeyedless(t *testing.T, cl *pool.Client, topic, prefix string, n int) {
	t.Helper()
	s := streamTo(cl, topic, prefix, n, 10*time.Millisecond)
	s.wait(t)
}

// With --watch, a Go-package handler whose source changes during a
// 100,000-message run is rebuilt and rolled out one instance at a time:
// every message submitted once the old instances are gone has its output
// from the new version, each message has exactly one output (none lost,
// none processed twice), and the broker sees no new connection. The time
// from the change to the last old instance stopping is logged.
func TestRunWatchSwapsAChangedHandler(t *testing.T) {
	needProc(t)
	const n = 100_000
	c := brokertest.Start(t)
	dir := t.TempDir()
	bin := buildStreamrun(t)
	repo := repoRoot(t)
	src, err := os.ReadFile(filepath.Join(repo, "examples", "plugins", "uppercase", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	const was = "Payload: bytes.ToUpper(m.Payload)"
	marked := func(marker string) []byte {
		s := strings.Replace(string(src), was, fmt.Sprintf("Payload: append([]byte(%q), m.Payload...)", marker+":"), 1)
		return []byte(strings.Replace(s, "\t\"bytes\"\n", "", 1))
	}
	if !bytes.Contains(src, []byte(was)) {
		t.Fatalf("the uppercase example no longer says %q", was)
	}
	if err := testkit.WriteModule(dir, "swaptest", repo); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "h"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "h", "main.go"), marked("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Offline: the module's requirements come from the module cache.
	env := []string{"GOFLAGS=-mod=mod", "GOPROXY=off"}
	// A first build settles go.mod's requirements.
	settle := exec.Command("go", "build", "-o", os.DevNull, "./h")
	settle.Dir, settle.Env = dir, append(os.Environ(), env...)
	if out, err := settle.CombinedOutput(); err != nil {
		t.Fatalf("go build ./h: %v\n%s", err, out)
	}
	file := writePipelineFile(t, dir, "swap.yaml", `
service_url: `+c.ServiceURL()+`
pipelines:
  - name: swap
    source: {topics: [sw-in], subscription: swap, type: shared, initial_position: earliest}
    handler:
      package: ./h
      env: {TAG: swap}
      config: {output: persistent://public/default/sw-out}
      instances: 3
    outputs: [persistent://public/default/sw-out]
`)
	pub := newClient(t, c.ServiceURL())
	got := collect(t, newClient(t, c.ServiceURL()), "sw-out")
	p := startProc(t, "streamrun", dir, bin, env, "run", "--log-format", "json", "--watch", "--watch-interval", "200ms",
		"--handler-cache", filepath.Join(dir, "cache"), file)
	brokertest.Eventually(t, 2*time.Minute, "3 plugin processes", func() bool { return len(children(p.cmd.Process.Pid)["swap"]) == 3 })
	brokertest.Eventually(t, time.Minute, "the pipeline subscribed", func() bool {
		return len(c.Consumers("persistent://public/default/sw-in", "swap")) == 1
	})
	old := children(p.cmd.Process.Pid)["swap"]
	accepted, conns := c.AcceptedConnections(0), brokerConns(c)

	s := streamTo(pub, "sw-in", "m", n, 15*time.Second)
	brokertest.Eventually(t, time.Minute, "a fifth of the stream through", func() bool { return got.len() >= n/5 })
	t0 := time.Now()
	if err := os.WriteFile(filepath.Join(dir, "h", "main.go"), marked("v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	var swapped int64
	brokertest.Eventually(t, 2*time.Minute, "the old plugin processes to stop", func() bool {
		now := children(p.cmd.Process.Pid)["swap"]
		for _, pid := range now {
			if slices.Contains(old, pid) {
				return false
			}
		}
		swapped = s.sent.Load()
		return len(now) == 3
	})
	took := time.Since(t0)
	t.Logf("from the source change to the last old instance stopping: %v (a go build included; 3 instances, %d of %d messages submitted by then)", took, swapped, n)
	s.wait(t)
	strip := func(p string) string { _, rest, _ := strings.Cut(p, ":"); return rest }
	if total := seqs(t, got, n, strip); total != n {
		t.Errorf("%d outputs for %d inputs: want one each", total, n)
	}
	v1, v2 := 0, 0
	for _, m := range got.all() {
		payload := string(m.Payload)
		seq, _ := strconv.Atoi(payload[strings.LastIndexByte(payload, '-')+1:])
		switch {
		case strings.HasPrefix(payload, "v1:"):
			v1++
			if int64(seq) >= swapped {
				t.Fatalf("output %q from the old version, submitted after the swap", payload)
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
	if a := c.AcceptedConnections(0); a != accepted {
		t.Errorf("the broker accepted %d connections during the run", a-accepted)
	}
	if now := brokerConns(c); !slices.Equal(now, conns) {
		t.Errorf("live connections changed: %v before, %v after", conns, now)
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Errorf("exit status %d after SIGINT", code)
	}
}
