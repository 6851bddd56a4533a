// Package store keeps the embedded broker's topics on disk (or in memory):
// an append-only log of entries per topic plus the small state blobs
// (cursors, topic metadata) that the broker persists.
//
// It knows nothing of Pulsar: entries are opaque bytes with a publish time.
// Each topic is a directory of segment files; a record is
// [length u32][crc32c u32][publish time i64][data], one write(2) per Append,
// so an entry is in the OS (and survives kill -9) when Append returns; with
// Options.Sync it is on stable storage too (concurrent appenders share an
// fsync), and readers see it only then. That fsync is fdatasync(2) of the
// segment (the data and the size; not the times), run through io_uring on
// Linux so the waiting goroutine is parked on the netpoller rather than in
// a system call (syncring_linux.go), the system call elsewhere. Opening a topic scans its last segment and
// truncates a torn tail; a bad record with good ones after it is reported as
// a *CorruptError naming file and offset. Older segments are checked and
// indexed (sparsely, a point per 64 KiB) the first time they are read. The
// newest entries stay in a tail cache that Read hands out without copying.
// Cursors and metadata are small files replaced by write-to-temp and rename.
//
// # Why a segment log and not pebble
//
// Measured with BenchmarkAppend and BenchmarkReadTail here and the same
// workloads on pebble v2.1.7 in bench/storecmp (its own module), one topic,
// on the project's 2-core machine shared with other work: best of 8 runs
// (median in brackets), per operation.
//
//	                         store                 pebble
//	Append 100 B, no sync    0.91 µs (1.26)        1.36 µs (2.14)
//	Append 1 KiB, no sync    2.0 µs  (2.7)         2.1 µs  (6.8)
//	Append 100 B, sync       128 µs                138 µs   (fsync-bound; medians were noise)
//	Append 1 KiB, sync       138 µs                173 µs
//	Read 100 × 100 B, tail   2.9 µs, 1 alloc       18 µs, 100 allocs
//	Read 100 × 1 KiB, tail   2.5 µs, 1 alloc       141 µs, 100 allocs
//
// Appends allocate nothing on either side (the cache's arena is amortized:
// about 1.3× the entry size in B/op). ReadAppend into a reused slice reads
// 100 cached entries in ~0.6 µs with no allocation; with no tail cache, from
// the page cache, 100 × 100 B take ~20 µs.
//
// The log wins: appends are as fast or faster while promising more (with
// NoSync pebble copies the record into a 32 KiB WAL block in memory that a
// goroutine writes out later, so kill -9 can lose an acknowledged entry;
// matching our promise takes pebble.Sync, ~100× slower), tail reads are
// 6-50× faster and copy nothing, there is no
// compaction rewriting data that a log only appends and trims, and the main
// module gains no dependency (pebble brings about 30 modules).
package store
