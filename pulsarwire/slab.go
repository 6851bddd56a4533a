package pulsarwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// Sizes of the shared buffers of ShareMessageBuffers: the first is
// minSlab, so that a connection receiving only small answers (a
// producer's receipts) never holds more; they double up to slabSize as
// they fill with message frames. Buffers of slabSize are recycled, up to
// poolSlabs of them a Reader.
const (
	minSlab   = 64 << 10
	slabSize  = 1 << 20
	poolSlabs = 4
)

type slab = [slabSize]byte

// slabState is a Reader's shared buffer: buf[start:end] was read and not
// yet returned as a frame; buf[end:] is free.
type slabState struct {
	buf        []byte
	start, end int
	msgBytes   int // bytes of message frames returned from buf
	pool       *slabPool
}

// slabPool holds buffers of slabSize that nothing refers to any more.
// The collector tells: a buffer handed out carries a finalizer, which runs
// only once no slice anywhere points into any byte of it, and puts it
// back here. So a buffer is reused only when no frame, entry or payload
// read from it can be seen again, and then without being zeroed again.
type slabPool struct {
	mu   sync.Mutex
	free []*slab
}

func (p *slabPool) get() []byte {
	p.mu.Lock()
	var s *slab
	if n := len(p.free); n > 0 {
		s, p.free[n-1], p.free = p.free[n-1], nil, p.free[:n-1]
	}
	p.mu.Unlock()
	if s == nil {
		s = new(slab)
	}
	runtime.SetFinalizer(s, p.put)
	return s[:]
}

// put runs on the runtime's finalizer goroutine. A buffer not kept has no
// finalizer any more: the next collection frees it.
func (p *slabPool) put(s *slab) {
	p.mu.Lock()
	if len(p.free) < poolSlabs {
		p.free = append(p.free, s)
	}
	p.mu.Unlock()
}

// ShareMessageBuffers makes the Reader read the stream straight into
// large buffers and return frames that alias them: frames that follow
// one another share a buffer, filled by as few reads as the stream
// allows, with no copy between a read buffer and the frame. A buffer is
// reused only once nothing refers to any byte of it any more (the garbage
// collector tells), so Entry and Payload stay valid after later calls for
// as long as they are referenced; and a frame's slices end where it does,
// so appending to one never writes over the next.
//
// The buffers start at 64 KiB and double, up to 1 MiB, each time one
// filled up mostly with message frames; up to four buffers of 1 MiB that
// nothing refers to are kept for reuse. A frame larger than 1 MiB gets a
// buffer of its own.
//
// What it saves, per message frame: an allocation and its zeroing, a
// copy, read calls, and garbage collections (what is reused is not
// allocated again). What it costs: a slice kept from any frame keeps its
// whole buffer in memory, and up to 5 MiB per Reader stay allocated. The
// Reader's io.Reader should not be a bufio.Reader then: that only adds a
// copy.
func (r *Reader) ShareMessageBuffers() {
	r.slab = &slabState{pool: &slabPool{}}
}

// nextShared is Next with ShareMessageBuffers.
func (r *Reader) nextShared() (Frame, error) {
	s := r.slab
	if err := r.fill(4); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("frame size: %w", ErrTruncated)
		}
		return Frame{}, err
	}
	hdr := s.buf[s.start:]
	if string(hdr[:4]) == "HTTP" {
		// An HTTP status line ("HTTP/1.1 400 ..."), read as a frame size.
		return Frame{}, ErrHTTP
	}
	total := int(binary.BigEndian.Uint32(hdr))
	if total > r.max {
		return Frame{}, fmt.Errorf("frame of %d bytes, limit %d: %w", total, r.max, ErrFrameTooLarge)
	}
	if total < 4 {
		return Frame{}, fmt.Errorf("frame of %d bytes has no command size: %w", total, ErrCorrupt)
	}
	if err := r.fill(8); err != nil {
		return Frame{}, fmt.Errorf("command size: %w", ErrTruncated)
	}
	if cmdSize := int(binary.BigEndian.Uint32(s.buf[s.start+4:])); cmdSize > total-4 {
		return Frame{}, fmt.Errorf("command of %d bytes in a frame of %d: %w", cmdSize, total, ErrCorrupt)
	}
	if err := r.fill(4 + total); err != nil {
		return Frame{}, fmt.Errorf("frame body of %d bytes: %w", total, ErrTruncated)
	}
	begin, end := s.start, s.start+4+total
	body := s.buf[begin+4 : end : end]
	s.start = end
	f, err := ParseFrame(body)
	switch {
	case f.Entry != nil:
		s.msgBytes += 4 + total
	case err == nil && s.end == end:
		// A command alone, and nothing read after it: its decoding copied
		// out what it keeps, so its bytes are free again (a producer's
		// connection, which receives only receipts, keeps reading into
		// the same bytes).
		s.start, s.end = begin, begin
	}
	return f, err
}

// fill makes at least n bytes from s.start available, reading as much as
// the free space takes; io.ErrUnexpectedEOF when the stream ends within
// them, io.EOF when it ends before the first.
func (r *Reader) fill(n int) error {
	s := r.slab
	if s.end-s.start >= n {
		return nil
	}
	if len(s.buf)-s.start < n {
		s.renew(n)
	}
	for s.end-s.start < n {
		m, err := r.r.Read(s.buf[s.end:])
		s.end += m
		if s.end-s.start >= n {
			return nil
		}
		if err != nil {
			if err == io.EOF && s.end > s.start {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// renew moves to a new buffer that takes at least n bytes, carrying over
// what was read and not returned yet.
func (s *slabState) renew(n int) {
	size := min(max(len(s.buf), minSlab), slabSize)
	if s.msgBytes > len(s.buf)/2 {
		size = min(2*size, slabSize)
	}
	var nb []byte
	switch {
	case n > size:
		nb = make([]byte, n)
	case size == slabSize:
		nb = s.pool.get()
	default:
		nb = make([]byte, size)
	}
	s.end = copy(nb, s.buf[s.start:s.end])
	s.buf, s.start, s.msgBytes = nb, 0, 0
}
