package broker

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// releaseAfter is how much memory a Memory broker frees (trims and
	// deleted topics) before it asks the Go runtime to give the freed
	// pages back to the OS.
	releaseAfter = 64 << 20
	// releaseEvery bounds how often it asks while memory is freed a little
	// at a time (a steady stream trimmed behind its consumers): each time
	// is a full GC, and the runtime would reuse the pages soon anyway.
	releaseEvery = time.Minute
	// releaseSoon bounds how often it asks after a large drop: at least
	// half of the heap that was live at the last GC freed (the only topic
	// deleted, a burst trimmed).
	releaseSoon = 5 * time.Second
)

// freed notes n bytes of message memory let go of (Memory mode).
func (c *Cluster) freed(n int64) {
	if c.opts.Memory && n > 0 {
		c.trimmed.Add(n)
	}
}

// releaseMemory gives freed memory back to the OS (Memory mode) once
// releaseAfter bytes were freed: at most every releaseSoon when that is at
// least half of the live heap, else at most every releaseEvery. It returns
// when it last gave memory back.
//
// Without it an idle broker keeps the freed heap: the runtime's scavenger
// returns idle pages only down to a goal set at the end of a GC, and an
// idle broker allocates too little to start one. Measured on Go 1.26,
// `streamrun broker --memory` stayed at 346 MiB resident (19 MiB idle)
// 150 s after its only topic, 3 million messages of 100 bytes, was
// deleted, with 348 MiB of the heap idle and 3 MiB of it released even
// after a forced GC.
func (c *Cluster) releaseMemory(last time.Time) time.Time {
	n := c.trimmed.Load()
	if n < releaseAfter {
		return last
	}
	since := time.Since(last)
	if since < releaseEvery && (since < releaseSoon || uint64(n) < heapLive()/2) {
		return last
	}
	c.trimmed.Add(-n)
	debug.FreeOSMemory()
	return time.Now()
}

// heapLive is the heap the last GC found live, in bytes.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
