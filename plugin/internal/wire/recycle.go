package wire

import (
	"sync"
	"sync/atomic"
)

// Recycling lets a FrameReader read into chunks again once nothing uses
// the frames it handed out of them: the plugin's end of the batch
// channel, whose decoded batches keep no string in their frame (they
// copy strings out; payloads and other slices a handler may not keep
// past its call), so a frame is done with once its answer is sent.
// Without it every chunk is new, and a plugin allocates as many bytes as
// it receives.

// maxFreeChunks bounds the chunks kept for reuse: one is in reading, a
// few more are held by batches at work (ServeOptions.Concurrency).
const maxFreeChunks = 4

// Chunk is a buffer frames are read into, counted while frames of it are
// in use. Release a frame's Chunk when done with the frame.
type Chunk struct {
	buf  []byte
	refs atomic.Int32 // frames in use, plus one while the reader reads into it
	pool *chunkPool
}

// Release says one frame of c is no longer used; nil does nothing.
func (c *Chunk) Release() {
	if c != nil && c.refs.Add(-1) == 0 {
		c.pool.put(c)
	}
}

type chunkPool struct {
	mu   sync.Mutex
	free []*Chunk
}

func (p *chunkPool) put(c *Chunk) {
	p.mu.Lock()
	if len(p.free) < maxFreeChunks {
		p.free = append(p.free, c)
	}
	p.mu.Unlock()
}

// get returns a chunk of at least size bytes, reused when one is free.
func (p *chunkPool) get(size int) *Chunk {
	p.mu.Lock()
	for i, c := range p.free {
		if len(c.buf) >= size {
			p.free[i] = p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			p.mu.Unlock()
			c.refs.Store(1)
			return c
		}
	}
	p.mu.Unlock()
	c := &Chunk{buf: make([]byte, size), pool: p}
	c.refs.Store(1)
	return c
}

// NewRecyclingFrameReader is NewFrameReader whose chunks are reused:
// each frame NextChunk returns must be released (Chunk.Release) when no
// longer used, and its bytes may be overwritten after that.
func NewRecyclingFrameReader(r interface{ Read([]byte) (int, error) }, max int) *FrameReader {
	return &FrameReader{r: r, max: max, pool: new(chunkPool)}
}

// NextChunk is Next, with the chunk the frame is in (nil unless the
// reader recycles).
func (f *FrameReader) NextChunk() ([]byte, *Chunk, error) {
	body, err := f.Next()
	if err != nil || f.cur == nil {
		return body, nil, err
	}
	f.cur.refs.Add(1)
	return body, f.cur, nil
}
