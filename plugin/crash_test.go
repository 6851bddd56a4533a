package plugin

import (
	"context"
	"net"
	"testing"

	"github.com/streamrun/streamrun/plugin/internal/contract"
)

// A plugin whose handler panicked answers the batches after with the same
// panic, naming no message of theirs: its index is into the batch that
// panicked.
func TestTheBatchesAfterAPanicAreAnsweredWithItNamingNoMessage(t *testing.T) {
	h := MessageFunc(func(_ context.Context, m *Message) ([]Output, error) {
		if string(m.Payload) == "1/1" {
			panic("boom")
		}
		return nil, nil
	})
	hostEnd, pluginEnd := net.Pipe()
	exited := make(chan int, 1)
	s := &server{h: h, slots: make(chan struct{}, 1), maxSize: DefaultMaxMessageSize,
		version: contract.VersionCompactAnswers, exit: func(code int) { exited <- code }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serveChannel(pluginEnd)
	}()
	defer func() {
		_ = hostEnd.Close()
		<-done
	}()
	for _, c := range []struct {
		seq  uint64
		want int32
	}{{1, 1}, {2, -1}} {
		seq, want := c.seq, c.want
		if _, err := hostEnd.Write(batchFrame(t, seq, 3)); err != nil {
			t.Fatal(err)
		}
		r := readAnswer(t, hostEnd)
		if r.Seq != seq || r.Panic == nil || r.Panic.Value != "boom" || r.Panic.Index != want {
			t.Fatalf("answer to batch %d: %v, want the panic naming message %d", seq, r, want)
		}
	}
	if code := <-exited; code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
}
