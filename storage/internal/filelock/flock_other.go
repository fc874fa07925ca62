//go:build !unix

package filelock

import (
	"errors"
	"os"
)

// openLockFile opens path for reading and writing, creating it.
func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, fileMode)
}

// tryLock has no OS lock to take on this platform: it refuses, so a
// session is never opened without its single-writer guard.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("no advisory file locks on this platform")
}
