package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/streamrun/streamrun/pipelines"
)

// The SDK cannot answer a batch with a result missing or one too many:
// its ResultWriter holds exactly one result per message (silence is an
// ack, the last outcome set wins). A handler written on the generated
// code, or by hand in another language, can; rawHandler plays one, on the
// contract's version 1 (the gRPC Batches stream) with the protobuf
// encoded by hand, since the generated code is internal to package
// plugin. It echoes each message to its config's "output", except:
//
//	missing:...  no result for this message
//	twice:...    two results for this message
const rawRole = "rawhandler"

// rawSelf is the handler config of a pipeline whose plugin is this test
// binary serving rawHandler.
func rawSelf(output string) pipelines.Handler {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return pipelines.Handler{
		Plugin: exe,
		Env:    map[string]string{roleEnv: rawRole},
		Config: map[string]any{"output": output},
	}
}

// The contract's handshake and service, as a plugin in another language
// reads them in plugin/proto/handler.proto and docs/contract.md.
const (
	rawCookieKey   = "STREAMRUN_PLUGIN_COOKIE"
	rawCookieValue = "3f0b7c1e-streamrun-handler"
	rawService     = "streamrun.plugin.v1.Handler"
)

// serveRawHandler serves rawHandler until the host stops it.
func serveRawHandler() {
	h := &rawHandler{}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  goplugin.HandshakeConfig{ProtocolVersion: 1, MagicCookieKey: rawCookieKey, MagicCookieValue: rawCookieValue},
		VersionedPlugins: map[int]goplugin.PluginSet{1: {"handler": rawPlugin{h: h}}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.ForceServerCodec(rawCodec{}))...)
		},
	})
}

type rawPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	h *rawHandler
}

func (p rawPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: rawService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Init", Handler: p.h.init},
			{MethodName: "Close", Handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
				return []byte{}, nil
			}},
		},
		Streams: []grpc.StreamDesc{{StreamName: "Batches", Handler: p.h.batches, ServerStreams: true, ClientStreams: true}},
	}, p.h)
	return nil
}

func (rawPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("a plugin only")
}

// rawCodec hands the messages over as their bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case *[]byte:
		return *b, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

type rawHandler struct {
	output string
}

// init reads InitRequest.config (1) and answers InitResponse with
// contract_version (1) 1.
func (h *rawHandler) init(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var req []byte
	if err := dec(&req); err != nil {
		return nil, err
	}
	for _, f := range rawFields(req) {
		if f.num == 1 {
			var cfg struct{ Output string }
			if err := json.Unmarshal(f.body, &cfg); err != nil {
				return nil, err
			}
			h.output = cfg.Output
		}
	}
	return protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), nil
}

func (h *rawHandler) batches(_ any, stream grpc.ServerStream) error {
	for {
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return nil
		}
		if err := stream.SendMsg(h.answer(req)); err != nil {
			return err
		}
	}
}

// answer encodes the BatchResult to a Batch: results (1) and seq (2).
func (h *rawHandler) answer(req []byte) []byte {
	var out []byte
	var seq uint64
	i := 0
	for _, f := range rawFields(req) {
		switch f.num {
		case 2: // seq
			seq = f.v
		case 1: // a message; its payload is field 6
			var payload []byte
			for _, mf := range rawFields(f.body) {
				if mf.num == 6 {
					payload = mf.body
				}
			}
			res := h.result(i, payload)
			switch p := string(payload); {
			case strings.HasPrefix(p, "missing:"):
			case strings.HasPrefix(p, "twice:"):
				out = protowire.AppendBytes(protowire.AppendTag(out, 1, protowire.BytesType), res)
				out = protowire.AppendBytes(protowire.AppendTag(out, 1, protowire.BytesType), res)
			default:
				out = protowire.AppendBytes(protowire.AppendTag(out, 1, protowire.BytesType), res)
			}
			i++
		}
	}
	return protowire.AppendVarint(protowire.AppendTag(out, 2, protowire.VarintType), seq)
}

// result is an ack of message i with its payload as output: Result's
// index (1), outcome (2) and outputs (5), Output's topic (1) and payload (5).
func (h *rawHandler) result(i int, payload []byte) []byte {
	var o []byte
	o = protowire.AppendString(protowire.AppendTag(o, 1, protowire.BytesType), h.output)
	o = protowire.AppendBytes(protowire.AppendTag(o, 5, protowire.BytesType), payload)
	var r []byte
	r = protowire.AppendVarint(protowire.AppendTag(r, 1, protowire.VarintType), uint64(i))
	r = protowire.AppendVarint(protowire.AppendTag(r, 2, protowire.VarintType), 1) // OUTCOME_ACK
	return protowire.AppendBytes(protowire.AppendTag(r, 5, protowire.BytesType), o)
}

type rawField struct {
	num  protowire.Number
	v    uint64
	body []byte
}

// rawFields splits a protobuf message into its varint and bytes fields,
// skipping others; it stops at the first malformed one.
func rawFields(b []byte) []rawField {
	var fs []rawField
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fs
		}
		b = b[n:]
		f := rawField{num: num}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.body, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fs
		}
		b = b[n:]
		fs = append(fs, f)
	}
	return fs
}
