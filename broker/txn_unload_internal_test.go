package broker

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A topic unloaded (and loaded again) while a transaction that
// acknowledged on it commits: the acknowledgements apply to the topic as
// it is loaded now, not to the copy that was unloaded, so the entries
// neither stay held on the new copy nor come again after it unloads.
// The unload is forced between the commit's look-up of the topic and its
// end there.
func TestTxnCommitAcksLandOnTheTopicLoadedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Memory: true, Transactions: true, Listen: freeAddr(t), HTTP: freeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client, err := pool.New(ctx, pool.Options{ServiceURL: c.ServiceURL(), Producer: pool.ProducerOptions{Batching: pool.BatchingOptions{Disabled: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	name := fmt.Sprintf("persistent://public/default/txn-unload-%d", time.Now().UnixNano())
	prod, err := client.Producer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	var sent sync.WaitGroup
	for i := range n {
		sent.Add(1)
		prod.SendAsync(ctx, pool.Message{Payload: fmt.Appendf(nil, "m%d", i)}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				t.Error(err)
			}
			sent.Done()
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sent.Wait()
	cons, err := subscribe.New(ctx, client, subscribe.Options{Topics: []string{name}, Subscription: "s", InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	tx, err := client.BeginTransaction(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.AckWithTxn(ctx, m, tx); err != nil {
			t.Fatal(err)
		}
	}
	parsed, err := pulsarwire.ParseTopic(name)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	unload := func(topic string) {
		once.Do(func() {
			if !c.unloadTopic(topic) {
				t.Errorf("%s was not loaded", topic)
			}
			if _, err := c.topicFor(parsed, false); err != nil {
				t.Errorf("load %s again: %v", topic, err)
			}
		})
	}
	c.txns.endingOn.Store(&unload)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tp, err := c.topicFor(parsed, false)
	if err != nil {
		t.Fatal(err)
	}
	s := tp.subscription("s")
	if s == nil {
		t.Fatal("the subscription is gone")
	}
	s.mu.Lock()
	held := len(s.txnAcks)
	var unacked []uint64
	for e := range uint64(n) {
		if !s.isAcked(e) {
			unacked = append(unacked, e)
		}
	}
	s.mu.Unlock()
	if held != 0 || len(unacked) != 0 {
		t.Fatalf("committed, yet the topic as loaded now holds %d entries for a transaction and has entries %v not acknowledged", held, unacked)
	}
}
