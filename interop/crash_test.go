package interop

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// kill -9 of `streamrun broker --data DIR` in the middle of a stream loses
// no message whose send receipt reached the producer: after a restart on
// the same directory, a subscription made before the crash reads every one
// of them, in publish order. (Messages in flight at the crash may or may
// not be there, and the producer's resend after reconnecting may repeat
// some; neither is a loss.)
func TestKillNineLosesNoReceiptedMessage(t *testing.T) {
	embeddedOnly(t, "kills a `streamrun broker` process")
	const beforeKill = 3000
	listen, http, err := freeBrokerAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	args := brokerArgs{listen: listen, http: http, data: t.TempDir()}
	b := startBroker(t, args)
	ctx := testContext(t)
	topic := brokertest.TopicName(t)

	c := newClientURL(t, b.serviceURL, func(o *pulsar.ClientOptions) { o.OperationTimeout = 20 * time.Second })
	// The subscription exists before anything is published, so its
	// cursor at the start of the topic must survive the crash too.
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "survivor", Type: pulsar.Exclusive})
	cons.Close()
	p := newProducer(t, c, pulsar.ProducerOptions{
		Topic:                   topic,
		BatchingMaxPublishDelay: 2 * time.Millisecond,
		BatchingMaxMessages:     100,
		SendTimeout:             60 * time.Second,
	})

	var (
		mu        sync.Mutex
		receipted = map[int]bool{}
		failed    int
	)
	receipts := func() int { mu.Lock(); defer mu.Unlock(); return len(receipted) }
	inflight := make(chan struct{}, 500) // bounds the messages awaiting receipts
	var pending sync.WaitGroup
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		i := 0
		defer func() { sent <- i }()
		for ; ; i++ {
			select {
			case inflight <- struct{}{}:
			case <-stop:
				return
			}
			pending.Add(1)
			seq := i
			p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: []byte(strconv.Itoa(seq))}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
				mu.Lock()
				if err == nil {
					receipted[seq] = true
				} else {
					failed++
				}
				mu.Unlock()
				<-inflight
				pending.Done()
			})
		}
	}()

	eventually(ctx, t, fmt.Sprintf("%d send receipts", beforeKill), func() bool { return receipts() >= beforeKill })
	b.kill()
	atKill := receipts()
	close(stop)
	published := <-sent
	t.Logf("killed the broker with %d of %d published messages receipted", atKill, published)

	b = startBroker(t, args)
	if b.serviceURL != "pulsar://"+listen {
		t.Logf("restarted broker says %s", b.serviceURL)
	}
	// The producer reconnects and resends what was pending; wait until
	// every send has its receipt or its error.
	waitGroup(ctx, t, &pending, "every send to be answered after the restart")
	mu.Lock()
	want := make([]int, 0, len(receipted))
	for seq := range receipted {
		want = append(want, seq)
	}
	t.Logf("after the restart: %d receipted, %d failed, of %d published", len(receipted), failed, published)
	mu.Unlock()
	sort.Ints(want)

	c2 := newClientURL(t, b.serviceURL)
	cons = subscribe(t, c2, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "survivor", Type: pulsar.Exclusive})
	seen := map[int]bool{}
	var order []int
	dups := 0
	missing := func() int {
		n := 0
		for _, seq := range want {
			if !seen[seq] {
				n++
			}
		}
		return n
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for missing() > 0 {
		m, err := cons.Receive(rctx)
		if err != nil {
			var lost []int
			for _, seq := range want {
				if !seen[seq] && len(lost) < 20 {
					lost = append(lost, seq)
				}
			}
			t.Fatalf("receipted messages missing after the restart: %d of %d (first: %v); last error %v", missing(), len(want), lost, err)
		}
		seq, err := strconv.Atoi(string(m.Payload()))
		if err != nil {
			t.Fatalf("bad payload %q", m.Payload())
		}
		if seen[seq] {
			dups++
		} else {
			seen[seq] = true
			order = append(order, seq)
		}
		cons.Ack(m)
	}
	if !sort.IntsAreSorted(order) {
		t.Fatalf("messages came back out of publish order: %v", abbreviateInts(order))
	}
	t.Logf("all %d receipted messages read back (%d repeats, %d unreceipted ones also there)", len(want), dups, len(seen)-len(want))
	cons.Close()
	c2.Close()
	if err := b.stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
}

func abbreviateInts(s []int) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Itoa(v)
	}
	return abbreviate(out)
}
