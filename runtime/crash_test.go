package runtime_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// crashMessagesEnv sets the crash test's size. Default 200,000 for the Go
// handler (-short: 20,000, which still kills the plugin at least 20
// times) and 100,000 for the Python one.
const crashMessagesEnv = "STREAMRUN_CRASH_MESSAGES"

// The crash test: while a pipeline of two plugin instances carries a
// stream of messages, the plugin processes are killed with SIGKILL at
// random moments, at least 20 times, and the handler panics on some
// messages. Every message reaches the output, none is lost, duplicates
// stay within what was in flight, each key keeps its order (KeyShared),
// nothing is dead-lettered, and the broker sees the same connections from
// start to end: the crashes never reach them. It runs on KeyShared (one
// batch in flight per instance) and on Shared (two: a kill takes both,
// and a panic answers both).
func TestCrashes(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	for _, typ := range []pipelines.SubscriptionType{pipelines.KeyShared, pipelines.Shared} {
		t.Run(string(typ), func(t *testing.T) {
			testCrashes(t, typ, crashCase{messages: n, minKills: 20, handler: self})
		})
	}
}

// crashCase is what a run of the crash test varies: the handler (given
// the test's config) and how many messages and kills at least.
type crashCase struct {
	messages int // STREAMRUN_CRASH_MESSAGES overrides it
	minKills int
	handler  func(testConfig) pipelines.Handler
	// produceFor is how long the stream lasts; default 10s. panics is
	// how many messages the handler panics (raises) on, once each;
	// default 25. A handler slow to start needs a longer stream and fewer
	// panics for its kills: each crash keeps an instance down while it
	// restarts, and the killer picks only processes that are up and have
	// answered.
	produceFor time.Duration
	panics     int
}

func testCrashes(t *testing.T, typ pipelines.SubscriptionType, cc crashCase) {
	n := cc.messages
	if s := os.Getenv(crashMessagesEnv); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("%s=%q: want a positive number", crashMessagesEnv, s)
		}
		n = v
	}
	minKills := int64(cc.minKills)
	const (
		keys      = 64
		batchSize = 100
		instances = 2
	)
	produceFor := cc.produceFor // the stream lasts this long
	if produceFor == 0 {
		produceFor = 10 * time.Second
	}
	panics := cc.panics
	if panics == 0 {
		panics = 25
	}
	panicEvery := max(n/panics, 1)

	tail := &logTail{}
	c := cluster(t)
	pub := client(t, c)
	in, out := topic(t, "in"), topic(t, "out")
	got := collect(t, client(t, c), out)
	key := func(i int) string { return fmt.Sprintf("key-%d", i%keys) }

	host := runHost(t, c, streamrun.Options{
		// Kept, and shown only if the test fails: every crash logs the
		// handler's stack.
		Logger: slog.New(slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}, pipelines.Pipeline{
		Name:   "crashy",
		Source: pipelines.Source{Topics: []string{in}, Subscription: "crashy", Type: typ, InitialPosition: pipelines.Earliest},
		Handler: func() pipelines.Handler {
			h := cc.handler(testConfig{Output: out, PanicEvery: panicEvery, MarkerDir: t.TempDir()})
			h.BatchSize, h.Instances = batchSize, instances
			return h
		}(),
		Outputs: []string{out},
	})
	maxInFlight := int64(max(4*batchSize*instances, pipelines.DefaultMinInFlight))

	// Every client is connected now: from here on the broker must see no
	// new connection and lose none.
	accepted := c.AcceptedConnections(0)
	conns := connIDs(c)
	t.Logf("broker connections at start: %d accepted, live %v", accepted, conns)

	// The stream: n messages over produceFor, in steps of 10 ms.
	ctx := testContext(t)
	var kills atomic.Int64
	produced := make(chan struct{})
	var pubErr atomic.Pointer[error]
	go func() {
		defer close(produced)
		var wg sync.WaitGroup
		i := 0
		send := func(end int) {
			for ; i < end; i++ {
				wg.Add(1)
				pub.PublishAsync(ctx, in, pool.Message{Key: key(i), Payload: fmt.Appendf(nil, "%s-%d", key(i), i)},
					func(_ pulsarwire.MessageID, err error) {
						if err != nil {
							pubErr.CompareAndSwap(nil, &err)
						}
						wg.Done()
					})
			}
		}
		// Four fifths over produceFor, in steps of 10 ms.
		steps := int(produceFor / (10 * time.Millisecond))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for s := 1; s <= steps && ctx.Err() == nil; s++ {
			send(n * 4 / 5 * s / steps)
			<-tick.C
		}
		// The rest in a trickle while the kills are not all in (a stream
		// that stopped would leave the killer nothing to kill), then at
		// once.
		for i < n && kills.Load() < minKills && ctx.Err() == nil {
			send(min(i+max(n/1000, 1), n))
			<-tick.C
		}
		send(n)
		wg.Wait()
	}()

	// The killer: every 150-400 ms, SIGKILL one plugin process, at
	// random, among those that have been up 200 ms and answered a batch,
	// so that no batch is killed twice in a row.
	stopKiller := make(chan struct{})
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stopKiller:
				return
			case <-time.After(150*time.Millisecond + rand.N(250*time.Millisecond)):
			}
			var victims []int
			for _, ih := range host.health("crashy").Instances {
				if ih.Up && ih.Pid != 0 && ih.Batches > 0 && time.Since(ih.Since) >= 200*time.Millisecond {
					victims = append(victims, ih.Pid)
				}
			}
			if len(victims) == 0 {
				continue
			}
			if err := syscall.Kill(victims[rand.N(len(victims))], syscall.SIGKILL); err == nil {
				kills.Add(1)
			}
		}
	}()

	<-produced
	if err := pubErr.Load(); err != nil {
		t.Fatalf("publish: %v", *err)
	}
	seen := make([]int, n)
	for deadline := time.Now().Add(testTimeout); !(got.len() >= n && distinct(t, got, seen) == n); {
		if time.Now().After(deadline) {
			distinct(t, got, seen)
			var missing []int
			for i, k := range seen {
				if k == 0 && len(missing) < 20 {
					missing = append(missing, i)
				}
			}
			t.Logf("the host's last log lines:\n%s", tail)
			t.Fatalf("timed out waiting for all %d messages at the output: %d arrived, missing %v...; stats %+v; health %+v; backlog %d; consumers %+v",
				n, got.len(), missing, host.stats("crashy"), host.health("crashy"), c.Backlog(in, "crashy"), c.Consumers(in, "crashy"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stopKiller)
	<-killerDone
	waitFor(t, "every input settled", func() bool { return c.Backlog(in, "crashy") == 0 })

	s := host.stats("crashy")
	k := kills.Load()
	dups := got.len() - n
	t.Logf("%d messages; %d kills, %d crashes in all (kills and panics), %d restarts; %d duplicates at the output; %d broker connections accepted since the start; stats %+v",
		n, k, s.Crashes, s.Restarts, dups, c.AcceptedConnections(0)-accepted, s)
	if k < minKills {
		t.Errorf("%d kills, want at least %d (the stream ended first)", k, minKills)
	}
	if s.Crashes < k {
		t.Errorf("%d crashes seen by the host, fewer than the %d kills", s.Crashes, k)
	}
	// A crash loses at most what was in flight: its batch and those behind
	// it. (A crash publishes nothing of the batch it interrupts, so in
	// practice there are none.)
	if bound := s.Crashes * maxInFlight; int64(dups) > bound {
		t.Errorf("%d duplicates, more than %d crashes × %d in flight", dups, s.Crashes, maxInFlight)
	}
	if s.DeadLettered != 0 || s.Retried != 0 {
		t.Errorf("%d dead-lettered, %d retried; want none", s.DeadLettered, s.Retried)
	}
	// The broker side: the same connections, none accepted since (on
	// every subscription type).
	if a := c.AcceptedConnections(0); a != accepted {
		t.Errorf("the broker accepted %d connections during the test", a-accepted)
	}
	if now := connIDs(c); !slices.Equal(now, conns) {
		t.Errorf("live connections changed: %v at start, %v at the end", conns, now)
	}
	if !typ.KeepsOrder() {
		return
	}
	// Each key's messages in order (a message seen again may repeat an
	// older one: only first appearances count).
	last := map[string]int{}
	first := make([]bool, n)
	for _, m := range got.all() {
		seq := seqOf(t, string(m.Payload))
		if first[seq] {
			continue
		}
		first[seq] = true
		if prev, ok := last[m.Key]; ok && seq < prev {
			t.Fatalf("key %s: %d after %d", m.Key, seq, prev)
		}
		last[m.Key] = seq
	}
	if h := host.health("crashy"); h.State != streamrun.StateHealthy && h.State != streamrun.StateDegraded {
		t.Errorf("health %+v", h)
	}
}

// distinct counts the distinct sequence numbers that reached c, using
// seen (indexed by sequence number) as scratch.
func distinct(t testing.TB, c *collector, seen []int) int {
	clear(seen)
	d := 0
	for _, m := range c.all() {
		seq := seqOf(t, string(m.Payload))
		if seq < 0 || seq >= len(seen) {
			t.Fatalf("output %q out of range", m.Payload)
		}
		if seen[seq] == 0 {
			d++
		}
		seen[seq]++
	}
	return d
}

// connIDs lists the ids of broker 0's live connections.
func connIDs(c *broker.Cluster) []uint64 {
	var ids []uint64
	for _, ci := range c.Connections(0) {
		ids = append(ids, ci.ID)
	}
	return ids
}

// logTail keeps the last lines written to it, each cut to 300 bytes.
type logTail struct {
	mu    sync.Mutex
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	line := string(p)
	if len(line) > 300 {
		line = line[:300] + "...\n"
	}
	l.mu.Lock()
	l.lines = append(l.lines, line)
	if len(l.lines) > 200 {
		l.lines = l.lines[len(l.lines)-200:]
	}
	l.mu.Unlock()
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "")
}
