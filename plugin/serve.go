package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/plugin/internal/contract"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
)

// ServeOptions tunes Serve. The zero value is what Serve uses.
type ServeOptions struct {
	// MaxMessageSize is the largest gRPC message the plugin accepts or
	// sends. Default DefaultMaxMessageSize (64 MiB); it should match the
	// host's (plugin/host ClientOptions.MaxMessageSize).
	MaxMessageSize int
	// Logger, if set, becomes slog's default logger in the plugin. Default:
	// JSON lines on the process's stderr at the level the host logs at,
	// which the host logs again as its own records, tagged with the plugin.
	// A Logger that writes elsewhere keeps its records from the host.
	Logger *slog.Logger
	// Concurrency is how many batches the handler may work on at once
	// when the host sends several (a Shared pipeline's
	// max_batches_in_flight). Default 1: calls to Process never overlap.
	// Set it higher only for a Handler that is safe for concurrent use, as
	// an http.Handler is; batches beyond it wait their turn.
	Concurrency int
}

// Serve runs h as a streamrun handler plugin: it answers the host's
// handshake, serves Init, Process and Close over gRPC until the host stops
// it, and then returns. Call it from main:
//
//	func main() { plugin.Serve(myHandler{}) }
//
// Started by hand instead of by a streamrun host, the binary says it is a
// plugin and exits with status 1.
func Serve(h Handler) { ServeWithOptions(h, ServeOptions{}) }

// ServeWithOptions is Serve with options.
func ServeWithOptions(h Handler, opts ServeOptions) {
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	s := &server{h: h, slots: make(chan struct{}, max(1, opts.Concurrency)), maxSize: opts.MaxMessageSize}
	if opts.Logger == nil {
		// The real stderr, before go-plugin swaps os.Stderr for its stream.
		var level slog.Level
		if level.UnmarshalText([]byte(os.Getenv(contract.EnvLogLevel))) != nil {
			level = slog.LevelInfo
		}
		opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	slog.SetDefault(opts.Logger)
	s.tracing = setupTracing()
	defer s.tracing.shutdown()
	size := opts.MaxMessageSize
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: contract.Handshake(),
		// The host offers the versions it speaks; go-plugin picks the
		// highest both do and registers only that version's service.
		VersionedPlugins: contract.PluginSets(s.versions()),
		Logger:           contract.NewHCLog(opts.Logger),
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(o, grpc.MaxRecvMsgSize(size), grpc.MaxSendMsgSize(size),
				grpc.ForceServerCodecV2(wire.NewCodec()),
				// Calls run on goroutines that stay, with their grown stacks,
				// instead of a fresh goroutine per call that grows its stack
				// again (copystack was a tenth of the plugin's CPU). Four:
				// go-plugin's long-lived streams take some; when all are
				// busy, gRPC starts a goroutine as before.
				grpc.NumStreamWorkers(4),
				grpc.InitialWindowSize(contract.WindowSize), grpc.InitialConnWindowSize(contract.WindowSize))...)
		},
	})
}

// versions are the contract versions the plugin offers: every one it
// speaks, up to contract.EnvMaxVersion when that is set.
func (s *server) versions() map[int]*contract.GRPCPlugin {
	top := contract.Version
	if v, err := strconv.Atoi(os.Getenv(contract.EnvMaxVersion)); err == nil && v >= contract.VersionGRPCBatches {
		top = min(v, top)
	}
	vs := make(map[int]*contract.GRPCPlugin, top)
	for v := contract.VersionGRPCBatches; v <= top; v++ {
		vs[v] = &contract.GRPCPlugin{Register: s.register(v)}
	}
	return vs
}

// crashExitDelay is how long a plugin whose handler panicked lives on, so
// that its answer telling the host of the panic reaches the host. The host
// kills it as soon as it reads that answer, so this only matters if the
// host does not.
const crashExitDelay = time.Second

// crashFlush bounds the export of a crashing plugin's spans.
const crashFlush = 500 * time.Millisecond

// server is the plugin's side of the contract around a Handler.
type server struct {
	pb.UnimplementedHandlerServer
	h Handler

	// slots bounds the batches the handler works on at once (ServeOptions.
	// Concurrency, default 1): a host may send the next batch while the
	// handler still works on one (several in flight, or a batch it gave
	// up on at its deadline).
	slots   chan struct{}
	crashed atomic.Pointer[pb.Panic] // set once the handler panicked

	tracing *pluginTracing       // nil when the plugin exports no spans
	info    atomic.Pointer[Info] // pipeline and instance, once Init came
	version int                  // the contract version negotiated, once registered
	maxSize int                  // ServeOptions.MaxMessageSize
	// keyed says the pipeline keeps keyed state (InitRequest.keyed_state):
	// each batch comes with its keys' values.
	keyed atomic.Bool
	// exit ends the process after a panic; nil is os.Exit (a test's
	// server lives on).
	exit func(code int)
}

// register is the Register of contract version v: the service, and on
// version 2 the batch channel's reader.
func (s *server) register(v int) func(*grpc.Server) error {
	return func(g *grpc.Server) error {
		s.version = v
		if contract.OnChannel(v) {
			conn, err := openChannel()
			if err != nil {
				return err
			}
			go s.serveChannel(conn)
		}
		g.RegisterService(s.serviceDesc(), s)
		return nil
	}
}

func (s *server) Init(ctx context.Context, req *pb.InitRequest) (resp *pb.InitResponse, err error) {
	if int(req.ContractVersion) != s.version {
		return nil, status.Errorf(codes.FailedPrecondition,
			"the host speaks contract version %d, this plugin negotiated %d", req.ContractVersion, s.version)
	}
	s.info.Store(&Info{Pipeline: req.Pipeline, InstanceID: req.InstanceId})
	s.keyed.Store(req.KeyedState)
	if in, ok := s.h.(Initializer); ok {
		defer s.recoverPanic(&err)
		info := Info{Pipeline: req.Pipeline, InstanceID: req.InstanceId, Config: req.Config}
		if ierr := in.Init(ctx, info); ierr != nil {
			return nil, status.Error(codes.InvalidArgument, ierr.Error())
		}
	}
	// This SDK reads and writes keyed state (State): said whether or not
	// this pipeline keeps any, so a host can tell it from an older one.
	return &pb.InitResponse{ContractVersion: uint32(s.version), KeyedState: true}, nil
}

// run has the handler work on a batch, holding a slot. A handler that
// panics now or did before gives p instead of results.
func (s *server) run(ctx context.Context, batch []*Message, parent trace.SpanContext, sc *scratch) (res []Result, p *pb.Panic) {
	if p := s.crashed.Load(); p != nil {
		// Not this batch's panic: it names no message of it.
		return nil, &pb.Panic{Index: -1, Value: p.Value, Stack: p.Stack}
	}
	var tr trace.Tracer
	if s.tracing != nil {
		tr = s.tracing.tr
	}
	ctx, span := startHandlerSpan(ctx, tr, parent, s.info.Load(), len(batch))
	res, p, herr := handle(ctx, s.h, batch, sc)
	endHandlerSpan(span, batch, res, herr, p)
	if p != nil {
		// The process exits soon: its spans go first, briefly.
		s.tracing.flush(crashFlush)
		s.crash(p, batch)
		return nil, p
	}
	if herr != nil {
		slog.Warn("handler failed the batch; every message will be retried",
			"messages", len(batch), "error", herr)
	}
	return res, nil
}

// batches serves the Batches stream of contract version 1 (see
// serveBatches). Batch and answer are the hand-encoded wire types (see
// wire.go), not the generated ones.
func (s *server) batches(stream grpc.ServerStream) error {
	err := s.serveBatches(stream.Context(), func(in *batchIn) error { return stream.RecvMsg(in) }, nil,
		func(out *resultsOut, _ bool) error {
			if out == nil {
				return nil
			}
			return stream.SendMsg(out)
		})
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// serveBatches serves batches read by recv until it fails, on as many
// workers as there are slots. A free worker reads the next batch itself
// (one at a time: recv is not called concurrently), handles it and sends
// its answer: a batch is never handed from a reader to a worker, which
// would cost a wake-up of another thread each time. A batch that comes
// while every worker is busy waits in the stream or channel until one is
// free. The workers stay for the stream, with their grown stacks,
// instead of a fresh goroutine per batch that grows its stack again. It
// returns recv's first error once the answers of every batch read have
// been sent.
//
// ready, when not nil, takes the next batch into in when one has already
// been read (it never waits) and reports whether it did. A worker that
// has just answered a quick batch and finds the next one ready sends its
// answer with hold set: send may keep it, encoded, to go out with the
// next answer sent without hold, so that a burst of small batches costs
// the host one read and one wake-up, not one each (docs/runtime.md,
// "Answers held for a burst"). send(nil, false) sends what is kept.
func (s *server) serveBatches(ctx context.Context, recv func(*batchIn) error, ready func(*batchIn) bool,
	send func(out *resultsOut, hold bool) error) error {
	var recvMu, sendMu sync.Mutex
	var recvErr error // the first, under recvMu; it ends every worker
	var wg sync.WaitGroup
	for range cap(s.slots) {
		wg.Go(func() {
			sc := new(scratch)
			var next batchIn
			haveNext := false
			held := 0               // answers sent with hold since the last sent without
			var heldSince time.Time // when the batch of the first of them was begun
			// Should the batch after a held answer run long, this sends
			// what is held without it: no answer waits much past
			// holdBelow, whatever the next batch costs (nor risks its
			// own deadline for it).
			flush := time.AfterFunc(time.Hour, func() {
				sendMu.Lock()
				_ = send(nil, false)
				sendMu.Unlock()
			})
			flush.Stop()
			defer flush.Stop()
			for {
				var in batchIn
				if haveNext {
					in, next, haveNext = next, batchIn{}, false
				} else {
					recvMu.Lock()
					if recvErr == nil {
						recvErr = recv(&in)
					}
					err := recvErr
					recvMu.Unlock()
					if err != nil {
						return
					}
				}
				s.slots <- struct{}{} // free: only the workers take slots
				start := time.Now()
				out := s.answer(ctx, &in, sc)
				hold := false
				// A panic's answer goes at once, with those held: the
				// process exits soon after it.
				if ready != nil && held < maxHeldAnswers && out != nil && out.panic == nil {
					if held == 0 {
						heldSince = start
					}
					// TryLock: another worker may be in recv, waiting for a
					// batch with the lock held; this one must not wait
					// behind it with an answer unsent.
					if time.Since(heldSince) < holdBelow && recvMu.TryLock() {
						if recvErr == nil {
							haveNext = ready(&next)
						}
						recvMu.Unlock()
						hold = haveNext
					}
				}
				sendMu.Lock()
				// An error means the stream is gone, and with it the
				// host's wait for this answer; the next recv says so.
				_ = send(out, hold)
				sendMu.Unlock()
				if hold {
					if held == 0 {
						flush.Reset(holdBelow)
					}
					held++
				} else if held > 0 {
					flush.Stop() // sent; should it fire all the same, it finds nothing or others' held answers
					held = 0
				}
				// Encoded (and written, or kept as bytes): nothing uses the
				// frame now (a handler keeps no slice of a Message, and its
				// strings are copies).
				in.chunk.Release()
				if out != nil {
					sc.sizes, sc.codes = out.sizes, out.codes // grown, maybe
				}
			}
		})
	}
	wg.Wait()
	return recvErr
}

// A worker holds answers back (serveBatches) only for quick batches: at
// most maxHeldAnswers of them, the first begun less than holdBelow
// before the last is answered, and none for longer than holdBelow (a
// timer sends them should the next batch run long). A slow handler's
// answers go out one by one, its round trips costing little beside its
// work.
const (
	maxHeldAnswers = 8
	holdBelow      = 500 * time.Microsecond
)

// answer has the handler work on in, holding a slot it was given, and
// returns the answer to send, nil for none. It gives the slot back. The
// batch's messages and results are in sc's arrays (the worker's) when in
// comes undecoded (in.frame).
func (s *server) answer(ctx context.Context, in *batchIn, sc *scratch) *resultsOut {
	if in.frame != nil {
		if err := in.decode(in.frame, sc); err != nil {
			<-s.slots
			in.fail(fmt.Errorf("batch: %w", err))
			return nil
		}
	}
	if s.keyed.Load() {
		sc.state.reset(in.state, len(in.msgs))
		sc.state.attach(in.msgs)
	}
	hctx := ctx
	var bc *batchContext // the batch's deadline, with no timer unless asked for (deadline.go)
	if in.timeoutMs > 0 {
		bc = newBatchContext(ctx, time.Duration(in.timeoutMs)*time.Millisecond)
		hctx = bc
	}
	res, p := s.run(hctx, in.msgs, msgtrace.Parse(in.traceParent, in.traceState), sc)
	late := bc != nil && bc.Err() != nil
	if bc != nil {
		bc.release()
	}
	<-s.slots
	if late && p == nil {
		// The host has given up on it (its deadline is the same): an
		// answer now could only reach it after its own deadline has
		// said "hung", or a moment before and say otherwise.
		return nil
	}
	out := &resultsOut{res: res, seq: in.seq, sizes: sc.sizes, codes: sc.codes, msgs: in.msgs,
		compact: s.version >= contract.VersionCompactAnswers && p == nil, compactState: s.version >= contract.VersionCompactState}
	if p != nil {
		out.panic, _ = proto.Marshal(p) // valid UTF-8: panicOf
	}
	return out
}

// serviceDesc is the generated service with Batches replaced by one that
// decodes batches straight into Messages (the codec's wireBatch).
func (s *server) serviceDesc() *grpc.ServiceDesc {
	desc := pb.Handler_ServiceDesc
	desc.Streams = slices.Clone(desc.Streams)
	for i := range desc.Streams {
		if desc.Streams[i].StreamName == "Batches" {
			desc.Streams[i].Handler = func(srv any, stream grpc.ServerStream) error {
				return srv.(*server).batches(stream)
			}
		}
	}
	return &desc
}

func (s *server) Close(ctx context.Context, _ *pb.CloseRequest) (resp *pb.CloseResponse, err error) {
	if c, ok := s.h.(Closer); ok {
		defer s.recoverPanic(&err)
		if cerr := c.Close(ctx); cerr != nil {
			return nil, status.Error(codes.Unknown, cerr.Error())
		}
	}
	return &pb.CloseResponse{}, nil
}

// handle runs h over batch: the one place where a Handler is called, for
// the plugin process and for ProcessLocal. A panic comes back as p.
func handle(ctx context.Context, h Handler, batch []*Message, sc *scratch) (res []Result, p *pb.Panic, herr error) {
	w := newBatchWriter(batch, sc)
	if len(batch) > 0 {
		w.state = batch[0].state // the batch's keyed state, nil for none
	}
	defer func() {
		if r := recover(); r != nil {
			p = panicOf(r, w.handlingIndex())
		}
		if sc != nil {
			sc.outputsUsed(w.scratchTaken())
		}
	}()
	herr = h.Process(ctx, w, batch)
	return w.finish(herr), nil, herr
}

func panicOf(r any, index int) *pb.Panic {
	// Valid UTF-8, or protobuf refuses to encode the report (a panic with
	// a []byte value, say) and the host learns nothing of it.
	return &pb.Panic{Index: int32(index), Value: strings.ToValidUTF8(fmt.Sprint(r), "\uFFFD"),
		Stack: strings.ToValidUTF8(string(debug.Stack()), "\uFFFD")}
}

// recoverPanic turns a panic in Init or Close into a crash.
func (s *server) recoverPanic(err *error) {
	if r := recover(); r != nil {
		p := panicOf(r, -1)
		s.crash(p, nil)
		*err = contract.PanicStatus(p)
	}
}

// crash logs a handler's panic with its stack and message, makes the
// process exit soon (a handler that panicked may have broken its own
// state, so the host starts a fresh one) and returns the answer the host
// classifies as a crash.
func (s *server) crash(p *pb.Panic, batch []*Message) {
	attrs := []any{"panic", p.Value}
	if p.Index >= 0 && int(p.Index) < len(batch) {
		attrs = append(attrs, "index", p.Index, "message", batch[p.Index].ID)
	}
	slog.Error("handler panicked; the plugin exits", append(attrs, "stack", p.Stack)...)
	if s.crashed.CompareAndSwap(nil, p) {
		exit := s.exit
		if exit == nil {
			exit = os.Exit
		}
		time.AfterFunc(crashExitDelay, func() { exit(2) })
	}
}

// ProcessLocal runs h over batch in this process, with the semantics of a
// plugin process: results default to ack, a handler error retries the
// whole batch, outputs go only with an ack, and a panic is returned as a
// *PanicError naming the message. It sets each message's Index. It is for
// testing handlers, and for running one in the host when isolation is not
// wanted (Init and Close are the caller's to call; plugin/host's
// ProcessLocal reports a panic as the crash of a plugin process would be).
func ProcessLocal(ctx context.Context, h Handler, batch []*Message) ([]Result, error) {
	for i, m := range batch {
		m.index = i
	}
	// In the host's process, the batch's span (in ctx) is the parent, and
	// its provider the handler span's.
	var tr trace.Tracer
	parent := trace.SpanContextFromContext(ctx)
	if parent.IsValid() {
		tr = trace.SpanFromContext(ctx).TracerProvider().Tracer(msgtrace.ScopeName)
	}
	ctx, span := startHandlerSpan(ctx, tr, parent, nil, len(batch))
	res, p, herr := handle(ctx, h, batch, nil)
	endHandlerSpan(span, batch, res, herr, p)
	if p != nil {
		pe := &PanicError{Value: p.Value, Stack: p.Stack, Index: int(p.Index)}
		if pe.Index >= 0 {
			pe.MessageID = batch[pe.Index].ID
		}
		return nil, pe
	}
	return res, nil
}

// AttachState gives the messages of batch the keyed state a pipeline with
// a state block has (State): entries are the values of their keys, as
// the host sends them with a batch (a key without an entry has no
// value). Call it before ProcessLocal; each message's Result then
// carries its change. It is for testing handlers, and for the host's
// in-process handlers.
func AttachState(batch []*Message, entries []StateEntry) {
	newBatchState(entries, len(batch)).attach(batch)
}

// PanicError is ProcessLocal's error when the handler panicked. In a
// plugin process the same panic ends the process, and the host reports
// it as a crash naming the same message.
type PanicError struct {
	// Value is the panic value, as text.
	Value string
	// Stack is the panicking goroutine's stack.
	Stack string
	// Index is the position in the batch of the message being handled, -1
	// when unknown (a batch handler's panic).
	Index int
	// MessageID is that message's id, "" when unknown.
	MessageID string
}

func (e *PanicError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("handler panicked on message %d (%s): %s", e.Index, e.MessageID, e.Value)
	}
	return "handler panicked: " + e.Value
}
