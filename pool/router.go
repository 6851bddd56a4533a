package pool

import (
	"sync"
	"time"
	"unicode/utf8"
)

// javaStringHash is Java's String.hashCode of s: h = 31*h + c over the
// string's UTF-16 code units, in 32-bit two's complement.
func javaStringHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// KeyPartition is the partition of n that a message with key goes to: the
// Java client's default (javaStringHash & Integer.MAX_VALUE, modulo n), so
// producers of both languages put a key on the same partition.
//
// The Go client (pulsar-client-go v0.19, default javaStringHash scheme)
// hashes the key's UTF-8 bytes and takes the unsigned hash modulo n
// without masking the sign bit. For ASCII keys whose hash is non-negative
// the three agree; for others the Go client may pick another partition
// than Java and streamrun.
func KeyPartition(key string, n int) int {
	return int(javaStringHash(key)&0x7fffffff) % n
}

// roundRobin picks partitions for messages without a key, batching-aware
// like the Go client's default router: it stays on one partition until a
// batch's worth of messages or bytes went there, or the batching delay
// passed, then moves to the next. (The Java client switches on the clock
// alone, every MaxDelay.)
type roundRobin struct {
	opts *BatchingOptions

	mu       sync.Mutex
	cursor   int
	messages int
	bytes    int
	since    time.Time
}

func (r *roundRobin) next(size, n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages++
	r.bytes += size
	if r.messages > r.opts.MaxMessages || r.bytes > r.opts.MaxBytes || time.Since(r.since) > r.opts.MaxDelay {
		r.cursor++
		r.messages, r.bytes, r.since = 1, size, time.Now()
	}
	return r.cursor % n
}
