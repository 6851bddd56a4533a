package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/streamrun/streamrun/broker/brokertest"
)

// compactionStatus is the topic's compaction status as the admin API
// says it.
func compactionStatus(t *testing.T, path string) (status, lastError string) {
	t.Helper()
	var st struct{ Status, LastError string }
	if err := json.Unmarshal(adminDo(t, "GET", path+"/compaction", ""), &st); err != nil {
		t.Fatal(err)
	}
	return st.Status, st.LastError
}

// compactNow triggers a compaction of the topic at path and waits for
// it to succeed.
func compactNow(t *testing.T, path string) {
	t.Helper()
	adminDo(t, "PUT", path+"/compaction", "")
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, lastErr := compactionStatus(t, path)
		switch st {
		case "SUCCESS":
			return
		case "ERROR":
			t.Fatalf("compaction failed: %s", lastErr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("compaction still %s after 60s", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAll reads a topic from its start with a reader (readCompacted as
// said) until it has nothing more, and returns "key=payload" of each
// message with a payload (a batch's messages compacted out come as empty
// messages to this client, and it drops a message of one empty payload:
// the topic's last message must have one, or HasNext never ends).
func readAll(t *testing.T, c pulsar.Client, topic string, compacted bool) []string {
	t.Helper()
	ctx := testContext(t)
	r := newReader(t, c, pulsar.ReaderOptions{Topic: topic, StartMessageID: pulsar.EarliestMessageID(), ReadCompacted: compacted})
	var got []string
	for r.HasNext() {
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := r.Next(nctx)
		cancel()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if len(m.Payload()) > 0 {
			got = append(got, m.Key()+"="+string(m.Payload()))
		}
	}
	return got
}

// Compaction as Apache Pulsar's, with the official Go client: before it,
// the status is NOT_RUN; the admin trigger compacts the topic, whose
// readCompacted readers then see the last value of each key (inside
// batches too), keys whose last message is empty deleted and messages
// without a key left out, while a plain reader still sees everything;
// what is published after the horizon is read after the view, and a
// second compaction takes it in. A __compaction subscription appears;
// readCompacted is refused on Shared and Key_Shared with Apache Pulsar's
// error.
func TestCompactionAndReadCompacted(t *testing.T) {
	ctx := testContext(t)
	c := newClient(t)
	topic := brokertest.TopicName(t)
	path := topicPath(topic)
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	send := func(key, val string) {
		t.Helper()
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: key, Payload: []byte(val)}); err != nil {
			t.Fatal(err)
		}
	}
	send("k1", "a")
	send("k2", "b")
	send("k1", "c")
	send("", "no key")
	send("k2", "") // deletes k2
	send("k3", "e")
	// One batch: k4 twice (the second wins), k5, and k3 deleted.
	pb := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, BatchingMaxPublishDelay: time.Second, BatchingMaxMessages: 4})
	done := make(chan error, 4)
	for _, kv := range [][2]string{{"k4", "x"}, {"k5", "y"}, {"k4", "z"}, {"k3", ""}} {
		pb.SendAsync(ctx, &pulsar.ProducerMessage{Key: kv[0], Payload: []byte(kv[1])}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			done <- err
		})
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	send("k6", "last")
	send("k6", "") // deletes k6
	send("k7", "kept")

	if st, _ := compactionStatus(t, path); st != "NOT_RUN" {
		t.Errorf("status before any compaction: %s, want NOT_RUN", st)
	}
	compactNow(t, path)
	want := []string{"k1=c", "k5=y", "k4=z", "k7=kept"}
	if got := readAll(t, c, topic, true); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("readCompacted after compaction: %v, want %v", got, want)
	}
	all := []string{"k1=a", "k2=b", "k1=c", "=no key", "k3=e", "k4=x", "k5=y", "k4=z", "k6=last", "k7=kept"}
	if got := readAll(t, c, topic, false); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Errorf("a plain reader: %v, want %v", got, all)
	}
	var subs []string
	if err := json.Unmarshal(adminDo(t, "GET", path+"/subscriptions", ""), &subs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(subs), "__compaction") {
		t.Errorf("subscriptions %v: no __compaction", subs)
	}

	// Past the horizon: read after the view, then taken in.
	send("k5", "")
	send("k1", "after")
	if got, want := readAll(t, c, topic, true), []string{"k1=c", "k5=y", "k4=z", "k7=kept", "k1=after"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("readCompacted past the horizon: %v, want %v", got, want)
	}
	compactNow(t, path)
	if got, want := readAll(t, c, topic, true), []string{"k4=z", "k7=kept", "k1=after"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("readCompacted after a second compaction: %v, want %v", got, want)
	}

	// An Exclusive consumer reads the view too.
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic, SubscriptionName: "ex", Type: pulsar.Exclusive,
		ReadCompacted: true, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	var got []string
	for len(got) < 3 {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Payload()) > 0 {
			got = append(got, m.Key()+"="+string(m.Payload()))
		}
		cons.Ack(m)
	}
	if strings.Join(got, " ") != "k4=z k7=kept k1=after" {
		t.Errorf("an Exclusive readCompacted consumer: %v", got)
	}
	for _, typ := range []pulsar.SubscriptionType{pulsar.Shared, pulsar.KeyShared} {
		cs, err := c.Subscribe(pulsar.ConsumerOptions{Topic: topic, SubscriptionName: fmt.Sprint("s", typ), Type: typ, ReadCompacted: true})
		if err == nil {
			cs.Close()
			t.Errorf("readCompacted on subscription type %v was accepted", typ)
			continue
		}
		if !strings.Contains(err.Error(), "readCompacted only allowed on failover or exclusive subscriptions") {
			t.Errorf("readCompacted on subscription type %v: %v", typ, err)
		}
	}
}

// adminStatus sends one admin request and returns its status and body.
func adminStatus(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, tgt.adminURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A namespace's compactionThreshold policy, as Apache Pulsar's: an empty
// 200 when unset, the number once set, 412 for a negative one, gone
// after DELETE; and a topic of the namespace that passes it is compacted
// on its own at the next check (a minute on Apache Pulsar), its
// readCompacted readers then seeing the last value of each key.
func TestCompactionThresholdCompactsOnItsOwn(t *testing.T) {
	ns := fmt.Sprintf("public/compact-%d", time.Now().UnixNano()%1e9)
	adminDo(t, "PUT", "/admin/v2/namespaces/"+ns, "")
	defer adminStatus(t, "DELETE", "/admin/v2/namespaces/"+ns+"?force=true", "")
	policy := "/admin/v2/namespaces/" + ns + "/compactionThreshold"
	if code, body := adminStatus(t, "GET", policy, ""); code != 200 || body != "" {
		t.Errorf("unset: %d %q, want an empty 200", code, body)
	}
	if code, body := adminStatus(t, "PUT", policy, "-5"); code != 412 || !strings.Contains(body, "compactionThreshold must be 0 or more") {
		t.Errorf("negative: %d %s", code, body)
	}
	if code, body := adminStatus(t, "PUT", policy, "100"); code != 204 {
		t.Fatalf("set: %d %s", code, body)
	}
	if code, body := adminStatus(t, "GET", policy, ""); code != 200 || body != "100" {
		t.Errorf("set: %d %q, want 100", code, body)
	}

	ctx := testContext(t)
	c := newClient(t)
	topic := "persistent://" + ns + "/counts"
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	for i := range 40 {
		if _, err := p.Send(ctx, &pulsar.ProducerMessage{Key: fmt.Sprint("k", i%4), Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	path := brokertest.AdminPath(topic)
	eventually(ctx, t, "the topic compacted on its own", func() bool {
		st, _ := compactionStatus(t, path)
		return st == "SUCCESS"
	})
	if got, want := readAll(t, c, topic, true), []string{"k0=36", "k1=37", "k2=38", "k3=39"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("readCompacted: %v, want %v", got, want)
	}
	if code, _ := adminStatus(t, "DELETE", policy, ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if code, body := adminStatus(t, "GET", policy, ""); code != 200 || body != "" {
		t.Errorf("deleted: %d %q, want an empty 200", code, body)
	}
}
