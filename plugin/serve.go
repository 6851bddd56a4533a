package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// ServeOptions tunes Serve. The zero value is what Serve uses.
type ServeOptions struct {
	// MaxMessageSize is the largest gRPC message the plugin accepts or
	// sends. Default DefaultMaxMessageSize (64 MiB); it should match the
	// host's ClientOptions.MaxMessageSize.
	MaxMessageSize int
	// Logger, if set, becomes slog's default logger in the plugin. Default:
	// JSON lines on the process's stderr at the level the host logs at,
	// which the host logs again as its own records, tagged with the plugin.
	// A Logger that writes elsewhere keeps its records from the host.
	Logger *slog.Logger
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
	serve(&server{h: h}, opts)
}

// serve serves any implementation of the contract; tests use it to play a
// plugin that answers wrongly.
func serve(impl pb.HandlerServer, opts ServeOptions) {
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.Logger == nil {
		// The real stderr, before go-plugin swaps os.Stderr for its stream.
		var level slog.Level
		if level.UnmarshalText([]byte(os.Getenv(envLogLevel))) != nil {
			level = slog.LevelInfo
		}
		opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	slog.SetDefault(opts.Logger)
	size := opts.MaxMessageSize
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: pluginSets(impl),
		Logger:           newHCLog(opts.Logger),
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(o, grpc.MaxRecvMsgSize(size), grpc.MaxSendMsgSize(size))...)
		},
	})
}

// crashExitDelay is how long a plugin whose handler panicked lives on, so
// that its answer telling the host of the panic reaches the host. The host
// kills it as soon as it reads that answer, so this only matters if the
// host does not.
const crashExitDelay = time.Second

// server is the plugin's side of the contract around a Handler.
type server struct {
	pb.UnimplementedHandlerServer
	h Handler

	// mu makes Process calls run one at a time: a host that gave up on a
	// batch (deadline) may send the next while the handler still works.
	mu      sync.Mutex
	crashed atomic.Pointer[pb.Panic] // set once the handler panicked
}

func (s *server) Init(ctx context.Context, req *pb.InitRequest) (resp *pb.InitResponse, err error) {
	if req.ContractVersion != ContractVersion {
		return nil, status.Errorf(codes.FailedPrecondition,
			"the host speaks contract version %d, this plugin speaks %d", req.ContractVersion, ContractVersion)
	}
	if in, ok := s.h.(Initializer); ok {
		defer s.recoverPanic(nil, &err)
		info := Info{Pipeline: req.Pipeline, InstanceID: req.InstanceId, Config: req.Config}
		if ierr := in.Init(ctx, info); ierr != nil {
			return nil, status.Error(codes.InvalidArgument, ierr.Error())
		}
	}
	return &pb.InitResponse{ContractVersion: ContractVersion}, nil
}

func (s *server) Process(ctx context.Context, req *pb.Batch) (resp *pb.BatchResult, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.crashed.Load(); p != nil {
		return nil, panicStatus(p)
	}
	batch := messagesFromPB(req.Messages)
	w := newBatchWriter(batch)
	defer s.recoverPanic(w, &err)
	herr := s.h.Process(ctx, w, batch)
	if herr != nil {
		slog.Warn("handler failed the batch; every message will be retried",
			"messages", len(batch), "error", herr)
	}
	return resultsToPB(w.finish(herr)), nil
}

func (s *server) Close(ctx context.Context, _ *pb.CloseRequest) (resp *pb.CloseResponse, err error) {
	if c, ok := s.h.(Closer); ok {
		defer s.recoverPanic(nil, &err)
		if cerr := c.Close(ctx); cerr != nil {
			return nil, status.Error(codes.Unknown, cerr.Error())
		}
	}
	return &pb.CloseResponse{}, nil
}

// recoverPanic turns a handler panic into the answer the host classifies as
// a crash, logs it with the stack and the message, and makes the process
// exit soon after: a handler that panicked may have broken its own state,
// so the host starts a fresh one.
func (s *server) recoverPanic(w *batchWriter, err *error) {
	r := recover()
	if r == nil {
		return
	}
	p := &pb.Panic{Index: -1, Value: fmt.Sprint(r), Stack: string(debug.Stack())}
	attrs := []any{"panic", p.Value}
	if w != nil {
		if i := w.handlingIndex(); i >= 0 {
			p.Index = int32(i)
			attrs = append(attrs, "index", i, "message", w.batch[i].ID)
		}
	}
	slog.Error("handler panicked; the plugin exits", append(attrs, "stack", p.Stack)...)
	if s.crashed.CompareAndSwap(nil, p) {
		time.AfterFunc(crashExitDelay, func() { os.Exit(2) })
	}
	*err = panicStatus(p)
}

func panicStatus(p *pb.Panic) error {
	st := status.New(codes.Aborted, "handler panicked: "+p.Value)
	if d, err := st.WithDetails(p); err == nil {
		st = d
	}
	return st.Err()
}
