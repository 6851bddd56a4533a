package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// The plugin's end of the batch channel of contract version 2
// (plugin/internal/contract): a socket the host made and handed this
// process at its start, as the file descriptor named by
// STREAMRUN_PLUGIN_BATCH_FD. Batches come in as frames, answers go out as
// frames; Init and Close stay on gRPC.

// channelConn is the plugin's end of the batch channel (channel_unix.go).
// Close ends a Read or Write under way on another goroutine.
type channelConn interface {
	io.ReadWriteCloser
}

// openChannel takes the batch channel's descriptor, named by
// STREAMRUN_PLUGIN_BATCH_FD.
func openChannel() (channelConn, error) {
	v := os.Getenv(contract.EnvBatchFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("contract version %d needs the batch channel's descriptor in %s, which is %q",
			contract.VersionBatchChannel, contract.EnvBatchFD, v)
	}
	conn, err := channelFromFD(fd)
	if err != nil {
		return nil, fmt.Errorf("the batch channel (descriptor %d): %w", fd, err)
	}
	return conn, nil
}

// serveChannel serves the batches that come on conn until the host ends
// the channel (or goes). The handlers' context ends when a free worker
// reads the channel's end; a handler at work while every worker is busy
// (always, at Concurrency 1) ends at its deadline, or when the host's
// kill or exit takes the process (on version 1, gRPC ends the context
// with the stream).
func (s *server) serveChannel(conn channelConn) {
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	// Recycled: a decoded batch copies its strings out of its frame
	// (strs), and the worker releases the frame once it is answered.
	fr := wire.NewRecyclingFrameReader(conn, s.maxSize)
	var out []byte // the answers to write, reused: sends are serialized
	// A batch that does not decode ends the channel: the host sees the
	// plugin's end, a crash, and retries its batches elsewhere.
	bad := func(err error) {
		slog.Error("a batch from the host does not decode; the batch channel ends", "error", err)
		_ = conn.Close()
	}
	take := func(in *batchIn, frame []byte, chunk *wire.Chunk) {
		// Decoded by the worker that takes it, into its arrays.
		in.frame, in.fail, in.chunk = frame, bad, chunk
	}
	err := s.serveBatches(ctx,
		func(in *batchIn) error {
			frame, chunk, err := fr.NextChunk()
			if err != nil {
				cancel() // the host is gone: so is the work for it
				return err
			}
			take(in, frame, chunk)
			return nil
		},
		func(in *batchIn) bool {
			if !fr.Buffered() {
				return false
			}
			frame, chunk, err := fr.NextChunk() // read already: no wait, no error
			if err != nil {
				return false
			}
			take(in, frame, chunk)
			return true
		},
		func(r *resultsOut, hold bool) error {
			if r != nil {
				n := len(out)
				var err error
				if out, err = wire.AppendFrame(out, r); err != nil {
					out = out[:n] // the answers held before it still go
					return err
				}
			}
			if hold || len(out) == 0 {
				return nil
			}
			_, err := conn.Write(out)
			out = out[:0]
			return err
		})
	cancel()
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
		slog.Warn("the batch channel failed; no more batches", "error", err)
	}
}
