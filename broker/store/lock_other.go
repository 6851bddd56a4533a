//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK here: this platform has no flock, so keeping
// one store per directory is up to the caller.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
}
