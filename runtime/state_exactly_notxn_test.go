package runtime_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// A transaction that cannot begin (the coordinator refuses NEW_TXN) while
// a batch's state changes are applied in memory: the batch comes again,
// and its changes must not stay behind, neither under the changes of the
// messages after it (which would count it twice, its copy on top) nor to
// be taken back later, when those after it have committed (which put a
// key's count back: the campaign of 2026-12-06 at 6616bc1 ended with one
// key 12 counts short, its outputs carrying 171..182 twice, right after
// a "no transaction: the messages come again"). Every count comes out
// once and the changelog holds the right ones.
//
// Embedded broker only: it needs the fault that refuses NEW_TXN. The
// retry's backoff is long enough that the messages after the refused
// ones are handled, and commit, before the broker sends those again.
func TestKeyedStateExactlyOnceWhenNoTransactionBegins(t *testing.T) {
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	c, coord := twoBrokers(t, in, out, in+"-state")
	url := c.ServiceURL()
	cl := clientURL(t, url, func(o *pool.Options) { o.Producer.Batching.MaxMessages = 20 })
	outs := collect(t, clientURL(t, url), out)
	const n, keys = 3000, 3
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, key)
	p := exactlyOnce(countingPipeline(t, in, out, testConfig{BatchDelay: 30 * time.Millisecond}))
	p.ErrorPolicy.Backoff.Initial, p.ErrorPolicy.Backoff.Max = 400*time.Millisecond, 400*time.Millisecond
	r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
		Pool: pool.Options{ServiceURL: url, OperationRetries: pool.OperationRetries{Delay: 50 * time.Millisecond}}}, p)

	set := brokertest.Faults(t, c)
	refused := 0
	for outs.len() < n*3/4 && refused < 10 {
		h := set.Add(faults.Fault{Broker: coord, Command: pb.BaseCommand_NEW_TXN, Err: pb.ServerError_NotAllowedError, Count: 1})
		waitFor(t, "a transaction's begin", func() bool { return h.Fired() == 1 || outs.len() >= n*3/4 })
		h.Remove()
		refused += h.Fired()
		time.Sleep(300 * time.Millisecond)
	}
	outs.waitLen(t, n)
	time.Sleep(500 * time.Millisecond) // for a late duplicate to show
	checkCounts(t, outs.payloads(), keys, n/keys)
	checkChangelogCounts(t, cl, p.ChangelogTopic(), keys, n/keys, key)
	if t.Failed() {
		logChangelog(t, cl, p.ChangelogTopic())
	}
	s := r.stats("counts")
	t.Logf("begins refused %d, commits %d, aborts %d, retried %d", refused, s.Commits, s.Aborts, s.Retried)
	if refused < 2 {
		t.Errorf("only %d begins refused before three quarters of the outputs: the test did not make its case", refused)
	}
}

// logChangelog logs, for a failed test, where each key's counts in the
// changelog (committed records, in order) do not go up by one.
func logChangelog(t *testing.T, cl *pool.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), 20*time.Second)
	defer cancel()
	cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{topic},
		Subscription: "dump-" + strconv.FormatInt(time.Now().UnixNano(), 36), InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Log(err)
		return
	}
	defer cons.Close(context.Background())
	last := map[string]int{}
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := cons.Receive(rctx)
		rcancel()
		if err != nil {
			t.Logf("changelog read to its end: last counts %v", last)
			return
		}
		if m.Key == "" {
			t.Logf("changelog: fence at %s", m.ID)
			continue
		}
		n, _ := strconv.Atoi(string(m.Payload))
		if n != last[m.Key]+1 {
			t.Logf("changelog: key %s goes %d -> %d at %s", m.Key, last[m.Key], n, m.ID)
		}
		last[m.Key] = n
	}
}
