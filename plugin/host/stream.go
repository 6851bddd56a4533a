package host

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// batchStream is the host's end of the instance's batches, whichever way
// they travel (a carrier): callers send under sendMu and wait for the
// answer with their batch's seq; one goroutine, owned by the stream,
// reads answers and hands each to its caller. It ends when the carrier
// does (the plugin went, or close was called), failing every caller still
// waiting.
type batchStream struct {
	carrier carrier
	maxSize int // the largest Batch sent (ClientOptions.MaxMessageSize)

	sendMu sync.Mutex

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan streamAnswer
	err     error // why the stream ended; nil while it runs

	done chan struct{} // closed when the reader has ended

	// spare holds answers their callers are done with, for the reader
	// to decode the next ones into (their arrays of results).
	spare sync.Pool
	// outs holds batches sent, for the next to be encoded with (their
	// arrays of sizes and ids).
	outs sync.Pool
}

// carrier moves batches and answers between host and plugin: the gRPC
// Batches stream (contract version 1, grpcCarrier) or the batch channel
// (version 2, channel.go). Its errors are gRPC statuses, or io.EOF when
// the plugin ended it, for Instance.callError to classify.
type carrier interface {
	// send sends a batch; it is called under batchStream.sendMu.
	send(*batchOut) error
	// recv reads the next answer; only batchStream.read calls it.
	recv(*resultsIn) error
	// close ends the carrier: a send or recv under way returns.
	close()
}

type streamAnswer struct {
	res *resultsIn
	err error
}

// batchesDesc is the Batches method as the generated code declares it.
var batchesDesc = &pb.Handler_ServiceDesc.Streams[0]

// grpcCarrier is contract version 1's carrier: one long-lived gRPC stream
// per instance that carries every batch and its answer, so a batch costs
// two HTTP/2 data frames instead of a call's set-up, headers and
// trailers.
type grpcCarrier struct {
	stream grpc.ClientStream
	cancel context.CancelFunc
}

// openGRPCCarrier opens the Batches stream on conn.
func openGRPCCarrier(conn *grpc.ClientConn) (*grpcCarrier, error) {
	if batchesDesc.StreamName != "Batches" {
		return nil, errors.New("plugin host: the generated contract has no Batches stream")
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := conn.NewStream(ctx, batchesDesc, pb.Handler_Batches_FullMethodName)
	if err != nil {
		cancel()
		return nil, err
	}
	return &grpcCarrier{stream: st, cancel: cancel}, nil
}

func (c *grpcCarrier) send(b *batchOut) error  { return c.stream.SendMsg(b) }
func (c *grpcCarrier) recv(r *resultsIn) error { return c.stream.RecvMsg(r) }
func (c *grpcCarrier) close()                  { c.cancel() }

// newBatchStream starts the reader of c's answers; batches above maxSize
// bytes are refused before they are sent.
func newBatchStream(c carrier, maxSize int) *batchStream {
	s := &batchStream{carrier: c, maxSize: maxSize,
		waiting: make(map[uint64]chan streamAnswer), done: make(chan struct{})}
	go s.read()
	return s
}

// read hands each answer to its caller until the stream ends. Only the
// first panic report on the stream names a message: a plugin that
// panicked answers the batches after with the same panic (whose index
// is into the batch that panicked), and the runtime strikes the message
// a crash names.
func (s *batchStream) read() {
	defer close(s.done)
	panicked := false
	for {
		in, _ := s.spare.Get().(*resultsIn)
		if in == nil {
			in = new(resultsIn)
		}
		err := s.carrier.recv(in)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "the plugin ended the batch stream")
			}
			s.fail(err)
			return
		}
		var a streamAnswer
		if in.panic != nil {
			p := new(pb.Panic)
			if perr := proto.Unmarshal(in.panic, p); perr != nil {
				p = &pb.Panic{Index: -1, Value: "(an undecodable panic report)"}
			}
			if panicked {
				p.Index = -1
			}
			panicked = true
			a.err = contract.PanicStatus(p)
		} else {
			a.res = in
		}
		s.mu.Lock()
		ch := s.waiting[in.seq]
		delete(s.waiting, in.seq)
		s.mu.Unlock()
		if ch != nil { // nil: its caller gave up on it
			ch <- a
		}
	}
}

// fail ends the stream for every caller with err.
func (s *batchStream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	for seq, ch := range s.waiting {
		ch <- streamAnswer{err: s.err}
		delete(s.waiting, seq)
	}
}

// process sends batch and waits for its answer, or for ctx. The errors
// are gRPC statuses or ctx's, for Instance.callError to classify.
func (s *batchStream) process(ctx context.Context, batch Batch) (*resultsIn, error) {
	wb, _ := s.outs.Get().(*batchOut)
	if wb == nil {
		wb = new(batchOut)
	}
	wb.reset(batch)
	// The batch's span, if traced, is the parent of the handler's.
	wb.traceParent, wb.traceState = msgtrace.Format(trace.SpanContextFromContext(ctx))
	// Room for the seq and timeout, not known yet.
	if n := wb.Size() + 2*binary.MaxVarintLen64; n > s.maxSize {
		// gRPC would refuse it too, and end the stream with it: refused
		// here, the instance stays usable for the next batch.
		s.putOut(wb)
		return nil, status.Errorf(codes.ResourceExhausted,
			"a batch of %d messages is %d bytes, above the limit of %d", batch.Len(), n, s.maxSize)
	}
	ch := make(chan streamAnswer, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		s.putOut(wb)
		return nil, err
	}
	s.next++
	seq := s.next
	s.waiting[seq] = ch
	s.mu.Unlock()

	wb.seq = seq
	if d, ok := ctx.Deadline(); ok {
		wb.timeoutMs = max(time.Until(d).Milliseconds(), 1)
	}
	// A send has no context: should the plugin stop reading, with the
	// flow-control window or the socket's buffer full, it would block past
	// ctx. Ending ctx then breaks the carrier, and the instance with it, as
	// a hang does anyway.
	stop := context.AfterFunc(ctx, s.carrier.close)
	s.sendMu.Lock()
	err := s.carrier.send(wb)
	s.sendMu.Unlock()
	stop()
	s.putOut(wb) // encoded: the carrier keeps nothing of it
	if err != nil && !errors.Is(err, io.EOF) {
		// A failed send ends the carrier; io.EOF means it had ended, and
		// the reader tells why.
		s.fail(err)
	}
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		s.forget(seq)
		return nil, ctx.Err()
	}
}

// putOut keeps wb, sent or refused, for a next batch, unless its arrays
// are those of an unusually large one.
func (s *batchStream) putOut(wb *batchOut) {
	if cap(wb.ids) > chunkRetain || cap(wb.fields) > maxKeptFields {
		return
	}
	wb.reset(nil) // nothing of the caller's batch is kept
	s.outs.Put(wb)
}

// maxKeptFields bounds the messages' fields a kept batchOut holds room
// for (a Fields is about 180 bytes).
const maxKeptFields = 4096

// recycle takes back an answer that its caller has converted: nothing
// refers to its results any more (their outputs and strings, which the
// caller keeps, are not in them but in the arrays and frames they point
// to).
func (s *batchStream) recycle(in *resultsIn) {
	clear(in.res)
	clear(in.payloads)
	in.codes, in.echoTopic = nil, ""
	s.spare.Put(in)
}

func (s *batchStream) forget(seq uint64) {
	s.mu.Lock()
	delete(s.waiting, seq)
	s.mu.Unlock()
}

// close ends the stream and waits for its reader.
func (s *batchStream) close() {
	s.carrier.close()
	<-s.done
}
