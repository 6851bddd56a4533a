package plugin

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// echoHandler answers each message with one output, its payload.
var echoHandler = HandlerFunc(func(_ context.Context, w ResultWriter, batch []*Message) error {
	for _, m := range batch {
		w.Output(m, Output{Topic: "out", Payload: m.Payload})
	}
	return nil
})

// countingConn counts the writes made on the plugin's end of a channel.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// channelPair serves h on one end of an in-memory batch channel at
// contract version 3 and returns the other end, the host's, and the
// plugin's end's write count. The channel ends with the test.
func channelPair(t *testing.T, h Handler, concurrency int) (net.Conn, *countingConn) {
	t.Helper()
	hostEnd, pluginEnd := net.Pipe()
	cc := &countingConn{Conn: pluginEnd}
	s := &server{h: h, slots: make(chan struct{}, concurrency), maxSize: DefaultMaxMessageSize,
		version: contract.VersionCompactAnswers}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.serveChannel(cc)
	}()
	t.Cleanup(func() {
		_ = hostEnd.Close()
		<-done
	})
	return hostEnd, cc
}

// batchFrame is a frame of a Batch of n messages with sequence number seq.
func batchFrame(t *testing.T, seq uint64, n int) []byte {
	t.Helper()
	b := &pb.Batch{Seq: seq, TimeoutMs: 30000}
	for i := range n {
		b.Messages = append(b.Messages, &pb.Message{Id: fmt.Sprintf("1:%d:-1:-1", i),
			Topic: "persistent://public/default/in", Payload: []byte(fmt.Sprintf("%d/%d", seq, i))})
	}
	body, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// readAnswer reads one answer frame from the host's end.
func readAnswer(t *testing.T, c net.Conn) *pb.BatchResult {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("read an answer: %v", err)
	}
	body := make([]byte, binary.LittleEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("read an answer: %v", err)
	}
	r := new(pb.BatchResult)
	if err := proto.Unmarshal(body, r); err != nil {
		t.Fatalf("an answer that does not decode: %v", err)
	}
	return r
}

// A burst of quick batches, read at once, is answered in fewer writes
// than batches, and every answer is there, whole, in its own frame.
func TestABurstOfQuickBatchesIsAnsweredInFewerWrites(t *testing.T) {
	for _, conc := range []int{1, 2} {
		t.Run(fmt.Sprintf("Concurrency %d", conc), func(t *testing.T) {
			host, pluginEnd := channelPair(t, echoHandler, conc)
			const batches = maxHeldAnswers
			var burst []byte
			for seq := range uint64(batches) {
				burst = append(burst, batchFrame(t, seq+1, 3)...)
			}
			go func() { _, _ = host.Write(burst) }() // one write: the plugin reads them at once
			seen := map[uint64]bool{}
			for range batches {
				r := readAnswer(t, host)
				if seen[r.Seq] {
					t.Fatalf("answer %d came twice", r.Seq)
				}
				seen[r.Seq] = true
				if len(r.Outcomes) != 3 || r.EchoTopic != "out" {
					t.Errorf("answer %d: %d outcomes, echo topic %q; want 3 and \"out\"", r.Seq, len(r.Outcomes), r.EchoTopic)
				}
				for i, p := range r.Payloads {
					if want := fmt.Sprintf("%d/%d", r.Seq, i); string(p) != want {
						t.Errorf("answer %d: payload %d is %q, want %q", r.Seq, i, p, want)
					}
				}
			}
			if w := pluginEnd.writes.Load(); w >= batches {
				t.Errorf("%d batches read at once were answered in %d writes; want fewer", batches, w)
			}
		})
	}
}

// A host that sends the next batch only once it has the last one's
// answer gets every answer: no answer waits for a batch that will not
// come, with one worker or with two (one of which waits in the read).
func TestAnAnswerIsNotHeldForABatchThatIsNotThere(t *testing.T) {
	for _, conc := range []int{1, 2} {
		t.Run(fmt.Sprintf("Concurrency %d", conc), func(t *testing.T) {
			host, _ := channelPair(t, echoHandler, conc)
			for seq := uint64(1); seq <= 50; seq++ {
				frame := batchFrame(t, seq, 2)
				go func() { _, _ = host.Write(frame) }()
				if r := readAnswer(t, host); r.Seq != seq {
					t.Fatalf("answer %d to batch %d", r.Seq, seq)
				}
			}
		})
	}
}

// A slow handler's answers are not held for the next batch, even when it
// is already there.
func TestASlowBatchsAnswerGoesAtOnce(t *testing.T) {
	slow := HandlerFunc(func(ctx context.Context, w ResultWriter, batch []*Message) error {
		if string(batch[0].Payload) == "1/0" {
			time.Sleep(2 * holdBelow)
		}
		return echoHandler.Process(ctx, w, batch)
	})
	host, pluginEnd := channelPair(t, slow, 1)
	burst := append(batchFrame(t, 1, 1), batchFrame(t, 2, 1)...)
	go func() { _, _ = host.Write(burst) }()
	for seq := uint64(1); seq <= 2; seq++ {
		if r := readAnswer(t, host); r.Seq != seq {
			t.Fatalf("answer %d, want %d", r.Seq, seq)
		}
	}
	if w := pluginEnd.writes.Load(); w != 2 {
		t.Errorf("a slow batch and the next were answered in %d writes; want 2, one each", w)
	}
}

// A quick batch's answer held for the next batch goes without it should
// that batch run long: here it blocks until the test has read the first
// answer.
func TestAHeldAnswerDoesNotWaitForALongNextBatch(t *testing.T) {
	release := make(chan struct{})
	blocking := HandlerFunc(func(ctx context.Context, w ResultWriter, batch []*Message) error {
		if string(batch[0].Payload) == "2/0" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return echoHandler.Process(ctx, w, batch)
	})
	host, _ := channelPair(t, blocking, 1)
	burst := append(batchFrame(t, 1, 1), batchFrame(t, 2, 1)...)
	go func() { _, _ = host.Write(burst) }()
	if r := readAnswer(t, host); r.Seq != 1 {
		t.Fatalf("answer %d, want 1 while batch 2 is at work", r.Seq)
	}
	close(release)
	if r := readAnswer(t, host); r.Seq != 2 {
		t.Fatalf("answer %d, want 2", r.Seq)
	}
}
