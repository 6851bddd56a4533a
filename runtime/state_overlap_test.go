package runtime_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// keyCalls watches the calls of a pipeline's batches to its instances:
// which keys each instance slot has in a call at the moment, how often a
// call began while another was out on the same slot, and every call that
// began while another one out there held one of its keys.
type keyCalls struct {
	mu         sync.Mutex
	busy       map[int]map[string]int // by slot, then key: messages in calls
	out        map[int]int            // calls out, by slot
	overlapped int
	clashes    []string
}

func (k *keyCalls) intercept(ctx context.Context, c streamrun.Call, next func(context.Context) ([]plugin.Result, error)) ([]plugin.Result, error) {
	k.mu.Lock()
	busy := k.busy[c.Instance]
	if busy == nil {
		busy = map[string]int{}
		k.busy[c.Instance] = busy
	}
	if k.out[c.Instance] > 0 {
		k.overlapped++
	}
	for _, m := range c.Messages {
		if busy[m.Key] > 0 && len(k.clashes) < 10 {
			k.clashes = append(k.clashes, fmt.Sprintf("instance %d: a call with key %q began while another with it was out", c.Instance, m.Key))
		}
	}
	for _, m := range c.Messages {
		busy[m.Key]++
	}
	k.out[c.Instance]++
	k.mu.Unlock()

	res, err := next(ctx)

	k.mu.Lock()
	for _, m := range c.Messages {
		busy[m.Key]--
	}
	k.out[c.Instance]--
	k.mu.Unlock()
	return res, err
}

// A keyed-state pipeline (at least once) gives an instance its next
// batch while the last is still out when the two share no key
// (docs/benchmarks/keyed-state.md): calls overlap, but never two with a
// key in common, and through handler crashes (a panic on every 97th
// message, once each) and retries after a change (every 37th) every
// key's count is exact and its outputs come in its order, each count
// higher than the last. Fails on the code before the overlap: the calls
// of a slot never overlapped.
func TestKeyedStateOverlapsBatchesOnlyOfDisjointKeys(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, cl, out)

	// Keys in turn, so that a lane's consecutive batches of 20 mostly
	// hold different keys, and sometimes the same.
	const n, keys = 1200, 120
	key := func(i int) string { return fmt.Sprintf("k%03d", i%keys) }
	publish(t, cl, in, n, func(i int) string {
		if i%37 == 5 {
			return fmt.Sprintf("undo:%d", i)
		}
		return fmt.Sprintf("m-%d", i)
	}, key)
	calls := &keyCalls{busy: map[int]map[string]int{}, out: map[int]int{}}
	p := countingPipeline(t, in, out, testConfig{PanicEvery: 97})
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}, Intercept: calls.intercept}, p)

	want := func(string) int { return n / keys }
	got := changelogCounts(t, cl, p, keys, want)
	for k, c := range got {
		if c != want(k) {
			t.Errorf("key %s: count %d in the changelog, want %d", k, c, want(k))
		}
	}
	waitFor(t, "outputs", func() bool { return outs.len() >= n })
	last := map[string]int{}
	for _, pl := range outs.payloads() {
		k, v, _ := strings.Cut(pl, "=")
		c, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("output %q: %v", pl, err)
		}
		if c <= last[k] {
			t.Errorf("key %s: output count %d after %d: out of the key's order", k, c, last[k])
		}
		last[k] = c
	}
	for i := range keys {
		if k := key(i); last[k] != want(k) {
			t.Errorf("key %s: last count output %d, want %d", k, last[k], want(k))
		}
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	for _, c := range calls.clashes {
		t.Error(c)
	}
	if calls.overlapped == 0 {
		t.Error("no call began while another was out on its instance: the batches never overlapped")
	}
	if s := r.stats("counts"); s.Restarts == 0 || s.Retried == 0 {
		t.Errorf("the handler crashed %d times and retried %d messages; the test wants both", s.Restarts, s.Retried)
	}
	t.Logf("%d calls began while another was out on their instance", calls.overlapped)
}
