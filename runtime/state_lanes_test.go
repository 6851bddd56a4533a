package runtime_test

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A keyed-state pipeline with several instances gives each key's
// messages to one of them, whatever their ordering keys: messages of
// one key whose ordering keys all differ still count up one after the
// other, none lost to two instances changing the key's value at once
// (docs/pipelines.md, "Keyed state"). Every key's count, in the
// changelog and in its highest output, is its number of messages.
func TestKeyedStateKeepsAKeyOnOneInstanceWhateverItsOrderingKey(t *testing.T) {
	peer := brokertest.Target(t)
	base := brokertest.TopicName(t)
	in, out := base+"-in", base+"-out"
	cl := clientURL(t, peer.URL)
	outs := collect(t, cl, out)

	const n, keys = 600, 4
	key := func(i int) string { return fmt.Sprintf("k%d", i%keys) }
	// The ordering key is the message's sequence: it spreads each key's
	// messages over every lane, if lanes were chosen by it.
	publishOrdered(t, cl, in, n, key, func(i int) string { return "o" + strconv.Itoa(i) })
	p := countingPipeline(t, in, out, testConfig{})
	p.Handler.Instances = 3
	r := runHost(t, nil, streamrun.Options{Pool: pool.Options{ServiceURL: peer.URL}}, p)

	waitFor(t, "every input acknowledged", func() bool { return r.stats("counts").Acked >= n })
	want := n / keys
	vals, err := streamrun.ReadState(testContext(t), cl, p.ChangelogTopic())
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != keys {
		t.Errorf("%d keys in the changelog, want %d: %q", len(vals), keys, vals)
	}
	for k, v := range vals {
		if c, err := strconv.Atoi(string(v)); err != nil || c != want {
			t.Errorf("key %s: count %q in the changelog, want %d", k, v, want)
		}
	}
	waitFor(t, "outputs", func() bool { return outs.len() >= n })
	last := map[string]int{}
	for _, pl := range outs.payloads() {
		k, v, _ := strings.Cut(pl, "=")
		c, _ := strconv.Atoi(v)
		last[k] = max(last[k], c)
	}
	for i := range keys {
		if k := key(i); last[k] != want {
			t.Errorf("key %s: highest count output %d, want %d", k, last[k], want)
		}
	}
}

// publishOrdered publishes n messages to topic with keys from key and
// ordering keys from ok, and waits for every receipt.
func publishOrdered(t testing.TB, cl *pool.Client, topic string, n int, key, ok func(i int) string) {
	t.Helper()
	ctx := testContext(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		m := pool.Message{Payload: []byte("m-" + strconv.Itoa(i)), Key: key(i), OrderingKey: ok(i)}
		wg.Add(1)
		cl.PublishAsync(ctx, topic, m, func(_ pulsarID, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("publish to %s: %v", topic, first)
	}
}
