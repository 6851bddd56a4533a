package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/internal/contract"
	"github.com/streamrun/streamrun/plugin/internal/pb"
	"github.com/streamrun/streamrun/plugin/internal/wire"
)

// ClientOptions says how the host starts one plugin instance. Only Path is
// required.
type ClientOptions struct {
	// Path of the plugin binary (required).
	Path string
	// Args given to the plugin after its name. Default none.
	Args []string
	// Env is added to the host's environment for the plugin, "KEY=value"
	// each; a key given here wins over the host's. Default none.
	Env []string
	// Name names the plugin in logs and errors. Default: Path's base name.
	Name string
	// Pipeline is the pipeline the instance serves, told to the handler at
	// Init. Default "".
	Pipeline string
	// InstanceID tells this instance from its siblings, in logs and at
	// Init. Default "".
	InstanceID string
	// Logger receives the plugin's logs and output, tagged plugin=Name and
	// instance=InstanceID, and the instance's own events. Default
	// slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds the start: process, handshake and connection (Init
	// is separate). Default 30s.
	StartTimeout time.Duration
	// MaxMessageSize is the largest gRPC message (a batch, or its results)
	// sent or accepted. Default plugin.DefaultMaxMessageSize (64 MiB); the
	// plugin side has the same default (plugin.ServeOptions).
	MaxMessageSize int
	// KeyedState says the pipeline keeps keyed state: the plugin is told
	// at Init, must say it reads and writes it (an SDK from before keyed
	// state does not, and Init fails with ErrInit), and its answers'
	// state changes are checked and kept. Batches carry state when they
	// are StateBatches. Default false: a change in an answer is a wrong
	// answer.
	KeyedState bool
}

// Instance is one running plugin process, seen from the host. Its methods
// are safe for concurrent use; the plugin works on as many batches at once
// as its plugin.ServeOptions.Concurrency allows (default one) and queues the rest.
//
// What a failed call means:
//
//   - errors.Is(err, ErrCrashed): the process is gone (panic, exit, kill,
//     broken connection) and Exited is closed. Retry the batch on a new
//     instance.
//   - errors.Is(err, context.DeadlineExceeded) or context.Canceled: the
//     caller's ctx ended first. The plugin may still be working on the
//     batch; for a hang, Kill the instance and retry elsewhere.
//   - errors.Is(err, ErrBadResponse): the plugin answered wrongly; Kill it.
//   - errors.Is(err, ErrInit): the handler refused its config.
//   - errors.Is(err, ErrClosed): the instance was closed, killed, or has
//     crashed before.
//
// Every Instance must end with Close or Kill, which release its goroutines.
type Instance struct {
	name    string
	log     *slog.Logger
	opts    ClientOptions
	client  *goplugin.Client
	rpc     *hostConn
	batches *batchStream
	proc    *process
	version int // the contract version negotiated

	stopping atomic.Bool
	stopOnce sync.Once

	answers answerArrays
}

// hostConn is the host's client: the generated one for Init and Close;
// batches go on the Batches stream opened on conn (stream.go).
type hostConn struct {
	pb.HandlerClient
	conn *grpc.ClientConn
}

// dial makes the host's client of go-plugin's connection to the plugin.
func dial(c *grpc.ClientConn) any {
	return &hostConn{HandlerClient: pb.NewHandlerClient(c), conn: c}
}

// Start starts a plugin process, checks the handshake (cookie, contract
// version, mTLS) and connects to it. It does not call Init. ctx bounds the
// start, as does StartTimeout.
func Start(ctx context.Context, opts ClientOptions) (*Instance, error) {
	if opts.Path == "" {
		return nil, errors.New("plugin host: ClientOptions.Path is required")
	}
	if opts.Name == "" {
		opts.Name = filepath.Base(opts.Path)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = contract.DefaultMaxMessageSize
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("plugin %s: start: %w", opts.Name, err)
	}
	name := opts.Name
	if opts.InstanceID != "" {
		name += "/" + opts.InstanceID
	}
	log := opts.Logger.With("plugin", opts.Name, "instance", opts.InstanceID)

	proc, err := newProcess(opts.Name, log, exec.Command(opts.Path, opts.Args...))
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", name, err)
	}
	tlsConfig, certEnv, err := clientTLS()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", name, err)
	}
	env := append(append([]string(nil), opts.Env...), contract.EnvLogLevel+"="+lowestLevel(log).String(), certEnv)
	// Contract version 1 always; versions 2 to 5 where the batch channel
	// can be made. The plugin picks.
	versions := map[int]*contract.GRPCPlugin{contract.VersionGRPCBatches: {Dial: dial}}
	channel, childEnd, err := newChannel()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", name, err)
	}
	if channel != nil {
		defer func() { _ = childEnd.Close() }() // closed already once the child started
		proc.cmd.ExtraFiles = []*os.File{childEnd}
		env = append(env, fmt.Sprintf("%s=%d", contract.EnvBatchFD, 3)) // ExtraFiles' first
		versions[contract.VersionBatchChannel] = &contract.GRPCPlugin{Dial: dial}
		versions[contract.VersionCompactAnswers] = &contract.GRPCPlugin{Dial: dial}
		versions[contract.VersionCompactState] = &contract.GRPCPlugin{Dial: dial}
		versions[contract.VersionCompactWindows] = &contract.GRPCPlugin{Dial: dial}
	}
	size := opts.MaxMessageSize
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  contract.Handshake(),
		VersionedPlugins: contract.PluginSets(versions),
		RunnerFunc:       proc.runnerFunc(env),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		TLSConfig:        tlsConfig, // AutoMTLS, done by clientTLS
		StartTimeout:     opts.StartTimeout,
		Logger:           contract.NewHCLog(log),
		SyncStdout:       newLineWriter(log, "stdout"),
		SyncStderr:       newLineWriter(log, "stderr"),
		GRPCDialOptions: []grpc.DialOption{
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(size), grpc.MaxCallSendMsgSize(size),
				grpc.ForceCodecV2(wire.NewCodec())),
			grpc.WithInitialWindowSize(contract.WindowSize), grpc.WithInitialConnWindowSize(contract.WindowSize),
		},
	})
	inst := &Instance{name: name, log: log, opts: opts, client: client, proc: proc}

	type dialed struct {
		rpc *hostConn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		cp, err := client.Client()
		if err != nil {
			done <- dialed{err: err}
			return
		}
		raw, err := cp.Dispense(contract.PluginKey)
		if err != nil {
			done <- dialed{err: err}
			return
		}
		done <- dialed{rpc: raw.(*hostConn)}
	}()
	var d dialed
	select {
	case d = <-done:
	case <-ctx.Done():
		proc.stop("its start was given up: "+ctx.Err().Error(), 0) // makes client.Client give up at once
		<-done
		d.err = ctx.Err()
	}
	if d.err != nil {
		closeChannel(channel)
		inst.Kill()
		return nil, fmt.Errorf("plugin %s: start: %w", name, proc.startError(d.err))
	}
	inst.rpc = d.rpc
	inst.version = client.NegotiatedVersion()
	c, err := inst.carrier(channel)
	if err != nil {
		inst.Kill()
		return nil, fmt.Errorf("plugin %s: start: open the batch stream: %w", name, err)
	}
	inst.batches = newBatchStream(c, opts.MaxMessageSize)
	log.Debug("plugin started", "pid", proc.pid, "contract", inst.version)
	return inst, nil
}

// carrier is how the instance's batches travel, as the contract version
// negotiated says: the batch channel (versions 2 to 4), else the gRPC
// stream.
func (i *Instance) carrier(channel net.Conn) (carrier, error) {
	if contract.OnChannel(i.version) && channel != nil {
		return newChannelCarrier(channel, i.opts.MaxMessageSize, i.version >= contract.VersionCompactAnswers,
			i.version >= contract.VersionCompactState), nil
	}
	closeChannel(channel)
	return openGRPCCarrier(i.rpc.conn)
}

func closeChannel(c net.Conn) {
	if c != nil {
		_ = c.Close()
	}
}

// Name is "Name" or "Name/InstanceID" from the options.
func (i *Instance) Name() string { return i.name }

// ContractVersion is the contract version the instance negotiated.
func (i *Instance) ContractVersion() int { return i.version }

// CompactWindows reports whether the instance speaks contract version 5:
// an incremental window's message in the compact form, and a window's
// add and fire in one message (docs/contract.md §6, windows).
func (i *Instance) CompactWindows() bool { return i.version >= contract.VersionCompactWindows }

// Pid is the plugin process's id.
func (i *Instance) Pid() int { return i.proc.pid }

// Exited is closed once the plugin process has exited and its output has
// been logged.
func (i *Instance) Exited() <-chan struct{} { return i.proc.exited }

// Alive reports whether the plugin process is still running.
func (i *Instance) Alive() bool {
	select {
	case <-i.proc.exited:
		return false
	default:
		return true
	}
}

// ExitStatus says how the process ended ("exit status 2", "signal:
// killed"); "" while it runs.
func (i *Instance) ExitStatus() string {
	if i.Alive() {
		return ""
	}
	return exitStatus(i.proc.exitErr)
}

// Init hands the handler the pipeline's config (JSON) before its first
// batch. A handler that refuses it gives an error matching ErrInit.
func (i *Instance) Init(ctx context.Context, config []byte) error {
	if i.stopping.Load() {
		return ErrClosed
	}
	resp, err := i.rpc.Init(ctx, &pb.InitRequest{
		Config:          config,
		Pipeline:        i.opts.Pipeline,
		InstanceId:      i.opts.InstanceID,
		ContractVersion: uint32(i.version),
		KeyedState:      i.opts.KeyedState,
	})
	if err == nil {
		if i.opts.KeyedState && !resp.GetKeyedState() {
			return fmt.Errorf("plugin %s: %w: the pipeline keeps keyed state and the plugin does not say it reads and writes it "+
				"(built with an SDK from before keyed state?)", i.name, ErrInit)
		}
		return nil
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.InvalidArgument, codes.FailedPrecondition:
			return fmt.Errorf("plugin %s: %w: %s", i.name, ErrInit, st.Message())
		}
	}
	return i.callError(ctx, "init", nil, err)
}

// Process sends the plugin a batch and returns one Result per message, in
// the batch's order. It checks the answer: a plugin that answers wrongly
// gets an error naming it and the message (ErrBadResponse), never a panic.
// A handler that failed the whole batch comes back as every message
// retried, with the handler's error as reason.
func (i *Instance) Process(ctx context.Context, batch []*plugin.Message) ([]plugin.Result, error) {
	return i.ProcessBatch(ctx, Messages(batch))
}

// ProcessBatch is Process for a batch in the caller's own form: its
// messages are encoded for the plugin straight from it (see Batch).
func (i *Instance) ProcessBatch(ctx context.Context, batch Batch) ([]plugin.Result, error) {
	if i.stopping.Load() {
		return nil, ErrClosed
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	resp, err := i.batches.process(ctx, batch)
	if err != nil {
		return nil, i.callError(ctx, "process", batch, err)
	}
	res, err := i.decodeResults(batch, resp)
	i.batches.recycle(resp)
	return res, err
}

// Recycle takes back the results of a Process call once the caller is
// done with them: nothing refers to them or to their outputs any more
// (the strings, payloads and maps those point to may live on). Their
// arrays then hold the answer to a later batch, instead of new ones
// being made for every batch. Calling it is optional; results not
// recycled are garbage as usual.
func (i *Instance) Recycle(res []plugin.Result) { i.answers.recycle(res) }

// Close calls the handler's Close, then stops the process gracefully: it
// gets up to 2 seconds (go-plugin's grace) to exit before it is killed.
// ctx bounds the handler's Close. Close waits for the exit.
func (i *Instance) Close(ctx context.Context) error {
	var err error
	if i.stopping.CompareAndSwap(false, true) {
		i.proc.expected.Store(true)
		// Ended first: go-plugin's graceful stop of the plugin waits for
		// its open streams.
		i.closeStream()
		if i.Alive() {
			if _, cerr := i.rpc.Close(ctx, &pb.CloseRequest{}); cerr != nil {
				err = fmt.Errorf("plugin %s: close: %s", i.name, status.Convert(cerr).Message())
			}
		}
	}
	i.stopOnce.Do(i.client.Kill) // returns once the process has been reaped
	return err
}

// Kill ends the plugin process at once (SIGKILL) and waits for it. It is
// safe to call more than once and after Close.
func (i *Instance) Kill() {
	i.stopping.Store(true)
	i.proc.expected.Store(true)
	_ = i.proc.Kill(context.Background())
	i.closeStream()
	i.stopOnce.Do(i.client.Kill)
	if i.proc.getPid() != 0 {
		<-i.proc.exited
	}
}

// closeStream ends the Batches stream, if open, and waits for its reader.
func (i *Instance) closeStream() {
	if i.batches != nil {
		i.batches.close()
	}
}

// stopGrace is how long a plugin whose connection broke is given to be
// seen dead by itself before the host kills it (and says it did).
const stopGrace = 50 * time.Millisecond

// crashWait bounds the wait for a crashed process's exit status.
const crashWait = 5 * time.Second

// callError classifies a failed call (see Instance).
func (i *Instance) callError(ctx context.Context, op string, batch Batch, err error) error {
	if i.stopping.Load() {
		return fmt.Errorf("plugin %s: %s: %w", i.name, op, ErrClosed)
	}
	st := status.Convert(err)
	crash := &CrashError{Plugin: i.name, Pid: i.proc.pid, Index: -1}
	var p *pb.Panic
	if st.Code() == codes.Aborted {
		p = contract.PanicDetail(st)
	}
	switch {
	case p != nil:
		crash.Panic, crash.Stack = p.Value, p.Stack
		if batch != nil && p.Index >= 0 && int(p.Index) < batch.Len() {
			crash.Index, crash.MessageID = int(p.Index), messageID(batch, int(p.Index))
		}
	case ctx.Err() != nil && i.Alive():
		return fmt.Errorf("plugin %s: %s: %w", i.name, op, ctx.Err())
	case st.Code() == codes.DeadlineExceeded && i.Alive():
		// The plugin's end saw the deadline a moment before ours did.
		return fmt.Errorf("plugin %s: %s: %w", i.name, op, context.DeadlineExceeded)
	case st.Code() == codes.ResourceExhausted:
		return fmt.Errorf("plugin %s: %s: %s (ClientOptions.MaxMessageSize is %d bytes)",
			i.name, op, st.Message(), i.opts.MaxMessageSize)
	case !i.Alive() || st.Code() == codes.Unavailable || st.Code() == codes.Canceled:
		crash.Err = err
	default:
		return fmt.Errorf("plugin %s: %s: %w", i.name, op, err)
	}
	// The process is gone or must go: kill it, and wait (briefly) to learn
	// how it ended.
	i.log.Warn("plugin crashed", "op", op, "error", crash.cause())
	i.stopping.Store(true)
	// A plugin that reported a panic waits to be killed; one whose
	// connection broke is most likely dying as it is.
	grace := stopGrace
	if crash.Panic != "" {
		grace = 0
	}
	i.proc.stop("it crashed: "+crash.cause(), grace)
	select {
	case <-i.proc.exited:
		crash.Exit = exitStatus(i.proc.exitErr)
	case <-time.After(crashWait):
	}
	i.closeStream()
	i.stopOnce.Do(i.client.Kill) // release go-plugin's side of it
	return crash
}

// decodeResults checks and converts the plugin's answer to a batch.
func (i *Instance) decodeResults(batch Batch, resp *resultsIn) ([]plugin.Result, error) {
	n := batch.Len()
	if resp.codes != nil {
		return i.decodeCompact(batch, resp)
	}
	if len(resp.res) != n {
		return nil, i.badAnswer(batch, -1, "%d results for a batch of %d messages", len(resp.res), n)
	}
	out := i.answers.get(n, false, false).res
	// A plugin answers in the batch's order: then no index can repeat,
	// and nothing need be remembered to tell.
	var seen []bool
	var f Fields // one for the answer: it escapes, through the interface
	for j := range resp.res {
		r := &resp.res[j]
		if int64(r.index) >= int64(n) {
			return nil, i.badAnswer(batch, -1, "result %d is for message index %d, out of range for a batch of %d messages",
				j, r.index, n)
		}
		idx := int(r.index)
		if idx != j && seen == nil {
			seen = make([]bool, n)
			for k := range j {
				seen[k] = true // results 0..j-1 were for messages 0..j-1
			}
		}
		if seen != nil {
			if seen[idx] {
				return nil, i.badAnswer(batch, idx, "more than one result")
			}
			seen[idx] = true
		}
		res, err := i.result(batch, r, &f)
		if err != nil {
			return nil, err
		}
		out[idx] = res
	}
	return out, nil
}

// badAnswer is the error of a wrong answer, about the message at idx
// (-1: the answer as a whole).
func (i *Instance) badAnswer(batch Batch, idx int, format string, args ...any) error {
	e := &ResponseError{Plugin: i.name, Index: idx, Problem: fmt.Sprintf(format, args...)}
	if idx >= 0 {
		e.MessageID = messageID(batch, idx)
	}
	return e
}

// result checks and converts one full result, whose index is in range;
// f is room for a message's fields, the caller's for the whole answer.
func (i *Instance) result(batch Batch, r *wireResult, f *Fields) (plugin.Result, error) {
	idx := int(r.index)
	o, ok := outcomeFromPB(pb.Outcome(r.outcome))
	if !ok {
		return plugin.Result{}, i.badAnswer(batch, idx, "unknown outcome %d", r.outcome)
	}
	if r.delayMs < 0 {
		return plugin.Result{}, i.badAnswer(batch, idx, "negative retry delay %dms", r.delayMs)
	}
	res := plugin.Result{Outcome: o, Reason: r.reason}
	if o == plugin.OutcomeRetry {
		res.RetryDelay = time.Duration(r.delayMs) * time.Millisecond
	}
	if o == plugin.OutcomeAck && len(r.outputs) > 0 {
		for k := range r.outputs {
			if r.outputs[k].Topic == "" {
				return plugin.Result{}, i.badAnswer(batch, idx, "output %d has no topic", k)
			}
		}
		res.Outputs = r.outputs // decoded into one array for the whole batch
	}
	if r.state != nil {
		if !i.opts.KeyedState {
			return plugin.Result{}, i.badAnswer(batch, idx, "a state change, and the pipeline keeps no state")
		}
		if o == plugin.OutcomeAck { // ignored with any other outcome
			if err := checkStateChange(batch, idx, r.state, f); err != "" {
				return plugin.Result{}, i.badAnswer(batch, idx, "%s", err)
			}
			res.State = r.state
		}
	}
	return res, nil
}

// checkStateChange says what is wrong with c, the change of message idx
// of batch, "" when nothing is. f is room for the message's fields: one
// made for each change was most of the host's cost of reading a keyed
// state answer (docs/benchmarks/keyed-state.md).
func checkStateChange(batch Batch, idx int, c *plugin.StateChange, f *Fields) string {
	batch.Fields(idx, f)
	switch {
	case f.Key == "":
		return "a state change for a message without a key"
	case c.Key != f.Key:
		return fmt.Sprintf("a state change of key %q, not the message's key %q", c.Key, f.Key)
	case c.Delete && len(c.Value) > 0:
		return "a state change that deletes and has a value"
	case !c.Delete && len(c.Value) == 0:
		return "a state change with an empty value that does not delete"
	case len(c.Value) > plugin.MaxStateValueSize:
		return fmt.Sprintf("a state value of %d bytes, over the %d-byte limit", len(c.Value), plugin.MaxStateValueSize)
	}
	return ""
}

// decodeCompact checks and converts an answer in contract version 3's
// compact form (handler.proto, BatchResult): a byte a message, full
// results, in the batch's order, for the messages whose byte says so. An
// echoed output is made here from the host's own message, so its key,
// properties and payload are the very ones the host sent; so is the key
// of a version 4 state change.
func (i *Instance) decodeCompact(batch Batch, resp *resultsIn) ([]plugin.Result, error) {
	n := batch.Len()
	codes := resp.codes
	if len(codes) != n {
		return nil, i.badAnswer(batch, -1, "%d outcomes for a batch of %d messages", len(codes), n)
	}
	arrays := i.answers.get(n, true, len(resp.states) > 0)
	out, echoes := arrays.res, arrays.echoes // echoes: one array for the batch's echoed outputs
	full, payloads, states := 0, resp.payloads, resp.states
	var m Fields // one for the loop: it escapes, through the interface
	for j, c := range codes {
		var change *plugin.StateChange
		if c&wire.CompactState != 0 && c != wire.CompactFull|wire.CompactState && resp.compactState {
			// Contract version 4: the message's own key takes the next
			// value, checked as a full result's change is.
			if !i.opts.KeyedState {
				return nil, i.badAnswer(batch, j, "a state change, and the pipeline keeps no state")
			}
			if len(states) == 0 {
				return nil, i.badAnswer(batch, j, "a state value is missing")
			}
			batch.Fields(j, &m)
			change = &arrays.changes[j]
			*change = plugin.StateChange{Key: m.Key, Value: states[0]}
			states = states[1:]
			if err := checkStateChange(batch, j, change, &m); err != "" {
				return nil, i.badAnswer(batch, j, "%s", err)
			}
			c &^= wire.CompactState
		}
		switch c {
		case wire.CompactAck:
			out[j] = plugin.Result{Outcome: plugin.OutcomeAck, State: change}
		case wire.CompactEcho, wire.CompactEchoPayload:
			if resp.echoTopic == "" {
				return nil, i.badAnswer(batch, j, "an echoed output, and no echo topic")
			}
			if change == nil {
				batch.Fields(j, &m)
			}
			o := &echoes[j]
			*o = plugin.Output{Topic: resp.echoTopic, Key: m.Key, Properties: m.Properties, Payload: m.Payload}
			if m.OrderingKey != "" {
				o.OrderingKey = []byte(m.OrderingKey) // the output's own: the caller keeps it
			}
			if c == wire.CompactEchoPayload {
				if len(payloads) == 0 {
					return nil, i.badAnswer(batch, j, "an output's payload is missing")
				}
				o.Payload, payloads = payloads[0], payloads[1:]
			}
			out[j] = plugin.Result{Outcome: plugin.OutcomeAck, Outputs: echoes[j : j+1 : j+1], State: change}
		case wire.CompactFull:
			full++
		default:
			return nil, i.badAnswer(batch, j, "unknown compact outcome %d", c)
		}
	}
	if len(payloads) > 0 {
		return nil, i.badAnswer(batch, -1, "%d payloads more than the outcomes ask for", len(payloads))
	}
	if len(states) > 0 {
		return nil, i.badAnswer(batch, -1, "%d state values more than the outcomes ask for", len(states))
	}
	if len(resp.res) != full {
		return nil, i.badAnswer(batch, -1, "%d full results where the outcomes ask for %d", len(resp.res), full)
	}
	prev := -1
	for j := range resp.res {
		r := &resp.res[j]
		idx := int64(r.index)
		if idx >= int64(n) || idx <= int64(prev) || codes[idx] != wire.CompactFull {
			return nil, i.badAnswer(batch, -1, "full result %d is for message index %d, which the outcomes do not ask for after %d",
				j, r.index, prev)
		}
		prev = int(idx)
		res, err := i.result(batch, r, &m)
		if err != nil {
			return nil, err
		}
		out[idx] = res
	}
	return out, nil
}
