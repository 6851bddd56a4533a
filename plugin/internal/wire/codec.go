package wire

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// Encoder is a value the codec encodes by hand: Size bytes, appended by
// Append.
type Encoder interface {
	Size() int
	Append(b []byte) []byte
}

// Decoder is a value the codec decodes by hand.
type Decoder interface {
	Decode(b []byte) error
}

// Codec is the gRPC codec of both ends: Encoders and Decoders by hand,
// everything else (Init, Close, go-plugin's own services) by protobuf.
type Codec struct{ proto encoding.CodecV2 }

func NewCodec() Codec { return Codec{proto: encoding.GetCodecV2("proto")} }

func (Codec) Name() string { return "proto" }

func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	e, ok := v.(Encoder)
	if !ok {
		return c.proto.Marshal(v)
	}
	size := e.Size()
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	b := e.Append((*buf)[:0])
	if len(b) != size {
		pool.Put(buf)
		return nil, fmt.Errorf("plugin: encoded %d bytes, expected %d", len(b), size)
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if d, ok := v.(Decoder); ok {
		return d.Decode(data.Materialize())
	}
	return c.proto.Unmarshal(data, v)
}
