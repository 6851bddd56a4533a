package runtime_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// Connections lost under an exactly_once pipeline (its input and output
// topics unloaded, and on the embedded broker every connection dropped)
// leave no output twice and none missing: publishes and acknowledgements
// in flight fail or are sent again, commits whose answer was lost are
// asked again, and what did not commit comes again.
//
// Embedded broker only for now: on Apache Pulsar 4.0.8 the same run put
// out nothing within 90 s once the topics were unloaded (not understood
// yet; docs/reliability.md says so).
func TestExactlyOnceThroughDroppedConnections(t *testing.T) {
	for _, target := range []string{"embedded"} {
		for _, typ := range []pipelines.SubscriptionType{pipelines.Shared, pipelines.Failover} {
			t.Run(target+"/"+string(typ), func(t *testing.T) {
				var peer *brokertest.Peer
				var c *broker.Cluster
				if target == "pulsar" {
					url := txnURL(t, target)
					peer = &brokertest.Peer{URL: url, Admin: strings.TrimSuffix(os.Getenv("STREAMRUN_PULSAR_TXN_HTTP"), "/")}
					if peer.Admin == "" {
						peer.Admin = "http://127.0.0.1:8281"
					}
				} else {
					c = cluster(t, func(o *broker.Options) { o.Transactions = true })
					peer = &brokertest.Peer{URL: c.ServiceURL(), Admin: c.AdminURL(), Cluster: c}
				}
				url := peer.URL
				in, out := topic(t, "in"), topic(t, "out")
				// One message an entry: a batch entry must be settled within
				// the transaction timeout, which a race-built run need not do
				// at these delays; this test is about the connections.
				pub := clientURL(t, url, unbatched)
				got := collect(t, clientURL(t, url), out)
				const n = 3000
				var want []string
				payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
				for i := range n {
					want = append(want, payload(i))
				}
				publish(t, pub, in, n, payload, nil)
				// Slow enough for the faults to fall amid the stream.
				delay := 200 * time.Millisecond
				if typ.KeepsOrder() {
					delay = 60 * time.Millisecond
				}
				p := eoPipeline("eo", in, out, typ, self(testConfig{Output: out, BatchDelay: delay}))
				r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
					Pool: pool.Options{ServiceURL: url, OperationRetries: pool.OperationRetries{Delay: 200 * time.Millisecond}}}, p)

				faults := 0
				for got.len() < n*3/4 && faults < 60 {
					time.Sleep(150*time.Millisecond + rand.N(150*time.Millisecond))
					switch k := faults % 3; {
					case k == 2 && c != nil:
						c.DropConnections(-1)
					default:
						tp := in
						if k == 1 {
							tp = out
						}
						peer.AdminDo(t, http.MethodPut, brokertest.AdminPath(tp)+"/unload", "")
					}
					faults++
				}
				checkExactlyOnce(t, got, want)
				s := r.stats("eo")
				t.Logf("faults %d, commits %d, aborts %d", faults, s.Commits, s.Aborts)
				if faults < 3 {
					t.Errorf("only %d faults before three quarters of the outputs: the test did not make its case", faults)
				}
			})
		}
	}
}
