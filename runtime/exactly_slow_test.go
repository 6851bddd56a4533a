package runtime_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A handler slower than the commit can wait for the rest of a batch
// entry (a quarter of the transaction timeout), and hung past its batch
// timeout now and then, makes commits abort; once it is fast again,
// every message comes out once. The inputs are published in big batch
// entries, so that one entry spans several handler batches, and two
// hosts share the subscription, as in the campaign's slow-consumer
// fault.
func TestExactlyOnceSlowHandlerBigEntries(t *testing.T) {
	for _, target := range txnTargets {
		for _, typ := range []pipelines.SubscriptionType{pipelines.Shared, pipelines.Failover} {
			t.Run(target+"/"+string(typ), func(t *testing.T) {
				url := txnURL(t, target)
				in, out := topic(t, "in"), topic(t, "out")
				pub := clientURL(t, url)
				got := collect(t, clientURL(t, url), out)
				const n = 1500
				var want []string
				payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
				for i := range n {
					want = append(want, payload(i))
				}
				publish(t, pub, in, n, payload, nil)
				// Jitter past a quarter of the 4 s timeout: some commits
				// wait for the rest of an entry in vain and abort.
				p := eoPipeline("eo", in, out, typ, self(testConfig{Output: out, Jitter: 2500 * time.Millisecond,
					SlowUntil: time.Now().Add(8 * time.Second).UnixMilli()}))
				p.Source.ReceiverQueue = 200
				p.Handler.Timeout = 1500 * time.Millisecond // some batches time out: the instance restarts, its messages are retried
				p.Handler.Instances = 2
				r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: url}, Logger: eoLogger(t)}, p)
				r2 := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: url}, Logger: eoLogger(t)}, p)
				checkExactlyOnce(t, got, want)
				s, s2 := r.stats("eo"), r2.stats("eo")
				t.Logf("commits %d, aborts %d, crashes %d", s.Commits+s2.Commits, s.Aborts+s2.Aborts, s.Crashes+s2.Crashes)
				if s.Aborts+s2.Aborts == 0 {
					// Whether a commit waits in vain depends on how the
					// hosts' batches fall across the entries, which the
					// machine's speed decides (a race-built run is slower
					// everywhere): the outputs were still checked above.
					t.Log("no transaction aborted in this run: the aborted case was not made, only the slow one")
				}
			})
		}
	}
}
