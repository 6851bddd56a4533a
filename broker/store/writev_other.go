//go:build !linux

package store

import "os"

// writeRecordAt writes a record's header and data at off in one write.
func writeRecordAt(f *os.File, hdr, data []byte, off int64) (int, error) {
	if len(data) == 0 {
		return f.WriteAt(hdr, off)
	}
	return f.WriteAt(append(hdr[:len(hdr):len(hdr)], data...), off)
}

// writeRecordAtSynced is writeRecordAt.
func writeRecordAtSynced(f *os.File, hdr, data []byte, off int64) (int, error) {
	return writeRecordAt(f, hdr, data, off)
}
