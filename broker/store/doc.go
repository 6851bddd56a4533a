// Package store keeps the embedded broker's topics on disk (or in memory):
// an append-only log of entries per topic plus the small state blobs
// (cursors, topic metadata) that the broker persists.
//
// It knows nothing of Pulsar: entries are opaque bytes with a publish time.
// Each topic is a directory of segment files; a record is
// [length u32][crc32c u32][publish time i64][data], one write(2) per Append.
// Opening a topic scans its last segment and truncates a torn tail; a bad
// record followed by good ones is reported as corruption (*CorruptError,
// naming file and offset). Older segments are checked and indexed (sparse,
// one point per 64 KiB) the first time they are read. Cursors and metadata
// are small files replaced by write-to-temp and rename.
package store
