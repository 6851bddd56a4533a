package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

func TestProducePublishesWhatItIsTold(t *testing.T) {
	cluster := brokertest.Start(t)
	topic := fmt.Sprintf("persistent://public/default/produce-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"produce", "--url", cluster.ServiceURL(), "--topic", topic, "--count", "250",
		"--message", "hello {n}", "--key", "k1", "--property", "a=1", "-p", "b=x=y", "--compression", "lz4"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "produced 250 of 250 messages") {
		t.Fatalf("stdout: %s", stdout.String())
	}
	got := readTopic(t, cluster.ServiceURL(), topic, 250)
	for i, m := range got {
		if string(m.payload) != fmt.Sprint("hello ", i) || m.key != "k1" || m.props["a"] != "1" || m.props["b"] != "x=y" {
			t.Fatalf("message %d: %+v", i, m)
		}
	}

	// --size and a rate.
	stdout.Reset()
	start := time.Now()
	code = run(ctx, []string{"produce", "--url", cluster.ServiceURL(), "-t", topic, "-n", "20", "--size", "1000", "--rate", "200", "-q"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if el := time.Since(start); el < 90*time.Millisecond {
		t.Fatalf("20 messages at 200/s took %s", el)
	}
	got = readTopic(t, cluster.ServiceURL(), topic, 270)
	if len(got[269].payload) != 1000 {
		t.Fatalf("last message of %d bytes", len(got[269].payload))
	}
}

func TestProduceRefusesBadFlags(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{},                                    // no topic
		{"-t", "x"},                           // no message or size
		{"-t", "x", "-m", "a", "--size", "3"}, // both
		{"-t", "x", "-m", "a", "-n", "0"},
		{"-t", "x", "-m", "a", "-p", "novalue"},
		{"-t", "x", "-m", "a", "--compression", "brotli"},
		{"-t", "x", "-m", "a", "--rate", "-1"},
		{"-t", "a/b/c/d", "-m", "a"},
		{"-t", "x", "-m", "a", "--tls-cert", "c.pem"},
		{"-t", "x", "-m", "a", "extra"},
		{"--no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(ctx, append([]string{"produce"}, args...), &stdout, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"produce", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stderr.String(), "--topic") {
		t.Errorf("--help: exit %d, %q", code, stderr.String())
	}
}

func TestProduceReportsAnUnreachableBroker(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"produce", "--url", "pulsar://127.0.0.1:1", "-t", "x", "-m", "a", "--close-timeout", "300ms"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "connection refused") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

type readMessage struct {
	payload []byte
	key     string
	props   map[string]string
}

// readTopic reads the first n messages of topic with a consumer built on
// pool's connection API.
func readTopic(t *testing.T, url, topic string, n int) []readMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	conn, err := c.Conn(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	h := &reader{want: n, done: make(chan struct{})}
	id := c.NewConsumerID()
	if err := conn.RegisterConsumer(id, h); err != nil {
		t.Fatal(err)
	}
	defer conn.UnregisterConsumer(id)
	_, err = conn.Request(ctx, pulsarwire.Wrap(&pb.CommandSubscribe{
		Topic: proto.String(topic), Subscription: proto.String(fmt.Sprint("check-", time.Now().UnixNano())),
		SubType: pb.CommandSubscribe_Exclusive.Enum(), ConsumerId: proto.Uint64(id),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum(),
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(pulsarwire.Wrap(&pb.CommandFlow{ConsumerId: proto.Uint64(id), MessagePermits: proto.Uint32(uint32(n))})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("%d of %d messages", len(h.got), n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		t.Fatal(h.err)
	}
	return h.got[:n]
}

type reader struct {
	mu     sync.Mutex
	want   int
	got    []readMessage
	err    error
	done   chan struct{}
	over   bool
	codecs pulsarwire.Codecs
}

func (r *reader) end(err error) {
	if !r.over {
		r.err, r.over = err, true
		close(r.done)
	}
}

func (r *reader) HandleFrame(f pulsarwire.Frame, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.Cmd.GetType() != pb.BaseCommand_MESSAGE || r.over {
		return
	}
	md := f.Metadata
	payload, err := r.codecs.Decompress(md.GetCompression(), nil, f.Payload, int(md.GetUncompressedSize()), 10<<20)
	if md.GetCompression() == pb.CompressionType_NONE {
		payload, err = f.Payload, nil
	}
	if err != nil {
		r.end(err)
		return
	}
	msgs, err := pulsarwire.SplitBatch(payload, int(md.GetNumMessagesInBatch()))
	if err != nil {
		r.end(err)
		return
	}
	for _, m := range msgs {
		props := map[string]string{}
		for _, kv := range m.Meta.GetProperties() {
			props[kv.GetKey()] = kv.GetValue()
		}
		r.got = append(r.got, readMessage{payload: m.Payload, key: m.Meta.GetPartitionKey(), props: props})
	}
	if len(r.got) >= r.want {
		r.end(nil)
	}
}

func (r *reader) ConnectionClosed(err error) {}
