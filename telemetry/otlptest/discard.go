package otlptest

import (
	"context"
	"errors"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// A discarding gRPC receiver counts the spans of each export by walking
// the request's wire format instead of decoding it: a benchmark measures
// what exporting costs the exporting process, and a collector's decoding
// runs elsewhere, not in the pipeline's process.

// countedSpans is what the counting codec makes of an export request.
type countedSpans int64

// countingCodec reads an export request as its span count and writes the
// (empty) response with protobuf.
type countingCodec struct{}

func (countingCodec) Name() string { return "proto" }

func (countingCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, errors.New("otlptest: cannot marshal a non-proto message")
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (countingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	n, ok := v.(*countedSpans)
	if !ok {
		return errors.New("otlptest: unexpected request type")
	}
	buf := data.Materialize()
	c, err := countSpans(buf)
	*n = countedSpans(c)
	return err
}

// countSpans counts the spans of an ExportTraceServiceRequest: field 1
// (resource_spans), in each its field 2 (scope_spans), in each its field
// 2 (spans).
func countSpans(b []byte) (int64, error) {
	var n int64
	err := eachField(b, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// eachField calls f with the bytes of every length-delimited field num of
// the message b.
func eachField(b []byte, num protowire.Number, f func([]byte) error) error {
	for len(b) > 0 {
		fn, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if fn == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			if err := f(v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(fn, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

// registerCounting registers r's counting trace service on srv.
func registerCounting(srv *grpc.Server, r *Receiver) {
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var n countedSpans
				if err := dec(&n); err != nil {
					return nil, err
				}
				r.count.Add(int64(n))
				return &coltrace.ExportTraceServiceResponse{}, nil
			},
		}},
	}, r)
}

var _ encoding.CodecV2 = countingCodec{}
