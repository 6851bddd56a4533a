// Package contract holds what both ends of the handler plugin contract
// share: the version, go-plugin's handshake and plugin map, the transport
// limits, and how a handler's panic travels. The SDK (package plugin) and
// the host (package plugin/host) each build their end on it; neither
// imports the other's internals.
package contract

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Version is the newest version of the host-plugin contract
// (plugin/proto/handler.proto) both ends speak. It is negotiated in
// go-plugin's handshake (the host offers every version it speaks, the
// plugin picks the highest it also speaks): a host and a plugin with no
// version in common refuse each other at start with an error naming both.
//
// The versions differ only in how batches travel; the messages are the
// same:
//
//   - VersionGRPCBatches (1): on the gRPC Batches stream, over go-plugin's
//     mTLS connection. Every SDK speaks it (the Python SDK only it).
//   - VersionBatchChannel (2): on the batch channel, a socket pair the
//     host makes and hands the plugin at its start (EnvBatchFD), each
//     Batch and BatchResult one frame (plugin/internal/wire's frame.go);
//     Init and Close stay on gRPC.
//   - VersionCompactAnswers (3): the batch channel, and a BatchResult may
//     answer in its compact form: a byte per message for the common
//     outcomes (acked with no output, or with one output that echoes the
//     input's key, properties and payload or replaces only the payload),
//     full Results only for the rest (handler.proto, BatchResult).
//   - VersionCompactState (4): version 3, and a compact byte may also say
//     that the message's key takes a new value, sent beside it, so that
//     a keyed-state answer (a change of the message's own key, with an
//     ack and an echo) needs no full Result.
//   - VersionCompactWindows (5): version 4, and an incremental window's
//     message (window.mode: incremental) carries the window in a compact
//     binary form instead of JSON with base64 payloads (its first byte
//     says which, docs/contract.md §6, windows); and a window whose
//     watermark passed while messages wait for its add comes as one
//     message that is both its add and its fire (both properties set),
//     answered with the new accumulator as the message's state change
//     and the fire's outputs. The Go SDK speaks it; the Python SDK
//     version 1.
const Version = VersionCompactWindows

// The contract's versions (see Version).
const (
	VersionGRPCBatches    = 1
	VersionBatchChannel   = 2
	VersionCompactAnswers = 3
	VersionCompactState   = 4
	VersionCompactWindows = 5
)

// OnChannel reports whether version v carries batches on the batch
// channel.
func OnChannel(v int) bool { return v >= VersionBatchChannel }

// EnvMaxVersion names the variable of a plugin's environment that caps
// the versions the Go SDK offers: a plugin given 2 speaks version 2 to a
// host that offers 3. For tests and for measuring one version against
// another with one binary; unset, the SDK offers every version it speaks.
const EnvMaxVersion = "STREAMRUN_PLUGIN_MAX_CONTRACT_VERSION"

// EnvBatchFD names, in the plugin's environment, the file descriptor of
// its end of the batch channel. The host sets it, and offers
// VersionBatchChannel, only where it can make the channel (Unix).
const EnvBatchFD = "STREAMRUN_PLUGIN_BATCH_FD"

// DefaultMaxMessageSize is the largest gRPC message (a batch, or a batch's
// results) either side accepts unless told otherwise: 64 MiB, well above
// gRPC's 4 MiB default, so a batch of 1000 messages of Pulsar's 5 MiB
// maximum size is the only kind that needs it raised.
const DefaultMaxMessageSize = 64 << 20

// WindowSize is the HTTP/2 flow-control window of both sides, per stream
// and per connection: a batch of 1000 messages and its answer cross in one
// go instead of waiting for window updates every 64 KiB (gRPC's default).
// Setting it turns off gRPC's window estimation (BDP), which has nothing to
// estimate on a local socket.
const WindowSize = 8 << 20

// PluginKey names the one plugin a streamrun plugin binary serves.
const PluginKey = "handler"

// EnvLogLevel carries the host's log level to the plugin, so a plugin does
// not format lines the host would throw away.
const EnvLogLevel = "STREAMRUN_PLUGIN_LOG_LEVEL"

// Handshake is go-plugin's first check: the host sets the cookie in the
// child's environment and the plugin refuses to run without it, so a
// plugin binary started by hand says what it is instead of hanging.
func Handshake() goplugin.HandshakeConfig {
	return goplugin.HandshakeConfig{
		ProtocolVersion:  Version,
		MagicCookieKey:   "STREAMRUN_PLUGIN_COOKIE",
		MagicCookieValue: "3f0b7c1e-streamrun-handler",
	}
}

// GRPCPlugin is the go-plugin glue. The plugin's end sets Register, which
// registers its service on the server; the host's end sets Dial, which
// makes its client of the connection.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Register func(*grpc.Server) error
	Dial     func(*grpc.ClientConn) any
}

// PluginSets is the versioned plugin map for go-plugin's negotiation: one
// GRPCPlugin for each contract version offered.
func PluginSets(versions map[int]*GRPCPlugin) map[int]goplugin.PluginSet {
	sets := make(map[int]goplugin.PluginSet, len(versions))
	for v, p := range versions {
		sets[v] = goplugin.PluginSet{PluginKey: p}
	}
	return sets
}

func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Register == nil {
		return errors.New("no handler to serve")
	}
	return p.Register(s)
}

func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	if p.Dial == nil {
		return nil, errors.New("no host client")
	}
	return p.Dial(c), nil
}
