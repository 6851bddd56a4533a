package store

// tailCache holds the newest entries of a log in memory: reads of recent
// entries (what a dispatcher following the tail does) never touch the file.
// In memory mode it holds the whole log and never evicts.
//
// Entry data lives in arena chunks that are written once and never reused:
// Read can hand out slices of them without copying, and a slice a caller
// keeps stays valid after eviction (the garbage collector frees a chunk when
// nothing refers to it any more).
type tailCache struct {
	first uint64 // id of ents[head]; the next id to push when empty
	ents  []cachedEntry
	head  int
	bytes int64 // data plus record header bytes of the cached entries
	limit int64 // < 0: no limit (memory mode); 0: cache nothing

	chunk     []byte // unused rest of the current arena chunk
	chunkSize int
}

type cachedEntry struct {
	publishTime int64
	data        []byte
}

const (
	minChunk = 4 << 10
	maxChunk = 256 << 10
)

func (c *tailCache) len() int { return len(c.ents) - c.head }

func (c *tailCache) at(id uint64) cachedEntry { return c.ents[c.head+int(id-c.first)] }

// alloc returns n bytes of arena. Chunks start small and double, so a topic
// that holds a few small entries holds a few KiB, not a full chunk.
func (c *tailCache) alloc(n int) []byte {
	if n > maxChunk/4 {
		return make([]byte, n)
	}
	if len(c.chunk) < n {
		c.chunkSize = min(max(2*c.chunkSize, minChunk), maxChunk)
		if c.limit > 0 {
			c.chunkSize = min(c.chunkSize, max(int(c.limit/4), minChunk))
		}
		c.chunk = make([]byte, max(c.chunkSize, n))
	}
	b := c.chunk[:n:n] // full slice expression: an append by a reader cannot spill into the next entry
	c.chunk = c.chunk[n:]
	return b
}

func (c *tailCache) push(publishTime int64, data []byte) {
	if c.limit == 0 {
		c.pass()
		return
	}
	c.ents = append(c.ents, cachedEntry{publishTime, data})
	c.bytes += int64(len(data)) + recHeaderSize
	for c.limit > 0 && c.bytes > c.limit && c.len() > 0 {
		c.popFront()
	}
}

// pass notes an entry appended without caching it (the cache is off, or
// the log's CacheTail is): the cache then holds nothing.
func (c *tailCache) pass() { c.first++ }

// dropBefore forgets every cached entry below id (Trim).
func (c *tailCache) dropBefore(id uint64) {
	for c.len() > 0 && c.first < id {
		c.popFront()
	}
	if c.len() == 0 && c.first < id {
		c.first = id
	}
}

func (c *tailCache) popFront() {
	e := &c.ents[c.head]
	c.bytes -= int64(len(e.data)) + recHeaderSize
	*e = cachedEntry{} // let the chunk go once nothing else refers to it
	c.head++
	c.first++
	// Compact now and then so the backing array does not grow forever;
	// amortized O(1) per entry.
	if c.head >= 1024 && c.head >= len(c.ents)/2 {
		live := c.ents[c.head:]
		if cap(c.ents) > 4*len(live)+4096 {
			// Most of the array is past a burst (3 million entries were
			// held, a few remain): let it go, or it stays for ever.
			c.ents = append(make([]cachedEntry, 0, 2*len(live)), live...)
		} else {
			n := copy(c.ents, live)
			clear(c.ents[n:])
			c.ents = c.ents[:n]
		}
		c.head = 0
	}
}

// reset empties the cache and lets go of its memory (topic closed).
func (c *tailCache) reset(first uint64) {
	*c = tailCache{first: first, limit: c.limit}
}
