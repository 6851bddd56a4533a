package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The batch channel of contract version 2 (plugin/internal/contract) is a
// stream socket that carries frames: a 4-byte little-endian length, then
// that many bytes of one protobuf message (a Batch from the host, a
// BatchResult from the plugin), the same bytes gRPC would carry. No
// headers, no per-frame acknowledgement, no encryption: a frame costs one
// write on one side and, when the reader keeps up, one read on the other.

// FrameHeader is the size of a frame's length prefix.
const FrameHeader = 4

// chunkSize is how much a FrameReader reads into at once: many frames of
// a small batch, or one of a batch of 1000 messages of 100 bytes.
const chunkSize = 256 << 10

// FrameReader reads frames without copying them: each frame returned
// aliases a chunk that it reads the socket into, and that chunk is never
// written again where a frame was handed out (see the lifetime note in
// wire.go: a decoded batch aliases its frame). A chunk lives as long as a
// frame of it is referenced. Not safe for concurrent use.
type FrameReader struct {
	r        io.Reader
	max      int
	buf      []byte
	off, end int // buf[off:end] is read and not yet handed out

	// pool and cur, when recycling (NewRecyclingFrameReader): the chunks
	// to reuse, and the one buf is.
	pool *chunkPool
	cur  *Chunk
}

// NewFrameReader reads frames from r; a frame above max bytes is an error.
func NewFrameReader(r io.Reader, max int) *FrameReader {
	return &FrameReader{r: r, max: max}
}

// Next returns the next frame's body. An error ends the reader: io.EOF
// when r ended between frames, another when it ended within one or a
// length is above the limit.
func (f *FrameReader) Next() ([]byte, error) {
	for {
		if f.end-f.off >= FrameHeader {
			n := int(binary.LittleEndian.Uint32(f.buf[f.off:]))
			if n > f.max {
				return nil, fmt.Errorf("a frame of %d bytes, above the limit of %d", n, f.max)
			}
			if f.end-f.off-FrameHeader >= n {
				body := f.buf[f.off+FrameHeader : f.off+FrameHeader+n : f.off+FrameHeader+n]
				f.off += FrameHeader + n
				return body, nil
			}
			f.room(FrameHeader + n)
		} else {
			f.room(FrameHeader)
		}
		k, err := f.r.Read(f.buf[f.end:])
		f.end += k
		if k > 0 {
			continue
		}
		if err == io.EOF && f.end > f.off {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, err
	}
}

// Buffered reports whether a whole frame has been read and not yet
// handed out: Next returns it without reading.
func (f *FrameReader) Buffered() bool {
	if f.end-f.off < FrameHeader {
		return false
	}
	n := int(binary.LittleEndian.Uint32(f.buf[f.off:]))
	return n <= f.max && f.end-f.off-FrameHeader >= n
}

// room makes buf hold need bytes from off, moving what is unread to a
// new chunk when it does not: bytes already handed out are never moved
// or overwritten.
func (f *FrameReader) room(need int) {
	if len(f.buf)-f.off >= need {
		return
	}
	var nb []byte
	if f.pool != nil {
		c := f.pool.get(max(chunkSize, need))
		nb = c.buf
		f.end = copy(nb, f.buf[f.off:f.end])
		f.cur.Release() // the reader's own reference, once it is copied from
		f.cur = c
	} else {
		nb = make([]byte, max(chunkSize, need))
		f.end = copy(nb, f.buf[f.off:f.end])
	}
	f.off = 0
	f.buf = nb
}

// AppendFrame appends e as a frame to b.
func AppendFrame(b []byte, e Encoder) ([]byte, error) {
	size := e.Size()
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	start := len(b)
	b = e.Append(b)
	if len(b)-start != size {
		return b, fmt.Errorf("plugin: encoded %d bytes, expected %d", len(b)-start, size)
	}
	return b, nil
}
