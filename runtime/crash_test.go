package runtime_test

import (
	"context"
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

// The crash test's fixed shape: keys of the stream, and the pipeline's
// batch size and instances.
const (
	crashKeys      = 64
	crashBatchSize = 100
	crashInstances = 2
)

func testCrashes(t *testing.T, typ pipelines.SubscriptionType, cc crashCase) {
	n := crashMessages(t, cc.messages)
	produceFor := cc.produceFor // the stream lasts this long
	if produceFor == 0 {
		produceFor = 10 * time.Second
	}
	panics := cc.panics
	if panics == 0 {
		panics = 25
	}
	r := startCrashRun(t, typ, cc, n, max(n/panics, 1))

	ctx := testContext(t)
	produced := r.produce(ctx, produceFor)
	stopKiller := r.killer()
	<-produced
	if err := r.pubErr.Load(); err != nil {
		t.Fatalf("publish: %v", *err)
	}
	r.waitForEveryMessage()
	stopKiller()
	waitFor(t, "every input settled", func() bool { return r.c.Backlog(r.in, "crashy") == 0 })

	r.checkCrashesLostNothing()
	r.checkBrokerConnectionsUnchanged()
	if !typ.KeepsOrder() {
		return
	}
	r.checkEachKeyInOrder()
	if h := r.host.health("crashy"); h.State != streamrun.StateHealthy && h.State != streamrun.StateDegraded {
		t.Errorf("health %+v", h)
	}
}

// crashMessages is the size of the stream: def, or STREAMRUN_CRASH_MESSAGES.
func crashMessages(t *testing.T, def int) int {
	s := os.Getenv(crashMessagesEnv)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive number", crashMessagesEnv, s)
	}
	return v
}

// crashRun is one run of the crash test: the broker, the host running the
// "crashy" pipeline from in to out, what reached out, and what the broker
// had when the run began.
type crashRun struct {
	t        *testing.T
	n        int   // messages in the stream
	minKills int64 // kills the stream waits for before it ends
	c        *broker.Cluster
	pub      *pool.Client
	in, out  string
	got      *collector
	host     *running
	tail     *logTail // the host's log, shown only if the test fails

	maxInFlight int64    // messages a crash may have in flight
	accepted    int64    // broker connections accepted when the run began
	conns       []uint64 // the broker's live connections then

	kills  atomic.Int64
	pubErr atomic.Pointer[error]
}

// startCrashRun starts the broker, the collector of the output and a host
// running the pipeline, whose handler panics on every panicEvery-th
// message, and notes the broker's connections once every client is in.
func startCrashRun(t *testing.T, typ pipelines.SubscriptionType, cc crashCase, n, panicEvery int) *crashRun {
	c := cluster(t)
	r := &crashRun{t: t, n: n, minKills: int64(cc.minKills), c: c, pub: client(t, c), tail: &logTail{}}
	r.in, r.out = topic(t, "in"), topic(t, "out")
	r.got = collect(t, client(t, c), r.out)

	r.host = runHost(t, c, streamrun.Options{
		// Kept, and shown only if the test fails: every crash logs the
		// handler's stack.
		Logger: slog.New(slog.NewTextHandler(r.tail, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}, pipelines.Pipeline{
		Name:   "crashy",
		Source: pipelines.Source{Topics: []string{r.in}, Subscription: "crashy", Type: typ, InitialPosition: pipelines.Earliest},
		Handler: func() pipelines.Handler {
			h := cc.handler(testConfig{Output: r.out, PanicEvery: panicEvery, MarkerDir: t.TempDir()})
			h.BatchSize, h.Instances = crashBatchSize, crashInstances
			return h
		}(),
		Outputs: []string{r.out},
	})
	r.maxInFlight = int64(max(4*crashBatchSize*crashInstances, pipelines.DefaultMinInFlight))

	// Every client is connected now: from here on the broker must see no
	// new connection and lose none.
	r.accepted = c.AcceptedConnections(0)
	r.conns = connIDs(c)
	t.Logf("broker connections at start: %d accepted, live %v", r.accepted, r.conns)
	return r
}

func crashKey(i int) string { return fmt.Sprintf("key-%d", i%crashKeys) }

// produce publishes the stream on a goroutine of its own: four fifths of
// it over produceFor in steps of 10 ms, the rest in a trickle while the
// kills are not all in (a stream that stopped would leave the killer
// nothing to kill), then at once. The channel closes when every publish
// has been answered; the first error is in pubErr.
func (r *crashRun) produce(ctx context.Context, produceFor time.Duration) <-chan struct{} {
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		var wg sync.WaitGroup
		i := 0
		send := func(end int) {
			for ; i < end; i++ {
				wg.Add(1)
				r.pub.PublishAsync(ctx, r.in, pool.Message{Key: crashKey(i), Payload: fmt.Appendf(nil, "%s-%d", crashKey(i), i)},
					func(_ pulsarwire.MessageID, err error) {
						if err != nil {
							r.pubErr.CompareAndSwap(nil, &err)
						}
						wg.Done()
					})
			}
		}
		n := r.n
		steps := int(produceFor / (10 * time.Millisecond))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for s := 1; s <= steps && ctx.Err() == nil; s++ {
			send(n * 4 / 5 * s / steps)
			<-tick.C
		}
		for i < n && r.kills.Load() < r.minKills && ctx.Err() == nil {
			send(min(i+max(n/1000, 1), n))
			<-tick.C
		}
		send(n)
		wg.Wait()
	}()
	return produced
}

// killer starts the killer: every 150-400 ms it SIGKILLs one plugin
// process, at random, among those that have been up 200 ms and answered
// a batch, so that no batch is killed twice in a row. The function it
// returns stops the killer and waits for it.
func (r *crashRun) killer() (stop func()) {
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
			victims := r.victims()
			if len(victims) == 0 {
				continue
			}
			if err := syscall.Kill(victims[rand.N(len(victims))], syscall.SIGKILL); err == nil {
				r.kills.Add(1)
			}
		}
	}()
	return func() {
		close(stopKiller)
		<-killerDone
	}
}

// victims are the pids of the plugin processes that are up, have been
// for 200 ms, and have answered a batch.
func (r *crashRun) victims() []int {
	var victims []int
	for _, ih := range r.host.health("crashy").Instances {
		if ih.Up && ih.Pid != 0 && ih.Batches > 0 && time.Since(ih.Since) >= 200*time.Millisecond {
			victims = append(victims, ih.Pid)
		}
	}
	return victims
}

// waitForEveryMessage waits until every sequence number of the stream has
// reached the output, failing with what is missing and the host's last
// log lines after testTimeout.
func (r *crashRun) waitForEveryMessage() {
	t, n := r.t, r.n
	seen := make([]int, n)
	for deadline := time.Now().Add(testTimeout); !(r.got.len() >= n && distinct(t, r.got, seen) == n); {
		if time.Now().After(deadline) {
			distinct(t, r.got, seen)
			var missing []int
			for i, k := range seen {
				if k == 0 && len(missing) < 20 {
					missing = append(missing, i)
				}
			}
			t.Logf("the host's last log lines:\n%s", r.tail)
			t.Fatalf("timed out waiting for all %d messages at the output: %d arrived, missing %v...; stats %+v; health %+v; backlog %d; consumers %+v",
				n, r.got.len(), missing, r.host.stats("crashy"), r.host.health("crashy"), r.c.Backlog(r.in, "crashy"), r.c.Consumers(r.in, "crashy"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkCrashesLostNothing checks the host's side: every kill was seen as a
// crash, enough kills happened, duplicates stay within what the crashes
// had in flight, and nothing was dead-lettered or retried.
func (r *crashRun) checkCrashesLostNothing() {
	t, n := r.t, r.n
	s := r.host.stats("crashy")
	k := r.kills.Load()
	dups := r.got.len() - n
	t.Logf("%d messages; %d kills, %d crashes in all (kills and panics), %d restarts; %d duplicates at the output; %d broker connections accepted since the start; stats %+v",
		n, k, s.Crashes, s.Restarts, dups, r.c.AcceptedConnections(0)-r.accepted, s)
	if k < r.minKills {
		t.Errorf("%d kills, want at least %d (the stream ended first)", k, r.minKills)
	}
	if s.Crashes < k {
		t.Errorf("%d crashes seen by the host, fewer than the %d kills", s.Crashes, k)
	}
	// A crash loses at most what was in flight: its batch and those behind
	// it. (A crash publishes nothing of the batch it interrupts, so in
	// practice there are none.)
	if bound := s.Crashes * r.maxInFlight; int64(dups) > bound {
		t.Errorf("%d duplicates, more than %d crashes × %d in flight", dups, s.Crashes, r.maxInFlight)
	}
	if s.DeadLettered != 0 || s.Retried != 0 {
		t.Errorf("%d dead-lettered, %d retried; want none", s.DeadLettered, s.Retried)
	}
}

// checkBrokerConnectionsUnchanged checks the broker's side: the same
// connections, none accepted since the start (on every subscription
// type).
func (r *crashRun) checkBrokerConnectionsUnchanged() {
	if a := r.c.AcceptedConnections(0); a != r.accepted {
		r.t.Errorf("the broker accepted %d connections during the test", a-r.accepted)
	}
	if now := connIDs(r.c); !slices.Equal(now, r.conns) {
		r.t.Errorf("live connections changed: %v at start, %v at the end", r.conns, now)
	}
}

// checkEachKeyInOrder checks each key's messages arrived in order (a
// message seen again may repeat an older one: only first appearances
// count).
func (r *crashRun) checkEachKeyInOrder() {
	last := map[string]int{}
	first := make([]bool, r.n)
	for _, m := range r.got.all() {
		seq := seqOf(r.t, string(m.Payload))
		if first[seq] {
			continue
		}
		first[seq] = true
		if prev, ok := last[m.Key]; ok && seq < prev {
			r.t.Fatalf("key %s: %d after %d", m.Key, seq, prev)
		}
		last[m.Key] = seq
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
