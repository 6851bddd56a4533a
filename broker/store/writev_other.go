//go:build !linux

package store

import "os"

// writeRecordAt writes a record's header and data, then pad zero bytes, at
// off in one write.
func writeRecordAt(f *os.File, hdr, data []byte, pad int, off int64) (int, error) {
	if len(data) == 0 && pad == 0 {
		return f.WriteAt(hdr, off)
	}
	b := append(hdr[:len(hdr):len(hdr)], data...)
	return f.WriteAt(append(b, zeroPage[:pad]...), off)
}

// writeRecordAtSynced is writeRecordAt.
func writeRecordAtSynced(f *os.File, hdr, data []byte, pad int, off int64) (int, error) {
	return writeRecordAt(f, hdr, data, pad, off)
}
