//go:build !linux

package store

import "os"

// zeroRange is not done here: the log appends without preallocating.
func zeroRange(path string, off, n int64) error { return errNoPrealloc }

// syncData is f.Sync.
func syncData(f *os.File) error { return f.Sync() }
