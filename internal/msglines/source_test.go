package msglines_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
)

// payloads drains next.
func payloads(t *testing.T, next func(context.Context) (pool.Message, bool, error)) []string {
	t.Helper()
	var out []string
	for {
		m, ok, err := next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, m.Key+"="+string(m.Payload))
	}
}

// A source is an input's lines up to its limit, stdin for "-", or the
// generated messages; a fixed payload the broker would refuse is refused
// before anything is sent, with the most it takes; an input that does not
// open is the path error.
func TestSourceOpens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := brokertest.Start(t, func(o *broker.Options) { o.MaxMessageSize = 1000 })
	c, err := pool.New(ctx, pool.Options{ServiceURL: b.ServiceURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())

	file := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(file, []byte("k1:a\n\nk2:b\nk3:c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := msglines.Source{Input: file, Limit: 2, Decoder: msglines.Decoder{KeySeparator: ":"}}
	next, total, stop, err := in.Open(ctx, c)
	if err != nil || total != -1 {
		t.Fatalf("Open %s: total %d, %v", file, total, err)
	}
	if got := strings.Join(payloads(t, next), " "); got != "k1=a k2=b" {
		t.Errorf("input up to 2 lines: %s", got)
	}
	stop()

	next, _, stop, err = msglines.Source{Input: "-", Stdin: strings.NewReader("x\ny\n")}.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(payloads(t, next), " "); got != "=x =y" {
		t.Errorf("stdin: %s", got)
	}
	stop()

	next, total, stop, err = msglines.Source{Generated: msglines.Generated{Text: "m{n}", Count: 2}}.Open(ctx, c)
	if err != nil || total != 2 {
		t.Fatalf("generated: total %d, %v", total, err)
	}
	if got := strings.Join(payloads(t, next), " "); got != "=m0 =m1" {
		t.Errorf("generated: %s", got)
	}
	stop()

	_, _, _, err = msglines.Source{Generated: msglines.Generated{Size: 5000, Count: 1}}.Open(ctx, c)
	var big *msglines.TooLargeError
	if !errors.As(err, &big) || big.Size != 5000 || big.Most > 1000 || big.Most < 900 {
		t.Errorf("5000 bytes to a broker taking 1000: %v (%+v)", err, big)
	}
	if _, _, _, err := (msglines.Source{Generated: msglines.Generated{Size: 500, Count: 1}}).Open(ctx, c); err != nil {
		t.Errorf("500 bytes to a broker taking 1000: %v", err)
	}
	var pe *os.PathError
	if _, _, _, err := (msglines.Source{Input: filepath.Join(t.TempDir(), "none")}).Open(ctx, c); !errors.As(err, &pe) {
		t.Errorf("a missing input: %v, want the *os.PathError", err)
	}
}
