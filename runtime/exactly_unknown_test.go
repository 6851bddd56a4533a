package runtime_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/broker/faults"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A commit whose answer is lost: the broker committed, then the
// connection dropped before its answer went out, and the commit asked
// again is TransactionNotFound, which a commit and an abort both leave.
// The host must neither handle the transaction's inputs again (it
// committed) nor lose them (had it aborted, they would come again), on
// Shared and Failover (all four types: TestExactlyOnceWhenACommitsAnswerIsEaten).
// Embedded broker only: it needs the fault
// that drops a connection between the commit and its answer.
//
// The coordinator is on one broker, the topics on the other, so that the
// consumers keep their connection while the coordinator's drops: a
// consumer that subscribes again makes the host read its state back and
// ask for everything again anyway (state_regain.go), which would hide
// what the host makes of the lost answer itself.
func TestExactlyOnceWhenACommitsAnswerIsLost(t *testing.T) {
	for _, typ := range []pipelines.SubscriptionType{pipelines.Shared, pipelines.Failover} {
		t.Run(string(typ), func(t *testing.T) {
			in, out := topic(t, "in"), topic(t, "out")
			c, coord := twoBrokers(t, in, out)
			url := c.ServiceURL()
			pub := clientURL(t, url, unbatched)
			got := collect(t, clientURL(t, url), out)
			const n = 2000
			var want []string
			payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
			for i := range n {
				want = append(want, payload(i))
			}
			publish(t, pub, in, n, payload, func(i int) string { return fmt.Sprintf("k%d", i%16) })
			delay := 300 * time.Millisecond
			if typ.KeepsOrder() {
				delay = 30 * time.Millisecond
			}
			p := eoPipeline("eo", in, out, typ, self(testConfig{Output: out, BatchDelay: delay}))
			r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
				Pool: pool.Options{ServiceURL: url, OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond}}}, p)

			set := brokertest.Faults(t, c)
			lost := 0
			for got.len() < n*3/4 && lost < 20 {
				h := set.Add(faults.Fault{Broker: coord, Command: pb.BaseCommand_END_TXN, DropAnswer: true, Count: 1})
				waitFor(t, "a commit", func() bool { return h.Fired() == 1 || got.len() >= n*3/4 })
				h.Remove()
				lost += h.Fired()
				time.Sleep(100*time.Millisecond + rand.N(200*time.Millisecond))
			}
			checkExactlyOnce(t, got, want)
			s := r.stats("eo")
			t.Logf("answers lost %d, commits %d, aborts %d", lost, s.Commits, s.Aborts)
			if lost < 2 {
				t.Errorf("only %d answers lost before three quarters of the outputs: the test did not make its case", lost)
			}
		})
	}
}

// The same with keyed state: a commit whose answer was lost may have
// committed its state changes. Every count comes out once, and the
// changelog holds the right ones.
func TestKeyedStateExactlyOnceWhenACommitsAnswerIsLost(t *testing.T) {
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	c, coord := twoBrokers(t, in, out, in+"-state")
	url := c.ServiceURL()
	cl := clientURL(t, url, func(o *pool.Options) { o.Producer.Batching.MaxMessages = 20 })
	outs := collect(t, clientURL(t, url), out)
	const n, keys = 2000, 8
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, key)
	p := exactlyOnce(countingPipeline(t, in, out, testConfig{BatchDelay: 20 * time.Millisecond}))
	r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
		Pool: pool.Options{ServiceURL: url, OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond}}}, p)

	set := brokertest.Faults(t, c)
	lost := 0
	for outs.len() < n*3/4 && lost < 20 {
		h := set.Add(faults.Fault{Broker: coord, Command: pb.BaseCommand_END_TXN, DropAnswer: true, Count: 1})
		waitFor(t, "a commit", func() bool { return h.Fired() == 1 || outs.len() >= n*3/4 })
		h.Remove()
		lost += h.Fired()
		time.Sleep(100*time.Millisecond + rand.N(200*time.Millisecond))
	}
	outs.waitLen(t, n)
	time.Sleep(500 * time.Millisecond) // for a late duplicate to show
	checkCounts(t, outs.payloads(), keys, n/keys)
	checkChangelogCounts(t, cl, p.ChangelogTopic(), keys, n/keys, key)
	s := r.stats("counts")
	t.Logf("answers lost %d, commits %d, aborts %d", lost, s.Commits, s.Aborts)
	if lost < 2 {
		t.Errorf("only %d answers lost before three quarters of the outputs: the test did not make its case", lost)
	}
}

// twoBrokers starts two embedded brokers with transactions on and puts
// topics on the one that does not serve the transaction coordinator,
// whose index it returns.
func twoBrokers(t *testing.T, topics ...string) (*broker.Cluster, int) {
	t.Helper()
	c := cluster(t, func(o *broker.Options) { o.Transactions, o.Brokers = true, 2 })
	coord := c.OwnerOf(pulsarwire.TxnCoordinatorTopic + pulsarwire.PartitionSuffix + "0")
	for _, tp := range topics {
		if err := c.MoveTopic(tp, 1-coord); err != nil {
			t.Fatal(err)
		}
	}
	return c, coord
}

// The same on both brokers, the answer dropped by the client's own
// dialer while the connection stays up (the consumer keeps its
// subscription, so nothing else makes the host read its state back): the
// commit's try times out, and asked again it is TransactionNotFound.
func TestKeyedStateExactlyOnceWhenACommitsAnswerIsEaten(t *testing.T) {
	for _, target := range txnTargets {
		t.Run(target, func(t *testing.T) {
			url := txnURL(t, target)
			base := brokertest.TopicName(t)
			in, out := base+"-in", base+"-out"
			cl := clientURL(t, url, func(o *pool.Options) { o.Producer.Batching.MaxMessages = 20 })
			outs := collect(t, clientURL(t, url), out)
			const n, keys = 2000, 8
			key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
			publish(t, cl, in, n, func(i int) string { return fmt.Sprintf("m-%d", i) }, key)
			p := exactlyOnce(countingPipeline(t, in, out, testConfig{BatchDelay: 20 * time.Millisecond}))
			eater := &answerEater{}
			r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
				Pool: pool.Options{ServiceURL: url, Dial: eater.Dial,
					OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond, Timeout: time.Second}}}, p)
			for outs.len() < n*3/4 && eater.eaten.Load() < 10 {
				eater.armed.Store(1)
				waitFor(t, "a commit", func() bool { return eater.armed.Load() <= 0 || outs.len() >= n*3/4 })
				time.Sleep(100*time.Millisecond + rand.N(200*time.Millisecond))
			}
			eater.armed.Store(0)
			outs.waitLen(t, n)
			time.Sleep(500 * time.Millisecond) // for a late duplicate to show
			checkCounts(t, outs.payloads(), keys, n/keys)
			checkChangelogCounts(t, cl, p.ChangelogTopic(), keys, n/keys, key)
			s := r.stats("counts")
			t.Logf("answers eaten %d, commits %d, aborts %d", eater.eaten.Load(), s.Commits, s.Aborts)
			if eater.eaten.Load() < 2 {
				t.Errorf("only %d answers eaten before three quarters of the outputs: the test did not make its case", eater.eaten.Load())
			}
		})
	}
}

// Without state, on both brokers and every subscription type, the answer
// dropped by the client's dialer (answerEater): no output twice, none
// missing. On Shared and Key_Shared the host asks for none of the
// transaction's inputs again; on Exclusive and Failover for what is not
// acknowledged. What the broker does with a transaction that did not
// commit decides the rest: this checks it on each type.
func TestExactlyOnceWhenACommitsAnswerIsEaten(t *testing.T) {
	for _, target := range txnTargets {
		for _, typ := range []pipelines.SubscriptionType{pipelines.Shared, pipelines.Failover, pipelines.Exclusive, pipelines.KeyShared} {
			t.Run(target+"/"+string(typ), func(t *testing.T) {
				url := txnURL(t, target)
				in, out := topic(t, "in"), topic(t, "out")
				pub := clientURL(t, url, unbatched)
				got := collect(t, clientURL(t, url), out)
				const n = 1000
				var want []string
				payload := func(i int) string { return fmt.Sprintf("m-%d", i) }
				for i := range n {
					want = append(want, payload(i))
				}
				publish(t, pub, in, n, payload, func(i int) string { return fmt.Sprintf("k%d", i%16) })
				// Slow enough for the answers to be eaten amid the stream.
				delay := 400 * time.Millisecond
				if typ.KeepsOrder() {
					delay = 30 * time.Millisecond
				}
				eater := &answerEater{}
				p := eoPipeline("eo", in, out, typ, self(testConfig{Output: out, BatchDelay: delay}))
				r := runHost(t, nil, streamrun.Options{Logger: eoLogger(t),
					Pool: pool.Options{ServiceURL: url, Dial: eater.Dial,
						OperationRetries: pool.OperationRetries{Delay: 100 * time.Millisecond, Timeout: time.Second}}}, p)
				for got.len() < n*3/4 && eater.eaten.Load() < 8 {
					eater.armed.Store(1)
					waitFor(t, "a commit", func() bool { return eater.armed.Load() <= 0 || got.len() >= n*3/4 })
					time.Sleep(100*time.Millisecond + rand.N(200*time.Millisecond))
				}
				eater.armed.Store(0)
				checkExactlyOnce(t, got, want)
				s := r.stats("eo")
				t.Logf("answers eaten %d, commits %d, aborts %d", eater.eaten.Load(), s.Commits, s.Aborts)
				if eater.eaten.Load() < 2 {
					t.Errorf("only %d answers eaten before three quarters of the outputs: the test did not make its case", eater.eaten.Load())
				}
			})
		}
	}
}
