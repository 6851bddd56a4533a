package host

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/streamrun/streamrun/internal/rawsock"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// channelCarrier is contract version 2's carrier: the host's end of the
// batch channel, a socket pair made for this instance (channel_unix.go)
// whose other end only the plugin process holds. Each batch is one frame
// written, each answer one frame read; the answer's strings and payloads
// alias the frame (wire.FrameReader), as they alias gRPC's buffer on
// version 1. The channel is not encrypted: it has no name anyone could
// connect to (docs/runtime.md, "The plugin boundary", says what that
// protects against).
type channelCarrier struct {
	conn net.Conn
	io   io.ReadWriter // conn, by raw system calls where it can (internal/rawsock)
	fr   *wire.FrameReader
	out  []byte // the frame being written, reused (sends are serialized)
	// compact: answers may come in contract version 3's compact form;
	// compactState: with version 4's state changes in it too.
	compact, compactState bool

	closeOnce sync.Once
}

func newChannelCarrier(conn net.Conn, maxSize int, compact, compactState bool) *channelCarrier {
	rw := rawsock.Wrap(conn)
	return &channelCarrier{conn: conn, io: rw, fr: wire.NewFrameReader(rw, maxSize), compact: compact, compactState: compactState}
}

func (c *channelCarrier) send(b *batchOut) error {
	frame, err := wire.AppendFrame(c.out[:0], b)
	if err != nil {
		// A failed send ends the carrier, as it ends a gRPC stream.
		c.close()
		return status.Error(codes.Internal, err.Error())
	}
	c.out = frame
	if cap(c.out) > 4*chunkRetain {
		c.out = nil // one huge batch does not pin its buffer for good
	}
	if _, err := c.io.Write(frame); err != nil {
		c.close()
		return channelError("send a batch", err)
	}
	return nil
}

// chunkRetain is the size of frame buffer a carrier keeps between sends.
const chunkRetain = 256 << 10

func (c *channelCarrier) recv(r *resultsIn) error {
	frame, err := c.fr.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return channelError("read an answer", err)
	}
	r.compact, r.compactState = c.compact, c.compactState
	if err := r.Decode(frame); err != nil {
		// A plugin that writes what is not a BatchResult cannot be
		// trusted with the next one: the instance goes.
		c.close()
		return status.Error(codes.Unavailable, "the plugin's answer: "+err.Error())
	}
	return nil
}

func (c *channelCarrier) close() { c.closeOnce.Do(func() { _ = c.conn.Close() }) }

// channelError is a failure of the channel as a status callError reads as
// the plugin's end (Unavailable, as gRPC says of a broken connection).
func channelError(op string, err error) error {
	return status.Error(codes.Unavailable, fmt.Sprintf("batch channel: %s: %v", op, err))
}
