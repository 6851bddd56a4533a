package store

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// rawWritesSafe says whether a record's pwritev to files in dir can be a
// raw system call (writeRecordAt) in a store that syncs: whether a write
// into a page being written back never waits for the disk. It waits when
// pages must stay stable under writeback ("stable pages": devices that
// checksum or encrypt what they write, file systems like btrfs that
// checksum data), and then the runtime must know of the call so that the
// P can run other goroutines meanwhile. Known not to wait: tmpfs (no
// writeback), and ext4 or XFS on a block device whose queue says
// stable_writes 0. Anything else, or anything not readable: no.
func rawWritesSafe(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.TMPFS_MAGIC:
		return true
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC:
	default:
		return false
	}
	var s unix.Stat_t
	if err := unix.Stat(dir, &s); err != nil {
		return false
	}
	dev := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(s.Dev), unix.Minor(s.Dev))
	// A partition has no queue of its own: its disk's is one level up.
	for _, q := range []string{dev + "/queue/stable_writes", dev + "/../queue/stable_writes"} {
		if b, err := os.ReadFile(q); err == nil {
			return strings.TrimSpace(string(b)) == "0"
		}
	}
	return false
}
