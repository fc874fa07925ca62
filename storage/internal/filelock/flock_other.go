//go:build !unix

package filelock

import (
	"errors"
	"os"
)

// tryLock has no OS lock to take on this platform: it refuses, so a
// session is never opened without its single-writer guard.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("no advisory file locks on this platform")
}
