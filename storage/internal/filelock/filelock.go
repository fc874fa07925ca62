// Package filelock holds the lock that makes a durable session
// single-writer (DESIGN §9a): an exclusive OS lock on a lock file beside the
// session, held for as long as the session is open and released by the
// kernel when the holding process dies, so a crash never leaves a stale
// lock. The file records the holder's pid for the error a second opener
// gets; it is never removed (removing it would let two openers lock two
// different files).
//
// # Files
//
//   - filelock.go: Acquire and Lock.
//   - flock_unix.go, flock_other.go: the lock file's open and the OS lock, and where there is no lock.
package filelock

import (
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/pico-go/pico/storage"
)

// fileMode keeps the lock file private like the session's own files.
const fileMode fs.FileMode = 0o600

// holderBytesMax bounds how much of a lock file is read to name its holder.
const holderBytesMax = 64

// Lock is a held lock file.
type Lock struct {
	f *os.File
}

// Acquire locks path (creating it), or returns a *storage.LockedError
// naming session and the holder when another handle, in this process or
// another, holds it.
func Acquire(path, session string) (*Lock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, fmt.Errorf("storage: lock %s: %w", path, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("storage: lock %s: %w", path, err)
	}
	if !held {
		holder := "another handle"
		buf := make([]byte, holderBytesMax)
		if n, _ := f.ReadAt(buf, 0); n > 0 {
			holder = strings.TrimSpace(string(buf[:n]))
		}
		f.Close()
		return nil, &storage.LockedError{Session: session, Holder: holder}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up; releasing twice does nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the lock
	l.f = nil
	return err
}
