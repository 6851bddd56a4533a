//go:build !linux

package store

import "os"

// readAt is f.ReadAt.
func readAt(f *os.File, buf []byte, off int64) (int, error) { return f.ReadAt(buf, off) }
