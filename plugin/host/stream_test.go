package host

import (
	"context"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// panickyCarrier answers every batch sent with the same panic report,
// naming message 1, as a plugin of an older SDK does once it panicked.
type panickyCarrier struct {
	sent   chan uint64
	closed chan struct{}
	once   sync.Once
}

func (c *panickyCarrier) send(b *batchOut) error { c.sent <- b.seq; return nil }

func (c *panickyCarrier) recv(r *resultsIn) error {
	select {
	case seq := <-c.sent:
		r.seq = seq
		r.panic, _ = proto.Marshal(&pb.Panic{Index: 1, Value: "boom"})
		return nil
	case <-c.closed:
		return io.EOF
	}
}

func (c *panickyCarrier) close() { c.once.Do(func() { close(c.closed) }) }

// Only the first panic report on a stream names a message: the plugin
// answers the batches after with the same panic, whose index is into the
// batch that panicked, not theirs.
func TestOnlyAPluginsFirstPanicReportNamesAMessage(t *testing.T) {
	c := &panickyCarrier{sent: make(chan uint64, 2), closed: make(chan struct{})}
	s := newBatchStream(c, 1<<20)
	defer s.close()
	for i, want := range []int32{1, -1, -1} {
		_, err := s.process(context.Background(), Messages(msgs("a", "b")))
		p := contract.PanicDetail(status.Convert(err))
		if p == nil || p.Value != "boom" || p.Index != want {
			t.Fatalf("answer %d: %v (panic %v), want a panic naming message %d", i, err, p, want)
		}
	}
}
