package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
)

// consumeTarget is the broker the consume tests use: Apache Pulsar when
// STREAMRUN_PULSAR_URL is set, else the embedded broker.
func consumeTarget(t *testing.T) string { return brokertest.Target(t).URL }

// dialPool connects a pool client to url, with a context of a minute for
// what the caller does with it; closeAll closes the client and ends the
// context.
func dialPool(t *testing.T, url string) (ctx context.Context, c *pool.Client, closeAll func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return ctx, c, func() {
		c.Close(ctx)
		cancel()
	}
}

func publishFor(t *testing.T, url, topic string, n int) {
	t.Helper()
	ctx, c, closeAll := dialPool(t, url)
	defer closeAll()
	for i := 0; i < n; i++ {
		m := pool.Message{Payload: []byte(fmt.Sprint("hello ", i)), Key: fmt.Sprint("k", i), Properties: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := c.Publish(ctx, topic, m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConsumePrintsOneLinePerMessage(t *testing.T) {
	url := consumeTarget(t)
	topic := fmt.Sprintf("persistent://public/default/consume-%d", time.Now().UnixNano())
	publishFor(t, url, topic, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"consume", "--url", url, "-t", topic, "-s", "cli", "--position", "earliest", "-n", "5", "-o", "json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines: %s", len(lines), stdout.String())
	}
	var second string
	for i, l := range lines {
		var m struct {
			ID         string            `json:"id"`
			Topic      string            `json:"topic"`
			Key        string            `json:"key"`
			Properties map[string]string `json:"properties"`
			Payload    string            `json:"payload"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if m.Payload != fmt.Sprint("hello ", i) || m.Key != fmt.Sprint("k", i) || m.Properties["i"] != fmt.Sprint(i) || m.Topic != topic || m.ID == "" {
			t.Fatalf("line %d: %+v", i, m)
		}
		if i == 1 {
			second = m.ID
		}
	}

	// Acknowledged: the subscription has nothing more, until a rewind to
	// a message id; text output.
	stdout.Reset()
	code = run(ctx, []string{"consume", "--url", url, "-t", topic, "-s", "cli", "--position", second, "-n", "4"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines = strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], second+` key="k1" properties=i=1 payload="hello 1"`) {
		t.Fatalf("text output:\n%s", stdout.String())
	}

	// Interrupted while waiting: exit 0.
	ictx, icancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer icancel()
	if code := run(ictx, []string{"consume", "--url", url, "-t", topic, "-s", "cli"}, &stdout, &stderr); code != 0 {
		t.Fatalf("interrupted: exit %d: %s", code, stderr.String())
	}
}

func TestConsumeRefusesBadFlags(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "x"}, "give --topic"},
		{[]string{"-t", "a"}, "--subscription is required"},
		{[]string{"-t", "a", "--pattern", "b.*", "-s", "x"}, "exclude each other"},
		{[]string{"-t", "a", "-s", "x", "--type", "sideways"}, "--type"},
		{[]string{"-t", "a", "-s", "x", "--position", "soon"}, "--position"},
		{[]string{"-t", "a", "-t", "b", "-s", "x", "--position", "1:2:-1"}, "exactly one --topic"},
		{[]string{"-t", "a", "-s", "x", "-o", "xml"}, "--output"},
		{[]string{"-t", "a", "-s", "x", "-n", "-1"}, "--count"},
		{[]string{"--pattern", "persistent://public/default/(", "-s", "x"}, "pattern"},
		{[]string{"--pattern", "persistent://pub.*/default/x", "-s", "x"}, "literal"},
		{[]string{"-t", "a", "-s", "x", "--bogus"}, "unknown flag"},
		{[]string{"-t", "a", "-s", "x", "extra"}, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"consume", "--url", "pulsar://127.0.0.1:1"}, tc.args...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
