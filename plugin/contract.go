package plugin

import (
	"context"
	"errors"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/streamrun/streamrun/plugin/internal/pb"
)

// ContractVersion is the version of the host-plugin contract
// (plugin/proto/handler.proto) this package speaks. It is negotiated in
// go-plugin's handshake: a host and a plugin built against different
// versions refuse each other at start with an error naming both.
const ContractVersion = 1

// DefaultMaxMessageSize is the largest gRPC message (a batch, or a batch's
// results) either side accepts unless told otherwise: 64 MiB, well above
// gRPC's 4 MiB default, so a batch of 1000 messages of Pulsar's 5 MiB
// maximum size is the only kind that needs it raised.
const DefaultMaxMessageSize = 64 << 20

// handshake is go-plugin's first check: the host sets the cookie in the
// child's environment and the plugin refuses to run without it, so a
// plugin binary started by hand says what it is instead of hanging.
var handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ContractVersion,
	MagicCookieKey:   "STREAMRUN_PLUGIN_COOKIE",
	MagicCookieValue: "3f0b7c1e-streamrun-handler",
}

// pluginKey names the one plugin a streamrun plugin binary serves.
const pluginKey = "handler"

// envLogLevel carries the host's log level to the plugin, so a plugin does
// not format lines the host would throw away.
const envLogLevel = "STREAMRUN_PLUGIN_LOG_LEVEL"

// pluginSets is the versioned plugin map for go-plugin's negotiation. impl
// is nil on the host side.
func pluginSets(impl pb.HandlerServer) map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{
		ContractVersion: {pluginKey: &grpcPlugin{impl: impl}},
	}
}

// grpcPlugin is the go-plugin glue: it registers the server in the plugin
// and makes the client stub in the host.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl pb.HandlerServer
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.impl == nil {
		return errors.New("no handler to serve")
	}
	if srv, ok := p.impl.(*server); ok {
		s.RegisterService(srv.serviceDesc(), srv)
		return nil
	}
	pb.RegisterHandlerServer(s, p.impl)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &hostConn{HandlerClient: pb.NewHandlerClient(c), conn: c}, nil
}

// hostConn is the host's client: the generated one for Init and Close;
// batches go on the Batches stream opened on conn (stream.go).
type hostConn struct {
	pb.HandlerClient
	conn *grpc.ClientConn
}

// windowSize is the HTTP/2 flow-control window of both sides, per stream
// and per connection: a batch of 1000 messages and its answer cross in one
// go instead of waiting for window updates every 64 KiB (gRPC's default).
// Setting it turns off gRPC's window estimation (BDP), which has nothing to
// estimate on a local socket.
const windowSize = 8 << 20

// The conversions between the wire and the Go API. Byte slices and maps
// are shared, not copied.

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

var outcomeToPB = [...]pb.Outcome{
	OutcomeAck:        pb.Outcome_OUTCOME_ACK,
	OutcomeRetry:      pb.Outcome_OUTCOME_RETRY,
	OutcomeDeadLetter: pb.Outcome_OUTCOME_DEAD_LETTER,
	OutcomeDrop:       pb.Outcome_OUTCOME_DROP,
}

// outcomeFromPB returns false for an outcome this version does not know.
func outcomeFromPB(o pb.Outcome) (Outcome, bool) {
	switch o {
	case pb.Outcome_OUTCOME_ACK:
		return OutcomeAck, true
	case pb.Outcome_OUTCOME_RETRY:
		return OutcomeRetry, true
	case pb.Outcome_OUTCOME_DEAD_LETTER:
		return OutcomeDeadLetter, true
	case pb.Outcome_OUTCOME_DROP:
		return OutcomeDrop, true
	}
	return 0, false
}
