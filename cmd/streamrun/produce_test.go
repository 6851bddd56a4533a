package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/subscribe"
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
	if !strings.Contains(stdout.String(), "produced 250 messages") {
		t.Fatalf("stdout: %s", stdout.String())
	}
	got := readTopic(t, cluster.ServiceURL(), topic, 250)
	for i, m := range got {
		if string(m.Payload) != fmt.Sprint("hello ", i) || m.Key != "k1" || m.Properties["a"] != "1" || m.Properties["b"] != "x=y" {
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
	if len(got[269].Payload) != 1000 {
		t.Fatalf("last message of %d bytes", len(got[269].Payload))
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
	if code := run(ctx, []string{"produce", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--topic") {
		t.Errorf("--help: exit %d, %q", code, stderr.String())
	}
}

func TestProduceReportsAnUnreachableBroker(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"produce", "--url", "pulsar://127.0.0.1:1", "-t", "x", "-m", "a", "--connect-timeout", "300ms"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "connection refused") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// readTopic reads the first n messages of topic on a new Exclusive
// subscription from the earliest message, as `streamrun consume` does.
func readTopic(t *testing.T, url, topic string, n int) []*subscribe.Message {
	t.Helper()
	ctx, c, closeAll := dialPool(t, url)
	defer closeAll()
	cons, err := subscribe.New(ctx, c, subscribe.Options{
		Topics: []string{topic}, Subscription: fmt.Sprint("check-", time.Now().UnixNano()),
		Type: subscribe.Exclusive, InitialPosition: subscribe.Earliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	got := make([]*subscribe.Message, 0, n)
	for len(got) < n {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatalf("%d of %d messages: %v", len(got), n, err)
		}
		got = append(got, m)
	}
	return got
}

// --size is checked against the broker's real limit: a payload of
// max_message_size goes, batched or not; one byte more is refused (exit
// 2) with the limit. Against Apache Pulsar too when STREAMRUN_PULSAR_URL
// is set.
func TestProduceSizeAtTheRealLimit(t *testing.T) {
	url := consumeTarget(t)
	topic := fmt.Sprintf("persistent://public/default/size-%d", time.Now().UnixNano())
	const limit = 5242880 // both brokers' default max_message_size
	for _, batching := range [][]string{{"--no-batching"}, nil} {
		args := append([]string{"produce", "--url", url, "-t", topic, "--size", fmt.Sprint(limit)}, batching...)
		if code, stdout, stderr := runArgs(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, stdout, stderr)
		}
	}
	code, _, stderr := runArgs("produce", "--url", url, "-t", topic, "--size", fmt.Sprint(limit+1))
	if code != 2 || !strings.Contains(stderr, fmt.Sprintf("--size %d: the broker takes messages of up to %d bytes", limit+1, limit)) {
		t.Fatalf("--size %d: exit %d: %s", limit+1, code, stderr)
	}
	got := readTopic(t, url, topic, 2)
	if len(got[0].Payload) != limit || len(got[1].Payload) != limit {
		t.Fatalf("payloads of %d and %d bytes", len(got[0].Payload), len(got[1].Payload))
	}
}
