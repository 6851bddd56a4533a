package store

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrClosed is returned by every method of a Store or Log after Close.
	ErrClosed = errors.New("store: closed")
	// ErrDeleted is returned by every method of a Log whose topic was deleted.
	ErrDeleted = errors.New("store: topic deleted")
	// ErrNotFound is returned by DeleteTopic for a topic that does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrTooLarge is returned by Append for an entry over MaxEntryBytes.
	ErrTooLarge = errors.New("store: entry too large")
	// ErrNoSpace matches a write that failed because the data directory's
	// file system is full. The store stays usable: the failed write left
	// nothing behind, and writes succeed again once space is freed.
	ErrNoSpace = errors.New("store: disk full (no space left on the data directory's device)")
	// ErrCorrupt matches every *CorruptError.
	ErrCorrupt = errors.New("store: corrupt data")
)

// CorruptError reports data on disk that fails its checks: a record whose
// checksum does not match, or a file that is not what its name says. A torn
// record at the very end of a topic's last segment is not corrupt: Open
// truncates it (that is what kill -9 or a power cut leaves behind).
type CorruptError struct {
	File   string // path of the damaged file
	Offset int64  // byte offset of the damaged record or header
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store: corrupt data in %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// noSpace marks err with ErrNoSpace when it says the device is full.
func noSpace(err error) error {
	if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}
