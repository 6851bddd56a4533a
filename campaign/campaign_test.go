package campaign_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pool"
)

// campaignEnv turns the campaign on: "short" (the CI form, about three
// minutes: two minutes on the embedded broker, one on Apache Pulsar when
// STREAMRUN_PULSAR_URL is set), "long" (30 minutes on the embedded
// broker), or a Go duration for the embedded part ("2h").
const campaignEnv = "STREAMRUN_CAMPAIGN"

// reportEnv names where the report goes: <path>.json and <path>.md (the
// Apache Pulsar part: <path>-pulsar.json, .md). Default: the test's
// temporary directory, printed.
const reportEnv = "STREAMRUN_CAMPAIGN_REPORT"

// exactlyEnv adds the exactly_once pipelines where the broker has
// transactions on: any value adds them beside the four others, "only"
// runs them alone (a cheaper run that looks at exactly once only).
const exactlyEnv = "STREAMRUN_CAMPAIGN_EXACTLY"

// faultsEnv narrows the fault kinds to a comma-separated list of their
// names ("plugin-sigkill,host-kill-9"), to look at some alone; default:
// every kind the broker allows.
const faultsEnv = "STREAMRUN_CAMPAIGN_FAULTS"

// logLevelEnv is the hosts' log level (default warn): info logs, among
// others, each time a window pipeline reads its windows back.
const logLevelEnv = "STREAMRUN_CAMPAIGN_LOG_LEVEL"

// seedEnv fixes the random choices (default: the time), so that a run can
// be replayed as far as timing allows.
const seedEnv = "STREAMRUN_CAMPAIGN_SEED"

// plan is what a campaign run varies.
type plan struct {
	duration  time.Duration // of the fault phase
	rate      int           // messages a second per pipeline
	gap       time.Duration // most time between a recovery and the next fault
	slowFor   time.Duration // a slow consumer lasts this long
	answerFor time.Duration // ServiceNotReady, TooManyRequests, a broker down
	burst     int           // messages per pipeline published at once during a slow consumer
}

// burstSize is the size of a burst's messages.
const burstSize = 1024

func planFor(t *testing.T, pulsar bool) plan {
	v := os.Getenv(campaignEnv)
	if v == "" {
		t.Skipf("the fault campaign runs only with %s=short|long|<duration> (scripts/campaign)", campaignEnv)
	}
	p := plan{duration: 2 * time.Minute, rate: 100, gap: 2 * time.Second, slowFor: 6 * time.Second, answerFor: 2 * time.Second, burst: 5000}
	switch v {
	case "short":
		if pulsar {
			p.duration = time.Minute
		}
	case "long":
		p.duration, p.slowFor, p.answerFor, p.burst = 30*time.Minute, 15*time.Second, 3*time.Second, 20000
		if pulsar {
			t.Skip("the long campaign runs on the embedded broker only; the short one covers Apache Pulsar")
		}
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want short, long or a positive Go duration", campaignEnv, v)
		}
		p.duration = d
		if d >= 10*time.Minute {
			p.slowFor, p.answerFor, p.burst = 15*time.Second, 3*time.Second, 20000
		}
		if pulsar {
			t.Skip("a campaign of a given duration runs on the embedded broker only; the short one covers Apache Pulsar")
		}
	}
	return p
}

// env is a campaign in progress.
type env struct {
	plan
	t       *testing.T
	dir     string
	control string // the chaos handler's order files
	rng     *rand.Rand
	broker  *proc // nil against Apache Pulsar
	// pulsarPid: Apache Pulsar standalone's JVM, when found; a new one
	// after each pulsar-kill-9.
	pulsarPid  atomic.Int64
	standalone *standalone // the one pulsar-kill-9 kills; nil otherwise
	brokerURLs []string
	serviceURL string
	adminURL   string
	hosts      []*proc
	restart    []*proc // hosts killed, to start again after recovery
	hostKills  int
	pipes      []*pipe
	kinds      []faultKind
	http       *http.Client
	client     *pool.Client // the campaign's own: publishes and collects
	// txn: the broker has transactions on, so exactly_once pipelines run
	// beside the others.
	txn bool
	// counterOnly: eo-counter alone (TestCampaignPulsarBrokerKill).
	counterOnly bool
	// sequence, when set, is the faults to inject, in this order, each
	// once; the fault phase ends after the last (duration unused).
	sequence []faultKind
	// recoverWithin, when set, replaces recoveryLimit.
	recoverWithin time.Duration
	// counts: the final check of each counting pipeline; windows: of
	// each window pipeline.
	counts  []countCheck
	windows []windowCheck

	errMu sync.Mutex
	errs  []string // collector trouble, logged in the report

	peakHost, peakBroker atomic.Int64
}

func (e *env) logErr(s string) {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if len(e.errs) < 50 {
		e.errs = append(e.errs, time.Now().UTC().Format(time.TimeOnly)+" "+s)
	}
}

// TestCampaignEmbedded is the fault campaign against the embedded broker
// in a process of its own: `streamrun broker --data --brokers 3
// --fault-api`, two `streamrun run` hosts of four pipelines (Key_Shared
// and Shared on partitioned topics, Exclusive, Failover on a partitioned
// topic), every fault kind.
func TestCampaignEmbedded(t *testing.T) {
	p := planFor(t, false)
	e := newEnv(t, p)
	base, httpPort, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	e.broker = &proc{name: "broker", log: filepath.Join(e.dir, "broker.log"), args: []string{
		"broker", "--listen", fmt.Sprintf("127.0.0.1:%d", base), "--http", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--data", filepath.Join(e.dir, "data"), "--brokers", "3", "--fault-api", "--transactions", "--log-level", "warn",
	}}
	e.txn = true
	if err := e.broker.start("streamrun broker ready"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.broker.stop)
	for i := range 3 {
		e.brokerURLs = append(e.brokerURLs, fmt.Sprintf("pulsar://127.0.0.1:%d", base+i))
	}
	e.serviceURL = e.brokerURLs[0]
	e.adminURL = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	e.kinds = onlyKinds(t, faultKinds)
	e.run(t, "embedded")
}

// TestCampaignPulsar is the short campaign against Apache Pulsar
// standalone, with the faults that do not need the embedded broker's
// process or fault API: plugin kills, panics, hangs and garbage, a slow
// consumer, kill -9 of a host, topic unloads.
func TestCampaignPulsar(t *testing.T) {
	url, httpURL := os.Getenv("STREAMRUN_PULSAR_URL"), os.Getenv("STREAMRUN_PULSAR_HTTP")
	if url == "" || httpURL == "" {
		t.Skip("the campaign's Apache Pulsar part needs STREAMRUN_PULSAR_URL and STREAMRUN_PULSAR_HTTP (scripts/pulsar start)")
	}
	p := planFor(t, true)
	e := newEnv(t, p)
	e.serviceURL, e.adminURL = url, strings.TrimSuffix(httpURL, "/")
	if u, h := os.Getenv("STREAMRUN_PULSAR_TXN_URL"), os.Getenv("STREAMRUN_PULSAR_TXN_HTTP"); u != "" && h != "" {
		// The standalone with transactions on: exactly_once pipelines too.
		e.serviceURL, e.adminURL, e.txn = u, strings.TrimSuffix(h, "/"), true
	} else {
		t.Log("campaign: no exactly_once pipelines: STREAMRUN_PULSAR_TXN_URL and _HTTP name no standalone with transactions on (scripts/pulsar start --name txn)")
	}
	e.pulsarPid.Store(int64(pidOf("PulsarStandaloneStarter")))
	for _, k := range faultKinds {
		if !k.embedded {
			e.kinds = append(e.kinds, k)
		}
	}
	e.kinds = onlyKinds(t, e.kinds)
	e.run(t, "pulsar")
}

// onlyKinds keeps the kinds faultsEnv names (all when it is unset).
func onlyKinds(t *testing.T, kinds []faultKind) []faultKind {
	v := os.Getenv(faultsEnv)
	if v == "" {
		return kinds
	}
	var out []faultKind
	for name := range strings.SplitSeq(v, ",") {
		i := slices.IndexFunc(kinds, func(k faultKind) bool { return k.name == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("%s=%q: no fault kind %q here", faultsEnv, v, name)
		}
		out = append(out, kinds[i])
	}
	return out
}

func newEnv(t *testing.T, p plan) *env {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		if _, err := fmt.Sscan(s, &seed); err != nil {
			t.Fatalf("%s=%q: want a number", seedEnv, s)
		}
	}
	t.Logf("campaign: seed %d (%s=%d replays the choices)", seed, seedEnv, seed)
	// Not t.TempDir: the process logs and the broker's data stay when the
	// campaign fails (or with STREAMRUN_CAMPAIGN_KEEP set), to look into.
	dir, err := os.MkdirTemp("", "streamrun-campaign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("STREAMRUN_CAMPAIGN_KEEP") != "" {
			t.Logf("campaign: logs and data kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	e := &env{plan: p, t: t, dir: dir, http: &http.Client{Transport: &http.Transport{}}, control: filepath.Join(dir, "control"), rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	if err := os.MkdirAll(e.control, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.http.CloseIdleConnections)
	return e
}

// run sets up the pipelines and hosts, runs the fault phase, drains, and
// checks and reports the ledger.
func (e *env) run(t *testing.T, target string) {
	id := fmt.Sprintf("%d", time.Now().UnixNano()%1e10)
	topic := func(s string) string {
		return fmt.Sprintf("persistent://public/default/campaign-%s-%s-%s", target, id, s)
	}
	// eo-counter counts each key's messages in keyed state, which needs an
	// Exclusive subscription (docs/pipelines.md, "Keyed state"): one host
	// holds it, the other waits and takes over when it is killed
	// (killHost aims at the holder).
	newCounter := func() *pipe {
		counter := newPipe("eo-counter", "exclusive", 0, topic("eoct-in"), topic("eoct-out"))
		counter.changelog = topic("eoct-state")
		counter.exactly = true
		return counter
	}
	exactly := os.Getenv(exactlyEnv)
	if e.counterOnly {
		e.pipes = []*pipe{newCounter()}
		exactly = ""
	} else if exactly != "only" {
		e.pipes = []*pipe{
			newPipe("keyshared", "key_shared", 4, topic("ks-in"), topic("ks-out")),
			newPipe("shared", "shared", 3, topic("sh-in"), topic("sh-out")),
			newPipe("exclusive", "exclusive", 0, topic("ex-in"), topic("ex-out")),
			newPipe("failover", "failover", 2, topic("fo-in"), topic("fo-out")),
		}
	} else if !e.txn {
		t.Skipf("%s=only: the broker has no transactions on, so there is nothing to run", exactlyEnv)
	}
	if e.txn && exactly != "" {
		// Opt-in (exactlyEnv); CI's campaign step sets it
		// (docs/reliability.md, "Exactly once, short form").
		// eo-window counts each key's messages in tumbling windows of
		// event time (windows_test.go); windows need an Exclusive
		// subscription too.
		window := newWinPipe("eo-window", topic("eowin-in"), topic("eowin-out"), topic("eowin-late"), topic("eowin-windows"))
		for _, p := range []*pipe{
			newPipe("eo-shared", "shared", 3, topic("eosh-in"), topic("eosh-out")),
			newPipe("eo-failover", "failover", 2, topic("eofo-in"), topic("eofo-out")),
			newCounter(),
			window,
		} {
			p.exactly = true
			e.pipes = append(e.pipes, p)
		}
	}
	for _, p := range e.pipes {
		if p.partitions > 0 {
			short := strings.TrimPrefix(p.in, "persistent://")
			if err := e.adminBody("PUT", "/admin/v2/persistent/"+short+"/partitions", fmt.Sprint(p.partitions), nil); err != nil {
				t.Fatalf("create %s: %v", p.in, err)
			}
		}
	}
	file := e.writePipelines(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := pool.New(ctx, pool.Options{ServiceURL: e.serviceURL, OperationRetries: pool.OperationRetries{Delay: retryDelay}})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	e.client = cl
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		cl.Close(cctx)
	}()
	var bg sync.WaitGroup
	collectCtx, stopCollect := context.WithCancel(ctx)
	defer func() { stopCollect(); bg.Wait() }()
	for _, p := range e.pipes {
		bg.Add(1)
		go func() { defer bg.Done(); p.collect(collectCtx, cl, e.logErr) }()
		if p.win == nil {
			continue
		}
		// A window pipeline's late topic, and its input topic: what the
		// broker stored, in its order, is what its windows must hold. The
		// input's subscription is there before the first publish.
		sub := make(chan struct{})
		var once sync.Once
		bg.Add(2)
		go func() { defer bg.Done(); collectTopic(collectCtx, cl, p.name, p.win.late, p.recordLate, e.logErr, nil) }()
		go func() {
			defer bg.Done()
			collectTopic(collectCtx, cl, p.name, p.in, p.recordInput, e.logErr, func() { once.Do(func() { close(sub) }) })
		}()
		select {
		case <-sub:
		case <-time.After(time.Minute):
			t.Fatalf("the reader of %s's input did not subscribe within 1m (collector notes in the log)", p.name)
		}
	}
	bg.Add(1)
	go func() { defer bg.Done(); e.sampleMemory(collectCtx) }()

	level := cmp.Or(os.Getenv(logLevelEnv), "warn")
	for i := range 2 {
		h := &proc{name: fmt.Sprintf("host-%d", i), log: filepath.Join(e.dir, fmt.Sprintf("host-%d.log", i)),
			args: []string{"run", "--log-level", level, "--status-interval", "0", file}}
		if err := h.start(""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.stop)
		e.hosts = append(e.hosts, h)
	}

	pubCtx, stopPub := context.WithCancel(ctx)
	var pubs sync.WaitGroup
	for _, p := range e.pipes {
		pubs.Add(1)
		go func() { defer pubs.Done(); p.publish(pubCtx, cl, e.rate) }()
	}
	start := time.Now()
	e.waitFlowing(t)
	records := e.faultPhase(t, ctx, start.Add(e.duration))
	stopPub()
	pubs.Wait()
	for _, p := range e.pipes {
		waitGroup(&p.wg, 2*time.Minute)
	}
	for _, p := range e.pipes {
		if p.win != nil {
			if err := p.flush(ctx, cl); err != nil {
				t.Error(err)
			}
		}
	}
	e.drain(t)
	for _, p := range e.pipes {
		switch {
		case p.win != nil:
			e.windows = append(e.windows, e.checkWindows(ctx, p))
		case p.changelog != "":
			e.counts = append(e.counts, e.checkCounts(ctx, p))
		}
	}
	rep := e.report(target, time.Since(start), records)
	e.checkAndWrite(t, rep, target)
}

// writePipelines writes the hosts' pipeline file: each pipeline runs the
// chaos handler (this test binary) with two instances, batches of 50 and
// a 5 s batch timeout.
func (e *env) writePipelines(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "service_url: %s\noperation_retries: {delay: %s}\npipelines:\n", e.serviceURL, retryDelay)
	for _, p := range e.pipes {
		fmt.Fprintf(&b, `  - name: %s
    source: {topics: [%q], subscription: campaign, type: %s, initial_position: earliest, receiver_queue: %d}
    handler:
      plugin: %q
      env: {%s: chaos}
      config: {output: %q, control: %q, pipeline: %s, count: %t, window: %t}
      instances: 2
      batch_size: 50
      timeout: %s
    outputs: [%q]
`, p.name, p.in, p.typ, receiverQueue, exe, roleEnv, p.out, e.control, p.name, p.changelog != "" && p.win == nil, p.win != nil, batchTimeout, p.out)
		if p.win != nil {
			// idle_timeout: the input is never idle for the clock to
			// move the watermark; the flush message closes the last
			// windows.
			fmt.Fprintf(&b, "    window: {type: tumbling, size: %s, time: event, out_of_order: %s, allowed_lateness: %s, late_topic: %q, idle_timeout: 1h, changelog: %q, mode: incremental}\n",
				winSize, winOutOfOrder, winLateness, p.win.late, p.changelog)
		} else if p.changelog != "" {
			fmt.Fprintf(&b, "    state: {enabled: true, changelog: %q}\n", p.changelog)
		}
		if p.exactly {
			fmt.Fprintf(&b, "    guarantee: exactly_once\n    transaction_timeout: %s\n", txnTimeout)
		}
	}
	file := filepath.Join(e.dir, "pipelines.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

const (
	// retryDelay is the hosts' and the campaign client's wait between
	// tries of an operation the broker refused for now (default 5 s):
	// shorter, so that recovery times show the system, not the wait.
	retryDelay    = time.Second
	receiverQueue = 200
	batchTimeout  = 5 * time.Second
	maxInFlight   = 1000 // the default for batches of 50 on two instances
	// txnTimeout is the exactly_once pipelines' transaction timeout:
	// shorter than the 10 s default, so that a host killed or stopped
	// holds its messages for less.
	txnTimeout = 5 * time.Second
)

// waitFlowing waits until every pipeline has put out something.
func (e *env) waitFlowing(t *testing.T) {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		ok := true
		for _, p := range e.pipes {
			ok = ok && p.maxSeq.Load() >= 0
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pipelines not flowing within 2m; logs in %s", e.dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// faultRecord is one injected fault and how the pipelines came back.
type faultRecord struct {
	Kind      string        `json:"kind"`
	Detail    string        `json:"detail"`
	At        time.Time     `json:"at"`
	Over      time.Time     `json:"over"`
	Recovery  time.Duration `json:"recovery_ns"`
	Recovered bool          `json:"recovered"`
	// ByPipeline is each pipeline's own recovery (absent: not recovered).
	ByPipeline map[string]time.Duration `json:"recovery_by_pipeline_ns"`
	Err        string                   `json:"error,omitempty"`
}

// recoveryLimit bounds the wait for recovery after a fault; a pipeline
// still stuck then fails the campaign.
const recoveryLimit = 3 * time.Minute

// recoveryBound is the wait for recovery after a fault of this run.
func (e *env) recoveryBound() time.Duration {
	if e.recoverWithin > 0 {
		return e.recoverWithin
	}
	return recoveryLimit
}

// faultPhase injects faults in random order until end: one at a time, each
// followed by a wait until every pipeline put out all it had been given
// before the fault was over and a message published after (its recovery
// time), then a random gap.
func (e *env) faultPhase(t *testing.T, ctx context.Context, end time.Time) []faultRecord {
	var recs []faultRecord
	var deck []faultKind
	more := func() bool {
		if e.sequence != nil {
			return len(recs) < len(e.sequence)
		}
		return time.Now().Before(end)
	}
	for more() && ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(e.rng.Int64N(int64(e.gap)))+200*time.Millisecond)
		// Kinds are dealt from a shuffled deck, so that every kind comes
		// once before any comes again.
		if len(deck) == 0 {
			deck = slices.Clone(e.kinds)
			e.rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		k := deck[0]
		deck = deck[1:]
		if e.sequence != nil {
			k = e.sequence[len(recs)]
		}
		r := faultRecord{Kind: k.name, At: time.Now()}
		detail, err := k.inject(ctx, e)
		r.Over, r.Detail = time.Now(), detail
		if err != nil {
			r.Err = err.Error()
			if k.fatal {
				t.Fatalf("fault %s: %v; logs in %s", k.name, err, e.dir)
			}
			t.Errorf("fault %s: %v", k.name, err)
		}
		r.Recovery, r.ByPipeline, r.Recovered = e.waitRecovery(ctx, r.Over)
		if !r.Recovered {
			t.Errorf("fault %s (%s) at %s: the pipelines did not recover within %s", k.name, detail, r.At.UTC().Format(time.TimeOnly), e.recoveryBound())
		}
		for _, h := range e.restart {
			if err := h.start(""); err != nil {
				t.Errorf("restart %s: %v", h.name, err)
			}
		}
		e.restart = nil
		recs = append(recs, r)
		t.Logf("fault %-22s %-40s recovered in %v", k.name, detail, r.Recovery.Round(time.Millisecond))
	}
	return recs
}

// waitRecovery waits until each pipeline caught up (pipe.caughtUp): every
// message published before over came out, and one published after; it
// returns how long after over each pipeline and the last one took.
func (e *env) waitRecovery(ctx context.Context, over time.Time) (time.Duration, map[string]time.Duration, bool) {
	want := make([]int64, len(e.pipes))
	for i, p := range e.pipes {
		want[i] = p.next()
	}
	took := map[string]time.Duration{}
	for deadline := over.Add(e.recoveryBound()); ; {
		for i, p := range e.pipes {
			if _, ok := took[p.name]; !ok && p.caughtUp(want[i]) {
				took[p.name] = time.Since(over)
			}
		}
		if len(took) == len(e.pipes) {
			return time.Since(over), took, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(over), took, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drain waits, with the faults over and both hosts up, until every
// receipted message has come out, or fails listing what is lost.
func (e *env) drain(t *testing.T) {
	for _, p := range e.pipes {
		for deadline := time.Now().Add(5 * time.Minute); ; {
			miss, n := p.missing(20)
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("LOST: pipeline %s: %d receipted messages never came out, such as seqs %v", p.name, n, miss)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sampleMemory keeps the peak resident set of the hosts and the broker.
func (e *env) sampleMemory(ctx context.Context) {
	tk := time.NewTicker(250 * time.Millisecond)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		for _, h := range e.hosts {
			storeMax(&e.peakHost, rssBytes(h.pid()))
		}
		if e.broker != nil {
			storeMax(&e.peakBroker, rssBytes(e.broker.pid()))
		} else {
			storeMax(&e.peakBroker, rssBytes(int(e.pulsarPid.Load())))
		}
	}
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func waitGroup(wg *sync.WaitGroup, within time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(within):
		return false
	}
}
