package runtime_test

import (
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// readCounts is every key's count in changelog, read as a host reads it
// at start (streamrun.ReadState).
func readCounts(t *testing.T, cl *pool.Client, changelog string) map[string]int {
	t.Helper()
	vals, err := streamrun.ReadState(testContext(t), cl, changelog)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int, len(vals))
	for k, v := range vals {
		n, err := strconv.Atoi(string(v))
		if err != nil {
			t.Fatalf("changelog %s: key %s: value %q", changelog, k, v)
		}
		out[k] = n
	}
	return out
}

// wantCounts fails t unless counts holds keys keys, each counted want.
func wantCounts(t *testing.T, what string, counts map[string]int, keys, want int) {
	t.Helper()
	if len(counts) != keys {
		t.Errorf("%s: %d keys %v, want %d", what, len(counts), counts, keys)
	}
	for k, n := range counts {
		if n != want {
			t.Errorf("%s: key %s: count %d, want %d", what, k, n, want)
		}
	}
}

// A reload that changes a keyed-state pipeline's subscription changes
// its default changelog (named after the subscription) too: the state
// must then be that of the new changelog, as a restart with the new file
// would read it, and the new subscription's changes must go there. The
// new subscription reads the topic from its start and counts every
// message into its own changelog; the old changelog keeps the counts of
// the old subscription, untouched (reload.go, rekey). At least once on
// either broker, exactly once on either broker with transactions.
func TestKeyedStateFollowsAReloadThatChangesTheSubscription(t *testing.T) {
	for _, eo := range []bool{false, true} {
		t.Run(map[bool]string{false: "at_least_once", true: "exactly_once"}[eo], func(t *testing.T) {
			var peer *brokertest.Peer
			if eo {
				peer = brokertest.TxnTarget(t)
			} else {
				peer = brokertest.Target(t)
			}
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, peer.URL)
			const n, keys = 100, 5
			key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
			p := countingPipeline(t, in, out, testConfig{})
			if eo {
				p = exactlyOnce(p)
			}
			// The default changelog, named after the subscription in the
			// topic's namespace: subscriptions of this run's own.
			p.State.Changelog = ""
			p.Source.Subscription = path.Base(in)
			q := p
			q.Source.Subscription = p.Source.Subscription + "-2"
			settled := func(sub string) {
				t.Helper()
				waitFor(t, "every message published acknowledged on "+sub, func() bool { return subBacklog(t, peer, in, sub) == 0 })
			}

			r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Logger: eoLogger(t)}, p)
			publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, key)
			settled(p.Source.Subscription)
			if err := r.host.Reload(testContext(t), q); err != nil {
				t.Fatal(err)
			}
			publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", n+i) }, key)
			settled(q.Source.Subscription)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			wantCounts(t, "the new subscription's changelog "+q.ChangelogTopic(), readCounts(t, cl, q.ChangelogTopic()), keys, 2*n/keys)
			wantCounts(t, "the old subscription's changelog "+p.ChangelogTopic(), readCounts(t, cl, p.ChangelogTopic()), keys, n/keys)
		})
	}
}

// Keyed state turned on by a reload is read back from its changelog and
// kept from then on; a reload that changes its TTL or cache bound makes
// them those of the new file (values older than the new TTL are
// forgotten; past the new bound, values spill to disk); turned off, it
// is dropped, its spill file removed, and the changelog is written no
// more (reload.go, rekey).
func TestKeyedStateFollowsAReloadThatTurnsItOnAndOff(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	const n, keys = 200, 40
	key := func(i int) string { return fmt.Sprintf("k%02d", i%keys) }
	sent := 0
	next := func() {
		t.Helper()
		publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", sent+i) }, key)
		sent += n
	}
	on := countingPipeline(t, in, out, testConfig{})
	on.Source.Subscription = path.Base(in)
	off := on
	off.State = pipelines.State{}
	off.Handler.Config = maps.Clone(on.Handler.Config)
	delete(off.Handler.Config, "count")
	// Its changelog already holds counts, which turning the state on
	// reads back.
	publish(t, cl, on.ChangelogTopic(), keys, func(int) string { return "100" }, key)
	dir := t.TempDir()
	spills := func() []string {
		names, err := filepath.Glob(filepath.Join(dir, "*.spill"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, StateDir: dir}, off)
	acked := func(want int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d messages acknowledged", want), func() bool { return r.stats("counts").Acked >= int64(want) })
	}
	reload := func(p pipelines.Pipeline) {
		t.Helper()
		if err := r.host.Reload(testContext(t), p); err != nil {
			t.Fatal(err)
		}
	}
	next()
	acked(sent)

	reload(on)
	next()
	acked(sent)
	wantCounts(t, "turned on", readCounts(t, cl, on.ChangelogTopic()), keys, 100+n/keys)
	if f := spills(); len(f) != 0 {
		t.Errorf("spill files %v with a cache of 512 MiB", f)
	}

	// A TTL the values read back are older than, and a cache of about 5
	// keys.
	short := on
	short.State.TTL = 2 * time.Second
	short.State.CacheBytes = 5 * 180
	reload(short)
	time.Sleep(short.State.TTL + 500*time.Millisecond)
	next()
	acked(sent)
	for k, c := range readCounts(t, cl, on.ChangelogTopic()) {
		// A key's count starts again from 1 once its value is older than
		// the TTL: at most its messages since the reload, however slow
		// the host.
		if c > n/keys {
			t.Errorf("key %s: count %d after a reload to a TTL of %v, want at most %d: the values older than the TTL were kept",
				k, c, short.State.TTL, n/keys)
		}
	}
	if f := spills(); len(f) != 1 {
		t.Errorf("spill files %v after a reload to a cache of %d bytes for %d keys, want one", f, short.State.CacheBytes, keys)
	}

	reload(off)
	before := readCounts(t, cl, on.ChangelogTopic())
	next()
	acked(sent)
	if f := spills(); len(f) != 0 {
		t.Errorf("spill files %v left once the state was turned off", f)
	}
	after := readCounts(t, cl, on.ChangelogTopic())
	for k, c := range before {
		if after[k] != c {
			t.Errorf("key %s: count %d in the changelog after the state was turned off, %d before", k, after[k], c)
		}
	}
}
