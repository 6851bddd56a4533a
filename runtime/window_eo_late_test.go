package runtime_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// Under exactly_once, an input counted in its window whose
// acknowledgement's transaction aborts comes again after the watermark
// passed its window's end and lateness: it is a copy of what the window
// counted, acknowledged, and neither sent to the late topic nor counted
// again. (The campaign's eo-window, docs/reliability.md: 105 inputs
// were both in their window's fire and in the late topic, after aborts
// while the host's consumer subscribed again.) Here the broker refuses
// the first acknowledgement of the input topic, so the transaction
// holding the acknowledgements of both inputs aborts, while the second
// input's watermark has closed and fired the first one's window, past
// its lateness; or it drops the connection there, so that the host
// subscribes again and reads the windows back before the inputs come
// again, as in the campaign. Embedded broker only: it needs the broker
// to refuse an acknowledgement.
func TestExactlyOnceWindowsTakeAnInputComingAgainAfterItsWindowForACopy(t *testing.T) {
	for _, mode := range []pipelines.WindowMode{pipelines.ModeMessages, pipelines.ModeIncremental} {
		for _, drop := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/drop=%v", mode, drop), func(t *testing.T) {
				c := cluster(t, func(o *broker.Options) { o.Transactions = true })
				url := c.ServiceURL()
				base := brokertest.TopicName(t)
				in, out, lateTopic := base+"-in", base+"-out", base+"-late"
				cl := clientURL(t, url)
				outs := collect(t, clientURL(t, url), out)
				lates := collect(t, clientURL(t, url), lateTopic)
				incr := mode == pipelines.ModeIncremental
				w := pipelines.Window{Type: pipelines.Tumbling, Size: 5 * time.Second, AllowedLateness: 5 * time.Second,
					Time: pipelines.TimeEvent, Mode: mode, LateTopic: lateTopic}
				p := windowPipeline(in, out, w, windowConfig{Incremental: incr})
				p.Handler.BatchSize = 1
				exactlyOnceWindows(&p)
				refused := brokertest.Faults(t, c).Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_ACK, Topic: in,
					Err: pb.ServerError_TransactionConflict, Drop: drop, Count: 1})
				at := func(key, payload string, s int64) {
					publishOne(t, cl, in, pool.Message{Key: key, Payload: []byte(payload), EventTime: time.UnixMilli(windowBase + s*1000)})
				}
				at("a", "on-time", 101)
				at("b", "watermark", 200) // a's [100,105) fires, and is past its lateness (105+5 <= 200)
				r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t), Pool: pool.Options{ServiceURL: url}}, p)
				waitFor(t, "the acknowledgement refused and its transaction aborted", func() bool {
					return refused.Fired() >= 1 && r.stats("windows").Aborts >= 1
				})
				waitFor(t, "both inputs again and a's window", func() bool {
					return r.stats("windows").Received >= 4 && outs.len() >= 1
				})
				time.Sleep(time.Second) // a late copy's transaction commits meanwhile
				s := r.stats("windows")
				t.Logf("stats: received %d, acked %d, dropped %d, commits %d, aborts %d", s.Received, s.Acked, s.Dropped, s.Commits, s.Aborts)
				if n := lates.len(); n > 0 || s.Dropped > 0 {
					t.Errorf("%d inputs on the late topic, %d dropped: the input counted in its window came again and was taken for late", n, s.Dropped)
				}
				if incr {
					for id, a := range accResults(t, outs) {
						if id.key == "a" && a.Count != 1 {
							t.Errorf("a's window %v counts %d messages, want 1", id, a.Count)
						}
					}
				} else {
					for id, r := range (windowResults{outs}).get(t) {
						if id.key == "a" && len(r.Payloads) != 1 {
							t.Errorf("a's window %v holds %v, want the one input", id, r.Payloads)
						}
					}
				}
				checkFiresOnce(t, outs)
			})
		}
	}
}
