package pulsarwire

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Codecs compresses and decompresses payloads with the five codecs of the
// protocol, as the Java client does: LZ4 and Snappy as raw blocks, ZLIB
// with its zlib header, ZSTD as frames. The receiver learns the size from
// MessageMetadata.uncompressed_size.
//
// A Codecs keeps encoder state between calls to avoid re-allocating it; it
// is not safe for concurrent use. The zero value is ready.
type Codecs struct {
	zenc *zstd.Encoder
	zdec *zstd.Decoder
	lz4c lz4.Compressor
}

// Compress appends src compressed with t to dst.
func (c *Codecs) Compress(t pb.CompressionType, dst, src []byte) ([]byte, error) {
	switch t {
	case pb.CompressionType_NONE:
		return append(dst, src...), nil
	case pb.CompressionType_LZ4:
		start := len(dst)
		dst = grow(dst, lz4.CompressBlockBound(len(src)))
		n, err := c.lz4c.CompressBlock(src, dst[start:])
		if err != nil {
			return dst[:start], fmt.Errorf("lz4 compress: %w", err)
		}
		if n == 0 && len(src) > 0 {
			// lz4 reports incompressible input as 0; the protocol has no
			// such marker, so store it as literals the decoder understands.
			return appendLZ4Literals(dst[:start], src), nil
		}
		return dst[:start+n], nil
	case pb.CompressionType_ZLIB:
		buf := bytes.NewBuffer(dst)
		w := zlib.NewWriter(buf)
		if _, err := w.Write(src); err != nil {
			return dst, fmt.Errorf("zlib compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return dst, fmt.Errorf("zlib compress: %w", err)
		}
		return buf.Bytes(), nil
	case pb.CompressionType_ZSTD:
		if c.zenc == nil {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
			if err != nil {
				return dst, fmt.Errorf("zstd encoder: %w", err)
			}
			c.zenc = enc
		}
		return c.zenc.EncodeAll(src, dst), nil
	case pb.CompressionType_SNAPPY:
		start := len(dst)
		dst = grow(dst, snappy.MaxEncodedLen(len(src)))
		out := snappy.Encode(dst[start:cap(dst)], src)
		return dst[:start+len(out)], nil
	}
	return dst, fmt.Errorf("compress: codec %d: %w", t, ErrUnsupported)
}

// Decompress appends the decompression of src to dst. size is the
// uncompressed size the metadata states; an output of any other size, or
// a size over limit, is an error (a lying header must not make us
// allocate without bound).
func (c *Codecs) Decompress(t pb.CompressionType, dst, src []byte, size, limit int) (out []byte, err error) {
	// The codecs are third-party code fed with peer bytes: a panic in one
	// (fuzzing found lz4 dereferencing nil for an empty output) must
	// become an error on that message, not a crashed connection.
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, fmt.Errorf("%s: decoder panicked: %v: %w", t, r, ErrCorrupt)
		}
	}()
	if size < 0 || size > limit {
		return dst, fmt.Errorf("%s: uncompressed size %d, limit %d: %w", t, size, limit, ErrCorrupt)
	}
	start := len(dst)
	switch t {
	case pb.CompressionType_NONE:
		dst = append(dst, src...)
	case pb.CompressionType_LZ4:
		if size == 0 {
			break
		}
		dst = grow(dst, size)
		n, err := lz4.UncompressBlock(src, dst[start:start+size])
		if err != nil {
			return dst[:start], fmt.Errorf("lz4: %v: %w", err, ErrCorrupt)
		}
		dst = dst[:start+n]
	case pb.CompressionType_ZLIB:
		r, err := zlib.NewReader(bytes.NewReader(src))
		if err != nil {
			return dst, fmt.Errorf("zlib: %v: %w", err, ErrCorrupt)
		}
		dst = grow(dst, size)
		n, err := io.ReadFull(r, dst[start:start+size])
		if err != nil && err != io.ErrUnexpectedEOF {
			return dst[:start], fmt.Errorf("zlib: %v: %w", err, ErrCorrupt)
		}
		dst = dst[:start+n]
		var one [1]byte
		if m, _ := r.Read(one[:]); m > 0 {
			return dst[:start], fmt.Errorf("zlib: more than the %d bytes stated: %w", size, ErrCorrupt)
		}
	case pb.CompressionType_ZSTD:
		if c.zdec == nil {
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+1))
			if err != nil {
				return dst, fmt.Errorf("zstd decoder: %w", err)
			}
			c.zdec = dec
		}
		dst = grow(dst, size)[:start]
		var err error
		dst, err = c.zdec.DecodeAll(src, dst)
		if err != nil {
			return dst[:start], fmt.Errorf("zstd: %v: %w", err, ErrCorrupt)
		}
	case pb.CompressionType_SNAPPY:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return dst, fmt.Errorf("snappy: %v: %w", err, ErrCorrupt)
		}
		if n != size {
			return dst, fmt.Errorf("snappy: %d bytes, metadata says %d: %w", n, size, ErrCorrupt)
		}
		dst = grow(dst, size)
		out, err := snappy.Decode(dst[start:start+size], src)
		if err != nil {
			return dst[:start], fmt.Errorf("snappy: %v: %w", err, ErrCorrupt)
		}
		dst = dst[:start+len(out)]
	default:
		return dst, fmt.Errorf("decompress: codec %d: %w", t, ErrUnsupported)
	}
	if got := len(dst) - start; got != size {
		return dst[:start], fmt.Errorf("%s: %d bytes, metadata says %d: %w", t, got, size, ErrCorrupt)
	}
	return dst, nil
}

// Close releases encoder and decoder state.
func (c *Codecs) Close() {
	if c.zenc != nil {
		c.zenc.Close()
		c.zenc = nil
	}
	if c.zdec != nil {
		c.zdec.Close()
		c.zdec = nil
	}
}

// grow returns dst with room for n more bytes and len(dst)+n length.
// appendLZ4Literals appends src as an LZ4 block of one sequence with
// literals only, which every LZ4 block decoder accepts.
func appendLZ4Literals(dst, src []byte) []byte {
	n := len(src)
	if n < 15 {
		dst = append(dst, byte(n<<4))
	} else {
		dst = append(dst, 15<<4)
		for n -= 15; n >= 255; n -= 255 {
			dst = append(dst, 255)
		}
		dst = append(dst, byte(n))
	}
	return append(dst, src...)
}

func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nd := make([]byte, len(dst), len(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	return dst[:len(dst)+n]
}
