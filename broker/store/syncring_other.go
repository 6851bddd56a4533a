//go:build !linux

package store

import "os"

// syncRings is empty where there is no io_uring.
type syncRings struct{}

func newSyncRings() *syncRings { return &syncRings{} }

func (rs *syncRings) closeAll() {}

// syncData is f.Sync.
func syncData(rs *syncRings, f *os.File) error { return f.Sync() }
