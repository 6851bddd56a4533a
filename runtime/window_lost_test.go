package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// Under exactly_once, a window host whose consumer lost its connection
// and is subscribing again commits no fire and writes no accumulator
// until it has the subscription back and has read the windows back:
// another consumer may hold the Exclusive subscription meanwhile and
// fire the same windows. A fire acknowledges no input, so nothing else
// stops its transaction committing. (The campaign's eo-window after a
// broker kill -9 at 6a6a714: the waiting host took over, read the
// windows back and fired them, while the other one, subscribing again,
// committed the same fires from its memory; every window of a fire's
// transaction came out twice.) Here the test's own consumer takes the
// subscription while the host subscribes again, holds it for a while,
// and lets it go: nothing is put out meanwhile, and then every window
// equals the reference, each fire once. Embedded broker only: it needs
// the broker to refuse the host's subscribes for a moment.
func TestExactlyOnceWindowsCommitNothingWhileTheSubscriptionIsLost(t *testing.T) {
	for _, mode := range []pipelines.WindowMode{pipelines.ModeMessages, pipelines.ModeIncremental} {
		t.Run(string(mode), func(t *testing.T) {
			c := cluster(t, func(o *broker.Options) { o.Transactions = true })
			url := c.ServiceURL()
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, url)
			msgs := generate(uint64(len(base))+4, 400, 5)
			w := windowKinds[0].w
			w.Time, w.Mode = pipelines.TimeEvent, mode
			ref, _ := referenceWindows(w, msgs)
			incr := mode == pipelines.ModeIncremental
			outs := collect(t, clientURL(t, url), out)
			publishGenerated(t, cl, in, msgs, false)
			p := windowPipeline(in, out, w, windowConfig{Incremental: incr, BatchDelay: 6 * time.Second / time.Duration(len(ref))})
			p.Handler.BatchSize = 1
			exactlyOnceWindows(&p)
			// The host tries to subscribe again every 2 s: the test's
			// consumer comes first.
			runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
				Pool: pool.Options{ServiceURL: url, OperationRetries: pool.OperationRetries{Delay: 2 * time.Second}}}, p)
			waitFor(t, "a few windows", func() bool { return outs.len() >= 5 })

			holder := takeSubscription(t, c, cl, in, p.Source.Subscription)
			time.Sleep(500 * time.Millisecond) // what committed before comes in
			before := outs.len()
			if before >= len(ref) {
				t.Fatalf("every window fired before the subscription was taken: the test wants them mid-stream")
			}
			time.Sleep(3 * time.Second)
			if n := outs.len() - before; n > 0 {
				t.Errorf("%d fires put out while the test's consumer held the subscription", n)
			}
			t.Logf("%d of %d windows out when the subscription was taken", before, len(ref))
			if err := holder.Close(testContext(t)); err != nil {
				t.Fatal(err)
			}
			waitWindows(t, outs, ref, incr)
		})
	}
}

// takeSubscription drops every connection while the broker refuses to
// subscribe to in, then subscribes the test's own consumer to
// subscription, Exclusive, before the host's consumer tries again.
func takeSubscription(t *testing.T, c *broker.Cluster, cl *pool.Client, in, subscription string) *subscribe.Consumer {
	t.Helper()
	set := brokertest.Faults(t, c)
	for try := 0; ; try++ {
		h := set.Add(faults.Fault{Broker: -1, Command: pb.BaseCommand_SUBSCRIBE, Topic: in, Err: pb.ServerError_ServiceNotReady})
		c.DropConnections(-1)
		waitFor(t, "the host subscribing again", func() bool { return h.Fired() >= 1 })
		h.Remove()
		ctx, cancel := context.WithTimeout(testContext(t), time.Second)
		cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{in}, Subscription: subscription, Type: subscribe.Exclusive, ReceiverQueue: 1})
		cancel()
		if err == nil {
			return cons
		}
		if try == 3 {
			t.Fatalf("the test's consumer could not take the subscription: %v", err)
		}
		t.Logf("the host's consumer came first (%v); again", err)
	}
}
