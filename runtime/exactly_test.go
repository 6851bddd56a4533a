package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// Exactly once, on both brokers: the embedded one with transactions on,
// and Apache Pulsar's standalone with them on (scripts/pulsar start
// --name txn, STREAMRUN_PULSAR_TXN_URL). A consumer of the outputs sees
// only committed transactions, so it sees what the guarantee promises:
// every input's output once, through handler crashes and a host killed
// with SIGKILL.

// txnURL is the service URL of a broker with transactions on, for t.
func txnURL(t *testing.T, target string) string {
	t.Helper()
	if target == "pulsar" {
		url := os.Getenv("STREAMRUN_PULSAR_TXN_URL")
		if url == "" {
			t.Skip("exactly_once on Apache Pulsar needs a standalone with transactions on: " +
				`eval "$(scripts/pulsar start --name txn)" sets STREAMRUN_PULSAR_TXN_URL`)
		}
		return url
	}
	return cluster(t, func(o *broker.Options) { o.Transactions = true }).ServiceURL()
}

var txnTargets = []string{"embedded", "pulsar"}

// eoLogger is the hosts' log: errors, kept with the test;
// STREAMRUN_TEST_DEBUG=1 shows every commit and abort on stderr.
func eoLogger(t *testing.T) *slog.Logger {
	if os.Getenv("STREAMRUN_TEST_DEBUG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return testLogger(t, slog.LevelError)
}

// eoPipeline is an exactly_once pipeline of the test handler from in to
// out.
func eoPipeline(name, in, out string, typ pipelines.SubscriptionType, h pipelines.Handler) pipelines.Pipeline {
	h.Config["output"] = out
	h.BatchSize, h.Instances = 50, 2
	if typ.KeepsOrder() {
		h.Instances = 1
	}
	return pipelines.Pipeline{
		Name:               name,
		Source:             pipelines.Source{Topics: []string{in}, Subscription: name, Type: typ, InitialPosition: pipelines.Earliest},
		Handler:            h,
		Outputs:            []string{out},
		Guarantee:          pipelines.ExactlyOnce,
		CommitInterval:     50 * time.Millisecond,
		TransactionTimeout: 4 * time.Second,
		ErrorPolicy:        pipelines.ErrorPolicy{DeadLetterTopic: out + "-dlq", MaxCrashes: 1000},
	}
}

// checkExactlyOnce waits until the collector holds n messages, lets a
// moment pass for a late duplicate to show, and fails t unless each of
// want's payloads is there exactly once and nothing else.
func checkExactlyOnce(t *testing.T, c *collector, want []string) {
	t.Helper()
	c.waitLen(t, len(want))
	time.Sleep(500 * time.Millisecond)
	got := map[string]int{}
	for _, p := range c.payloads() {
		got[p]++
	}
	lost, dups := 0, 0
	for _, p := range want {
		switch n := got[p]; {
		case n == 0:
			lost++
			if lost <= 5 {
				t.Errorf("lost %q", p)
			}
		case n > 1:
			dups += n - 1
			if dups <= 5 {
				t.Errorf("%q %d times", p, n)
			}
		}
		delete(got, p)
	}
	for p := range got {
		t.Errorf("unexpected output %q", p)
	}
	t.Logf("%d messages: %d lost, %d duplicated", len(want), lost, dups)
}

// A handler that crashes (its process killed with SIGKILL every few
// hundred milliseconds, and panics on some messages) publishes each
// output once, dead letters once, on Shared and Failover subscriptions.
func TestExactlyOnceThroughCrashes(t *testing.T) {
	for _, target := range txnTargets {
		for _, typ := range []pipelines.SubscriptionType{pipelines.Shared, pipelines.Failover} {
			t.Run(target+"/"+string(typ), func(t *testing.T) {
				url := txnURL(t, target)
				in, out := topic(t, "in"), topic(t, "out")
				pub := clientURL(t, url)
				got, dead := collect(t, clientURL(t, url), out), collect(t, clientURL(t, url), out+"-dlq")
				h := self(testConfig{Output: out, PanicEvery: 97, MarkerDir: t.TempDir()})
				r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: url}, Logger: eoLogger(t)},
					eoPipeline("eo", in, out, typ, h))

				const n = 3000
				var want, wantDead []string
				payload := func(i int) string {
					if i%500 == 7 {
						return fmt.Sprintf("dead:%d", i)
					}
					return fmt.Sprintf("m-%d", i)
				}
				for i := range n {
					if p := payload(i); strings.HasPrefix(p, "dead:") {
						wantDead = append(wantDead, p)
					} else {
						want = append(want, p)
					}
				}
				stop := killPlugins(t, r, "eo", 300*time.Millisecond)
				publish(t, pub, in, n, payload, nil)
				waitFor(t, "half the outputs", func() bool { return got.len() >= n/2 })
				kills := stop()
				checkExactlyOnce(t, got, want)
				checkExactlyOnce(t, dead, wantDead)
				s := r.stats("eo")
				t.Logf("plugin kills %d, crashes %d, commits %d, aborts %d", kills, s.Crashes, s.Commits, s.Aborts)
				if s.Commits == 0 {
					t.Error("no transaction committed")
				}
			})
		}
	}
}

// killPlugins SIGKILLs one of pipeline's plugin processes every period
// or so until the returned function is called; that returns the kills.
func killPlugins(t *testing.T, r *running, pipeline string, period time.Duration) func() int {
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		kills := 0
		defer func() { done <- kills }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(period/2 + rand.N(period)):
			}
			var pids []int
			for _, ih := range r.health(pipeline).Instances {
				if ih.Up && ih.Pid != 0 && ih.Batches > 0 {
					pids = append(pids, ih.Pid)
				}
			}
			if len(pids) > 0 && syscall.Kill(pids[rand.N(len(pids))], syscall.SIGKILL) == nil {
				kills++
			}
		}
	}()
	return func() int {
		close(stop)
		return <-done
	}
}

// eoChildHost is the host the kill test kills: it runs the exactly_once
// pipeline the environment describes, says "running", and waits.
func eoChildHost() {
	h, err := streamrun.New(context.Background(), streamrun.Options{
		Pool:   pool.Options{ServiceURL: os.Getenv("STREAMRUN_TEST_URL")},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	typ := pipelines.SubscriptionType(os.Getenv("STREAMRUN_TEST_TYPE"))
	p := eoPipeline("eo", os.Getenv("STREAMRUN_TEST_IN"), os.Getenv("STREAMRUN_TEST_OUT"), typ,
		self(testConfig{Output: os.Getenv("STREAMRUN_TEST_OUT"), BatchDelay: 5 * time.Millisecond}))
	go func() {
		err := h.Run(context.Background(), p)
		fmt.Println("error: Run returned:", err)
		os.Exit(1)
	}()
	for {
		if hs := h.Health(); len(hs) == 1 && hs[0].State == streamrun.StateHealthy {
			fmt.Println("running")
			select {}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A host killed with SIGKILL in the middle of the stream leaves no
// output twice and none missing: its open transaction aborts when its
// timeout passes, and the host that takes over does its messages again.
func TestExactlyOnceHostKilled(t *testing.T) {
	for _, target := range txnTargets {
		for _, typ := range []pipelines.SubscriptionType{pipelines.Shared, pipelines.Failover} {
			t.Run(target+"/"+string(typ), func(t *testing.T) {
				url := txnURL(t, target)
				in, out := topic(t, "in"), topic(t, "out")
				pub := clientURL(t, url)
				got := collect(t, clientURL(t, url), out)
				const n = 4000
				var want []string
				payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
				for i := range n {
					want = append(want, payload(i))
				}
				publish(t, pub, in, n, payload, nil)

				cmd := startChildHost(t, "eohost", "host process", "STREAMRUN_TEST_URL="+url,
					"STREAMRUN_TEST_IN="+in, "STREAMRUN_TEST_OUT="+out, "STREAMRUN_TEST_TYPE="+string(typ))
				waitFor(t, "a quarter of the outputs", func() bool { return got.len() >= n/4 })
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = cmd.Wait()
				before := got.len()
				t.Logf("host killed after %d outputs committed", before)
				if before >= n {
					t.Fatalf("the host finished before the kill (%d outputs)", before)
				}

				r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: url}},
					eoPipeline("eo", in, out, typ, self(testConfig{Output: out})))
				checkExactlyOnce(t, got, want)
				s := r.stats("eo")
				t.Logf("the second host: commits %d, aborts %d, acked %d", s.Commits, s.Aborts, s.Acked)
			})
		}
	}
}

// A broker with transactions off stops an exactly_once pipeline at
// start, saying what it needs.
func TestExactlyOnceNeedsTransactions(t *testing.T) {
	c := cluster(t)
	ctx := testContext(t)
	h, err := streamrun.New(ctx, streamrun.Options{Pool: poolOpts(c), Logger: testLogger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Run(ctx, eoPipeline("eo", topic(t, "in"), topic(t, "out"), pipelines.Shared, self(testConfig{})))
	if err == nil || !strings.Contains(err.Error(), "guarantee exactly_once needs a broker with transactions on") {
		t.Fatalf("Run: %v", err)
	}
}
