package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// repoRoot is the repository's root directory (tests run in
// cmd/streamrun).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildStreamrun builds the streamrun command into a temporary directory.
func buildStreamrun(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "streamrun")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build streamrun: %v\n%s", err, out)
	}
	return bin
}

// proc is a streamrun process started by a test.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr brokertest.SyncBuffer
	done           chan struct{}
	code           int
}

// startProc starts bin with args in dir (default: the test's directory),
// with env added to the test's environment. It is killed when the test
// ends, if it still runs.
func startProc(t *testing.T, name, dir, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.done)
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode() // -1 when killed by a signal
		default:
			p.code = -2
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s", name, tail(p.stdout.String(), 3000))
			t.Logf("%s stderr:\n%s", name, tail(p.stderr.String(), 6000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// wait waits for the process to exit, at most within, and returns its
// exit status.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(within):
		t.Fatalf("%s still running after %v", p.name, within)
		return 0
	}
}

func (p *proc) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// outputs collects what reaches a topic, from its earliest message.
type outputs struct {
	mu   sync.Mutex
	msgs []*subscribe.Message
}

func (o *outputs) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.msgs)
}

func (o *outputs) all() []*subscribe.Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*subscribe.Message(nil), o.msgs...)
}

// distinct is the number of distinct payloads received.
func (o *outputs) distinct() int {
	seen := map[string]bool{}
	for _, m := range o.all() {
		seen[string(m.Payload)] = true
	}
	return len(seen)
}

func collect(t *testing.T, client *pool.Client, topic string) *outputs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := subscribe.New(ctx, client, subscribe.Options{
		Topics: []string{topic}, Subscription: "test-collector", InitialPosition: subscribe.Earliest,
	})
	if err != nil {
		t.Fatal(err)
	}
	o := &outputs{}
	rctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := c.Receive(rctx)
			if err != nil {
				return
			}
			// Kept before it is acknowledged, so that an empty backlog
			// on test-collector means every output is in o (caughtUp).
			o.mu.Lock()
			o.msgs = append(o.msgs, m)
			o.mu.Unlock()
			_ = c.Ack(rctx, m)
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	})
	return o
}

// caughtUp waits until collect's subscription on topic has no backlog:
// every output published so far is in o. Outputs published just before a
// run exits are still on their way to the collector when it does.
func (o *outputs) caughtUp(t *testing.T, adminURL, topic string) {
	t.Helper()
	brokertest.Eventually(t, time.Minute, "the collector to read every output of "+topic, func() bool {
		return subscriptionBacklog(t, adminURL, topic, "test-collector") == 0
	})
}

// newClient connects to url. Its producers batch by key, as publishers
// to topics read with KeyShared should: the broker dispatches an entry
// whole, by its first key.
func newClient(t *testing.T, url string) *pool.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := pool.Options{ServiceURL: url}
	o.Producer.Batching.ByKey = true
	c, err := pool.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// publishKeyed publishes n messages "k<i%keys>:<seq>" with key k<i%keys>,
// seq counting up per key.
func publishKeyed(t *testing.T, client *pool.Client, topic string, n, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
	)
	for i := range n {
		key := fmt.Sprintf("k%d", i%keys)
		client.PublishAsync(ctx, topic, pool.Message{Key: key, Payload: fmt.Appendf(nil, "%s:%d", key, i/keys)},
			func(_ pulsarwire.MessageID, err error) {
				if err != nil {
					mu.Lock()
					firstErr = cmp(firstErr, err)
					mu.Unlock()
				}
			})
	}
	if err := client.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// subscriptionBacklog asks the admin API at adminURL for the backlog of
// subscription sub on topic (a short name in public/default).
func subscriptionBacklog(t *testing.T, adminURL, topic, sub string) int64 {
	t.Helper()
	resp, err := http.Get(adminURL + "/admin/v2/persistent/public/default/" + topic + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Subscriptions map[string]struct {
			MsgBacklog int64 `json:"msgBacklog"`
		} `json:"subscriptions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("topic stats: %v", err)
	}
	s, ok := st.Subscriptions[sub]
	if !ok {
		t.Fatalf("topic %s has no subscription %s", topic, sub)
	}
	return s.MsgBacklog
}

// writePipelineFile writes a pipeline file into dir and returns its path.
func writePipelineFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// receiveAll reads subscription sub (Shared) on topic, acknowledging,
// until it has seen every payload of want, and returns how many messages
// it read. A payload that never comes fails the test at the deadline.
func receiveAll(t *testing.T, client *pool.Client, topic, sub string, want []string) int {
	t.Helper()
	if len(want) == 0 {
		return 0
	}
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := subscribe.New(ctx, client, subscribe.Options{Topics: []string{topic}, Subscription: sub, Type: subscribe.Shared})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	read := 0
	for len(left) > 0 {
		m, err := c.Receive(ctx)
		if err != nil {
			some := []string{}
			for k := range left {
				if some = append(some, k); len(some) == 5 {
					break
				}
			}
			t.Fatalf("%d inputs without an output are not in the subscription (acknowledged unprocessed, or lost), e.g. %v: %v", len(left), some, err)
		}
		read++
		delete(left, string(m.Payload))
		if err := c.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return read
}
