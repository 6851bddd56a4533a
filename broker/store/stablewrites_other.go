//go:build !linux

package store

// rawWritesSafe: writeRecordAtSynced is writeRecordAt here anyway.
func rawWritesSafe(dir string) bool { return false }
