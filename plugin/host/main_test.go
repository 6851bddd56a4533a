package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/streamrun/streamrun/internal/testkit"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// The test binary plays several parts, chosen by roleEnv: the tests
// (unset), a plugin built on the SDK ("sdk"), a plugin that answers
// wrongly ("raw"), a plugin of another contract version ("future"), a
// host that starts a plugin and waits to be killed ("host", for the
// orphan test), BenchmarkWakeup's other process ("pong"), and plugins
// that die before their handshake: with a Python traceback ("nosdk") or
// a Go panic ("panicstart").
const roleEnv = "STREAMRUN_PLUGIN_TEST_ROLE"

// bin holds the example plugins, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "sdk":
		// STREAMRUN_PLUGIN_TEST_CPUPROFILE=file profiles the plugin's side
		// of the benchmarks, in file.pid: until Serve returns, which it
		// does when the host closes the instance (BenchmarkProcess does;
		// a kill leaves the file empty).
		if path := os.Getenv("STREAMRUN_PLUGIN_TEST_CPUPROFILE"); path != "" {
			f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
			if err == nil && pprof.StartCPUProfile(f) == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
		}
		n, _ := strconv.Atoi(os.Getenv("STREAMRUN_PLUGIN_TEST_CONCURRENCY"))
		plugin.ServeWithOptions(&testHandler{}, plugin.ServeOptions{Concurrency: n})
		return
	case "raw":
		// As a plugin of another language that speaks version 1 only.
		serveRaw(contract.VersionGRPCBatches)
		return
	case "future":
		serveRaw(contract.Version + 1)
		return
	case "host":
		childHost()
		return
	case "pong":
		pongMain() // BenchmarkWakeup's other process
		return
	case "nosdk":
		// As a Python script run by an interpreter without the SDK.
		fmt.Fprint(os.Stderr, noSDKTraceback+"\n")
		os.Exit(1)
	case "panicstart":
		panic("no config file at /etc/handler.json")
	}

	slog.SetDefault(slog.New(slog.DiscardHandler))
	dir, err := testkit.BuildPlugins()
	if err != nil {
		log.Fatal(err)
	}
	bin = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// noSDKTraceback is what Python writes when a handler script's
// interpreter lacks the SDK.
const noSDKTraceback = `Traceback (most recent call last):
  File "/srv/handlers/upper.py", line 4, in <module>
    import streamrun
ModuleNotFoundError: No module named 'streamrun'`

// childHost starts the uppercase plugin, prints its pid and waits to be
// killed.
func childHost() {
	inst, err := Start(context.Background(), ClientOptions{Path: os.Getenv("STREAMRUN_TEST_PLUGIN")})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(inst.Pid())
	select {}
}

// testHandler is the SDK plugin the test binary serves; its Init config
// picks what it does.
type testHandler struct {
	mode   string
	inside atomic.Int32 // Process calls running now (mode "meet")
	met    atomic.Bool  // two calls were inside at once (mode "meet")
}

func (h *testHandler) Init(_ context.Context, info plugin.Info) error {
	var cfg struct{ Mode string }
	if err := json.Unmarshal(info.Config, &cfg); err != nil {
		return err
	}
	h.mode = cfg.Mode
	slog.Info("test handler ready", "mode", h.mode, "pipeline", info.Pipeline, "instance", info.InstanceID)
	return nil
}

// seen is what the plugin saw of a message, sent back for comparison.
type seen struct {
	ID, Topic, Key, TraceParent, TraceState string
	OrderingKey                             []byte
	Properties                              map[string]string
	Payload                                 []byte
	PublishTime, EventTime                  time.Time
	RedeliveryCount                         uint32
	Index                                   int
}

func (h *testHandler) Process(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
	switch h.mode {
	case "meet":
		// Wait, up to 1 s, for a second call to be inside Process too: each
		// message says whether the calls met.
		h.inside.Add(1)
		defer h.inside.Add(-1)
		met := "alone"
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			// Sticky: the other call may have met us and left between two
			// of our looks.
			if h.inside.Load() >= 2 || h.met.Load() {
				h.met.Store(true)
				met = "met"
				break
			}
		}
		for _, m := range batch {
			w.Output(m, plugin.Output{Topic: "out", Payload: []byte(met)})
		}
	case "echo":
		for _, m := range batch {
			w.Output(m, plugin.Output{Topic: "out", Key: m.Key, Payload: m.Payload})
		}
	case "fields":
		for _, m := range batch {
			b, _ := json.Marshal(seen{m.ID, m.Topic, m.Key, m.TraceParent, m.TraceState, m.OrderingKey,
				m.Properties, m.Payload, m.PublishTime, m.EventTime, m.RedeliveryCount, m.Index()})
			w.Output(m, plugin.Output{Topic: "seen", Key: m.Key, OrderingKey: m.OrderingKey,
				Properties: map[string]string{"p": "q"}, Payload: b, EventTime: m.EventTime})
		}
	case "outcomes":
		for _, m := range batch {
			switch string(m.Payload) {
			case "retry":
				w.Retry(m, 0, "not now")
			case "retry-later":
				w.Retry(m, 1500*time.Millisecond, "later")
			case "dlq":
				w.DeadLetter(m, "poison")
			case "drop":
				w.Drop(m, "filtered")
			case "output-then-retry":
				w.Output(m, plugin.Output{Topic: "out", Payload: m.Payload})
				w.Retry(m, 0, "changed my mind")
			case "retry-then-ack":
				w.Retry(m, 0, "")
				w.Output(m, plugin.Output{Topic: "out", Payload: m.Payload})
				w.Ack(m)
			}
		}
	case "fail":
		w.Output(batch[0], plugin.Output{Topic: "out", Payload: []byte("discarded")})
		return errors.New("database down")
	case "misuse":
		w.Ack(&plugin.Message{ID: "9:9:-1:-1"})
	case "badpanic":
		panic(string([]byte{'b', 0xff, 'd'})) // not UTF-8
	case "gopanic":
		go func() { panic("in a goroutine of the handler") }()
		<-ctx.Done()
	case "print":
		fmt.Println("hello on stdout")
		fmt.Fprintln(os.Stderr, "hello on stderr")
		log.Printf("hello from the log package")
		slog.Warn("hello structured", "n", 42, "batch", len(batch))
	}
	return nil
}

func (h *testHandler) Close(context.Context) error {
	slog.Info("test handler closed", "mode", h.mode)
	return nil
}

// rawServer plays a plugin written on the generated code, which answers
// wrongly as its Init config says.
type rawServer struct {
	pb.UnimplementedHandlerServer
	mode atomic.Pointer[string] // set by Init, read by Batches
}

func (s *rawServer) Init(_ context.Context, req *pb.InitRequest) (*pb.InitResponse, error) {
	var cfg struct{ Mode string }
	_ = json.Unmarshal(req.Config, &cfg)
	s.mode.Store(&cfg.Mode)
	return &pb.InitResponse{ContractVersion: contract.VersionGRPCBatches, KeyedState: req.KeyedState}, nil
}

func (s *rawServer) Batches(stream pb.Handler_BatchesServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		res := s.answer(req)
		res.Seq = req.Seq
		if err := stream.Send(res); err != nil {
			return err
		}
	}
}

// answer is the raw plugin's answer to a batch, wrong as its mode says.
func (s *rawServer) answer(req *pb.Batch) *pb.BatchResult {
	res := &pb.BatchResult{}
	for i := range req.Messages {
		res.Results = append(res.Results, &pb.Result{Index: uint32(i), Outcome: pb.Outcome_OUTCOME_ACK})
	}
	mode := ""
	if m := s.mode.Load(); m != nil {
		mode = *m
	}
	switch mode {
	case "short":
		res.Results = res.Results[:len(res.Results)-1]
	case "outcome":
		res.Results[1].Outcome = pb.Outcome(7)
	case "unspecified":
		res.Results[1].Outcome = pb.Outcome_OUTCOME_UNSPECIFIED
	case "index":
		res.Results[1].Index = 99
	case "dup":
		res.Results[1].Index = 0
	case "notopic":
		res.Results[1].Outputs = []*pb.Output{{Payload: []byte("x")}}
	case "delay":
		res.Results[1].Outcome = pb.Outcome_OUTCOME_RETRY
		res.Results[1].RetryDelayMs = -5
	case "statekey": // a change to a key the batch's message 1 does not have
		res.Results[1].State = &pb.StateChange{Key: []byte("k0"), Value: []byte("1")}
	case "statebig":
		res.Results[1].State = &pb.StateChange{Key: req.Messages[1].Key, Value: make([]byte, plugin.MaxStateValueSize+1)}
	case "statedelete": // deletes and has a value
		res.Results[1].State = &pb.StateChange{Key: req.Messages[1].Key, Value: []byte("1"), Delete: true}
	case "stateempty": // an empty value that does not delete
		res.Results[1].State = &pb.StateChange{Key: req.Messages[1].Key}
	}
	return res
}

// serveRaw serves rawServer, on the generated code and its protobuf
// codec only, as contract version v.
func serveRaw(v int) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: contract.Handshake(),
		VersionedPlugins: contract.PluginSets(map[int]*contract.GRPCPlugin{v: {
			Register: func(s *grpc.Server) error { pb.RegisterHandlerServer(s, &rawServer{}); return nil },
		}}),
		GRPCServer: goplugin.DefaultGRPCServer,
	})
}

// selfPlugin is ClientOptions for the test binary in role.
func selfPlugin(t testing.TB, role string, l *slog.Logger) ClientOptions {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ClientOptions{Path: exe, Name: "test-" + role, Env: []string{roleEnv + "=" + role}, Logger: l}
}

// example is the path of a built example plugin.
func example(name string) string { return filepath.Join(bin, name) }

// start starts a plugin, inits it with config, and kills it at cleanup.
func start(t testing.TB, opts ClientOptions, config string) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(inst.Kill)
	if err := inst.Init(ctx, []byte(config)); err != nil {
		t.Fatalf("init: %v", err)
	}
	return inst
}

// msgs makes a batch with the given payloads.
func msgs(payloads ...string) []*plugin.Message {
	out := make([]*plugin.Message, len(payloads))
	for i, p := range payloads {
		out[i] = &plugin.Message{
			ID:          fmt.Sprintf("7:%d:-1:-1", i),
			Topic:       "persistent://public/default/in",
			Key:         fmt.Sprintf("k%d", i),
			Payload:     []byte(p),
			PublishTime: time.UnixMilli(1_700_000_000_000 + int64(i)),
		}
	}
	return out
}

// newLogs returns a logger whose records l keeps for the test to wait on.
func newLogs() (l *testkit.Records, logger *slog.Logger) {
	l = &testkit.Records{}
	return l, slog.New(l.Handler(nil))
}
