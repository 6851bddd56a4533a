package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// Transactional produce and acknowledge, our client against the official
// one, on a broker with transactions on (docs/benchmarks/exactly-once.md, "Client
// transactions"):
//
//	STREAMRUN_BENCH=1 STREAMRUN_PULSAR_TXN_URL=pulsar://127.0.0.1:6681 go test -run CompareTxn -v
//
// A transaction of size N: begin, then N times receive a message of the
// input topic, publish its payload to the output topic in the transaction
// and acknowledge it in the transaction; then commit. Each client is used
// the way its API asks: ours holds the acknowledgements and sends them at
// the commit, which also sends the open batch; the official client's
// AckWithTxn waits for the broker's answer to each entry, and its producer
// is flushed before the commit (its Commit does not send the open batch,
// so without the flush every commit would wait out the batching delay).
//
// The input backlog is published in batches of txnInputBatch messages, a
// divisor of every size measured, so that no entry straddles two
// transactions (a batch entry is acknowledged whole, in one transaction).

const txnInputBatch = 10

var txnSizes = []int{10, 100, 1000}

// txnBacklog publishes n messages of size bytes in batches of
// txnInputBatch to a fresh topic and returns its name.
func txnBacklog(ctx context.Context, tb testing.TB, url, client string, size, n int) string {
	topic := freshTopic("txn-in-"+client, size)
	publishBacklog(ctx, tb, pool.Options{ServiceURL: url, Producer: pool.ProducerOptions{
		MaxPendingMessages: maxPending,
		// Closed by count only: a batch the delay cut short (a loaded
		// machine) would leave every later entry straddling two
		// transactions, and the commit refused (a partly acknowledged
		// entry).
		Batching: pool.BatchingOptions{MaxMessages: txnInputBatch, MaxBytes: batchBytes, MaxDelay: time.Hour},
	}}, topic, size, n)
	return topic
}

// transactor is a client under test: it opens a consumer of in and a
// producer to out, then runs transactions.
type transactor interface {
	open(ctx context.Context, url, in, out string) error
	// txn runs one transaction of n messages and commits it.
	txn(ctx context.Context, n int) error
	close(ctx context.Context)
}

type txnResult struct {
	client  string
	txnSize int
	n       int
	elapsed time.Duration
	cpu     time.Duration // user+system of the process
}

func (r txnResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// cpuPerMsg is the process's CPU a message, in µs.
func (r txnResult) cpuPerMsg() float64 { return float64(r.cpu.Microseconds()) / float64(r.n) }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureTxn runs n/txnSize transactions of txnSize messages through t,
// after one transaction of warm-up (subscription and partition
// registration, the coordinator's connection), and times them.
func measureTxn(ctx context.Context, tb testing.TB, url, name string, t transactor, txnSize, n int) txnResult {
	in := txnBacklog(ctx, tb, url, name, 100, n+txnSize)
	out := freshTopic("txn-out-"+name, 100)
	if err := t.open(ctx, url, in, out); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	defer t.close(ctx)
	if err := t.txn(ctx, txnSize); err != nil {
		tb.Fatalf("%s: warm-up transaction: %v", name, err)
	}
	runtime.GC()
	cpu0, start := processCPU(), time.Now()
	for done := 0; done < n; done += txnSize {
		if err := t.txn(ctx, txnSize); err != nil {
			tb.Fatalf("%s: transaction %d of %d messages: %v", name, done/txnSize, txnSize, err)
		}
	}
	return txnResult{client: name, txnSize: txnSize, n: n, elapsed: time.Since(start), cpu: processCPU() - cpu0}
}

// streamrun's pool and subscribe.

type streamrunTxn struct {
	c    *pool.Client
	txns *pool.TransactionSeries
	cons *subscribe.Consumer
	p    *pool.Producer
	fail atomic.Pointer[error]
	cb   func(pulsarwire.MessageID, error)
}

func (s *streamrunTxn) open(ctx context.Context, url, in, out string) error {
	c, err := pool.New(ctx, pool.Options{ServiceURL: url, Producer: pool.ProducerOptions{
		MaxPendingMessages: maxPending,
		Batching:           pool.BatchingOptions{MaxMessages: batchMessages, MaxBytes: batchBytes, MaxDelay: batchDelay},
	}})
	if err != nil {
		return err
	}
	s.c = c
	s.cb = func(_ pulsarwire.MessageID, err error) {
		if err != nil {
			s.fail.CompareAndSwap(nil, &err)
		}
	}
	if s.cons, err = subscribe.New(ctx, c, subscribe.Options{
		Topics: []string{in}, Subscription: "bench", Type: subscribe.Shared,
		InitialPosition: subscribe.Earliest, ReceiverQueue: receiverQueue,
	}); err != nil {
		return err
	}
	if s.txns, err = c.NewTransactionSeries(time.Minute); err != nil {
		return err
	}
	s.p, err = c.Producer(ctx, out)
	return err
}

func (s *streamrunTxn) txn(ctx context.Context, n int) error {
	tx, err := s.txns.Begin(ctx)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		m, err := s.cons.Receive(ctx)
		if err != nil {
			return err
		}
		s.p.SendAsync(ctx, pool.Message{Payload: m.Payload, Txn: tx}, s.cb)
		if err := s.cons.AckWithTxn(ctx, m, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if e := s.fail.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *streamrunTxn) close(ctx context.Context) {
	if s.txns != nil {
		s.txns.Close(ctx)
	}
	if s.cons != nil {
		s.cons.Close(ctx)
	}
	if s.c != nil {
		s.c.Close(ctx)
	}
}

// The official Go client.

type officialTxn struct {
	c    pulsar.Client
	cons pulsar.Consumer
	p    pulsar.Producer
	fail atomic.Pointer[error]
	cb   func(pulsar.MessageID, *pulsar.ProducerMessage, error)
}

func (s *officialTxn) open(_ context.Context, url, in, out string) error {
	c, err := pulsar.NewClient(pulsar.ClientOptions{
		URL:               url,
		EnableTransaction: true,
		Logger:            pulsarlog.DefaultNopLogger(),
		MetricsRegisterer: prometheus.NewRegistry(),
	})
	if err != nil {
		return err
	}
	s.c = c
	s.cb = func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
		if err != nil {
			s.fail.CompareAndSwap(nil, &err)
		}
	}
	if s.cons, err = c.Subscribe(pulsar.ConsumerOptions{
		Topic: in, SubscriptionName: "bench", Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize:           receiverQueue,
	}); err != nil {
		return err
	}
	s.p, err = c.CreateProducer(pulsar.ProducerOptions{
		Topic:                   out,
		MaxPendingMessages:      maxPending,
		BatchingMaxMessages:     batchMessages,
		BatchingMaxSize:         batchBytes,
		BatchingMaxPublishDelay: batchDelay,
	})
	return err
}

func (s *officialTxn) txn(ctx context.Context, n int) error {
	tx, err := s.c.NewTransaction(time.Minute)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		m, err := s.cons.Receive(ctx)
		if err != nil {
			return err
		}
		s.p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: m.Payload(), Transaction: tx}, s.cb)
		if err := s.cons.AckWithTxn(m, tx); err != nil {
			return err
		}
	}
	if err := s.p.FlushWithCtx(ctx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if e := s.fail.Load(); e != nil {
		return *e
	}
	return nil
}

func (s *officialTxn) close(context.Context) {
	if s.p != nil {
		s.p.Close()
	}
	if s.cons != nil {
		s.cons.Close()
	}
	if s.c != nil {
		s.c.Close()
	}
}

func newTransactor(name string) transactor {
	switch name {
	case "streamrun":
		return &streamrunTxn{}
	case "official":
		return &officialTxn{}
	}
	panic(name)
}

// txnMessages is the messages a measured run of transactions of size
// txnSize moves: STREAMRUN_BENCH_TXN_MESSAGES, or enough transactions
// that the official client's run lasts a few seconds.
func txnMessages(txnSize int) int {
	if n := envInt("STREAMRUN_BENCH_TXN_MESSAGES", 0); n > 0 {
		return max(n/txnSize, 1) * txnSize
	}
	return min(max(100*txnSize, 5000), 30000)
}

// envInts is the comma-separated integers of env, or def.
func envInts(env string, def []int) []int {
	var out []int
	for _, f := range strings.Split(os.Getenv(env), ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}

// TestCompareTxnWithOfficialClient runs both clients' transactions on the
// broker STREAMRUN_PULSAR_TXN_URL names (transactions on; nothing else of
// this test runs in the process, so the process's CPU is the client's),
// in turns, per transaction size, and prints msg/s and CPU a message with
// the ratios streamrun/official. Only with STREAMRUN_BENCH=1;
// STREAMRUN_BENCH_ROUNDS sets the runs per client and size (default 3;
// the run of median rate is reported, with its CPU),
// STREAMRUN_BENCH_TXN_SIZES the sizes (default 10,100,1000) and
// STREAMRUN_BENCH_TXN_MESSAGES the messages a run (default: 100 a
// message of the size, within 5000..30000).
func TestCompareTxnWithOfficialClient(t *testing.T) {
	if os.Getenv("STREAMRUN_BENCH") != "1" {
		t.Skip("set STREAMRUN_BENCH=1 (and STREAMRUN_PULSAR_TXN_URL) to compare transactions with the official client")
	}
	url := os.Getenv("STREAMRUN_PULSAR_TXN_URL")
	if url == "" {
		t.Skip("set STREAMRUN_PULSAR_TXN_URL to a broker with transactions on (scripts/pulsar start --name txn)")
	}
	rounds := envInt("STREAMRUN_BENCH_ROUNDS", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var out strings.Builder
	fmt.Fprintf(&out, "transactions: receive, publish (100 B) and acknowledge N messages, commit; input in batches of %d, output batching %d msgs / %d KiB / %s; median of %d runs; %s (GOMAXPROCS=%d)\n",
		txnInputBatch, batchMessages, batchBytes>>10, batchDelay, rounds, url, runtime.GOMAXPROCS(0))
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "N/txn\tclient\tmessages\tmsg/s\tCPU µs/msg\t")
	for _, size := range envInts("STREAMRUN_BENCH_TXN_SIZES", txnSizes) {
		n := txnMessages(size)
		runs := map[string][]txnResult{}
		for round := 0; round < rounds; round++ {
			for _, client := range []string{"official", "streamrun"} {
				runs[client] = append(runs[client], measureTxn(ctx, t, url, client, newTransactor(client), size, n))
			}
		}
		best := map[string]txnResult{}
		for client, rs := range runs {
			slices.SortFunc(rs, func(a, b txnResult) int { return cmp.Compare(a.rate(), b.rate()) })
			best[client] = rs[len(rs)/2]
		}
		for _, client := range []string{"streamrun", "official"} {
			r := best[client]
			fmt.Fprintf(w, "%d\t%s\t%d\t%.0f\t%.2f\t\n", size, client, r.n, r.rate(), r.cpuPerMsg())
		}
		s, o := best["streamrun"], best["official"]
		fmt.Fprintf(w, "%d\tratio\t\t%.2fx\t%.2fx\t\n", size, s.rate()/o.rate(), s.cpuPerMsg()/o.cpuPerMsg())
	}
	w.Flush()
	fmt.Fprint(&out, "ratio = streamrun / official: above 1 is better for msg/s, below 1 for CPU\n")
	t.Log("\n" + out.String())
	fmt.Print(out.String())
}
