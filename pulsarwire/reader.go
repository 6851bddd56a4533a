package pulsarwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r       io.Reader
	max     int
	hdr     [8]byte
	scratch []byte     // reused for frames without a message; their decode copies out
	reuse   bool       // message frames reuse scratch too (ReuseMessageBuffers)
	slab    *slabState // set by ShareMessageBuffers
}

// maxReused is the largest frame kept in the scratch buffer for the next
// call; a rare bigger one gets a buffer of its own, so one huge message
// does not pin its size for the life of the connection.
const maxReused = 1 << 20

// NewReader returns a Reader refusing frames larger than maxFrameSize
// (see MaxFrameSize); wrap r in a bufio.Reader for small reads.
func NewReader(r io.Reader, maxFrameSize int) *Reader {
	return &Reader{r: r, max: maxFrameSize}
}

// ReuseMessageBuffers makes frames carrying a message reuse the Reader's
// buffer as well: their Entry, Payload and BrokerEntryMetadata are then
// valid only until the next call to Next. For a reader that copies what
// it keeps (the broker appends the entry to its store, which copies), this
// saves allocating and zeroing a buffer per message frame.
func (r *Reader) ReuseMessageBuffers() { r.reuse = true }

// SetMaxFrameSize changes the limit, as after CONNECTED names one.
func (r *Reader) SetMaxFrameSize(n int) { r.max = n }

// Next reads and decodes one frame.
//
// A frame carrying a message gets a buffer of its own (or a part of a
// shared one, see ShareMessageBuffers), so its Entry and Payload stay
// valid after later calls. An error wrapping io.EOF means
// the stream ended cleanly between frames; ErrFrameTooLarge, ErrTruncated
// and ErrCorrupt mean the stream cannot be trusted any more. ErrChecksum
// leaves the stream usable (the frame was read whole).
func (r *Reader) Next() (Frame, error) {
	if r.slab != nil {
		return r.nextShared()
	}
	if _, err := io.ReadFull(r.r, r.hdr[:4]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("frame size: %w", ErrTruncated)
		}
		return Frame{}, err
	}
	total := int(binary.BigEndian.Uint32(r.hdr[:4]))
	if string(r.hdr[:4]) == "HTTP" {
		// An HTTP status line ("HTTP/1.1 400 ..."), read as a frame size.
		return Frame{}, ErrHTTP
	}
	if total > r.max {
		return Frame{}, fmt.Errorf("frame of %d bytes, limit %d: %w", total, r.max, ErrFrameTooLarge)
	}
	if total < 4 {
		return Frame{}, fmt.Errorf("frame of %d bytes has no command size: %w", total, ErrCorrupt)
	}
	if _, err := io.ReadFull(r.r, r.hdr[4:8]); err != nil {
		return Frame{}, fmt.Errorf("command size: %w", ErrTruncated)
	}
	cmdSize := int(binary.BigEndian.Uint32(r.hdr[4:8]))
	if cmdSize > total-4 {
		return Frame{}, fmt.Errorf("command of %d bytes in a frame of %d: %w", cmdSize, total, ErrCorrupt)
	}
	var body []byte
	if cmdSize == total-4 || (r.reuse && total <= maxReused) {
		if cap(r.scratch) < total {
			r.scratch = make([]byte, total, max(total, 512))
		}
		body = r.scratch[:total]
	} else {
		body = make([]byte, total)
	}
	copy(body, r.hdr[4:8])
	if _, err := io.ReadFull(r.r, body[4:]); err != nil {
		return Frame{}, fmt.Errorf("frame body of %d bytes: %w", total, ErrTruncated)
	}
	return ParseFrame(body)
}
