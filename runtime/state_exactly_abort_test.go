package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// After an abort under exactly_once with keyed state, the consumer asks
// for everything unacknowledged again, and the messages in hand are
// superseded while their copies arrive behind them. A batch that held a
// superseded message and a copy of its key's later one used to retry
// the later one ("an earlier message of key ... was delivered again"),
// which aborted the transaction and asked for everything again: with a
// backlog, every commit interval aborted, with more messages each time,
// and the pipeline stalled (docs/reliability.md, the counting pipeline).
// Each retry here aborts one transaction; the aborts that follow from
// a batch mixing superseded messages and copies must not go on.
func TestKeyedStateExactlyOnceAbortsDoNotCascade(t *testing.T) {
	url := txnURL(t, "embedded")
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, url, func(o *pool.Options) { o.Producer.Batching.MaxMessages = 40 })
	outs := collect(t, clientURL(t, url), out)
	const n, keys, every, step = 2400, 8, 151, 12
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	payload := func(i int) string {
		if i%every == 7 {
			return fmt.Sprintf("undo:%d", i)
		}
		return fmt.Sprintf("m-%d", i)
	}
	retries := 0
	for i := range n {
		if i%every == 7 {
			retries++
		}
	}
	p := exactlyOnce(counting(in, out, testConfig{MarkerDir: t.TempDir()}, self))
	// A steady stream, as in the campaign, rather than a backlog: the
	// batch being formed when an abort asks for everything again takes
	// both superseded messages and the copies that come behind them.
	p.Handler.BatchWait = 100 * time.Millisecond
	var again atomic.Int64
	log := slog.New(&abortCounter{again: &again, next: eoLogger(t).Handler()})
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: url}, Logger: log}, p)
	for i := 0; i < n; i += step {
		publish(t, cl, in, step, func(j int) string { return payload(i + j) }, func(j int) string { return key(i + j) })
		time.Sleep(10 * time.Millisecond)
	}
	outs.waitLen(t, n)
	time.Sleep(500 * time.Millisecond)
	checkCounts(t, outs.payloads(), keys, n/keys)
	s := r.stats("counts")
	t.Logf("retries %d; aborts %d, %d of them for a message delivered again", retries, s.Aborts, again.Load())
	if got := again.Load(); got > 0 {
		t.Errorf("%d transactions aborted for a message delivered again earlier in its batch, after %d retries: the aborts go on", got, retries)
	}
}

// abortCounter counts the aborts logged for a message delivered again
// earlier in its batch, and passes every record on.
type abortCounter struct {
	again *atomic.Int64
	next  slog.Handler
}

func (h *abortCounter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *abortCounter) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "transaction aborted") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" && strings.Contains(a.Value.String(), "was delivered again") {
				h.again.Add(1)
			}
			return true
		})
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *abortCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &abortCounter{again: h.again, next: h.next.WithAttrs(as)}
}

func (h *abortCounter) WithGroup(name string) slog.Handler {
	return &abortCounter{again: h.again, next: h.next.WithGroup(name)}
}
