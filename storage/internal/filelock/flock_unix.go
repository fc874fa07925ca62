//go:build unix

package filelock

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openLockFile opens path for reading and writing, creating it, as
// os.OpenFile does but as a file the runtime never tries to poll: a
// regular file gains nothing from the poller, and skipping it saves an
// epoll_ctl and the fcntl calls that Fd would make to undo it, on every
// open of a session.
func openLockFile(path string) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, uint32(fileMode))
		if err == nil {
			return os.NewFile(uintptr(fd), path), nil
		}
		if err != syscall.EINTR {
			return nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// tryLock takes an exclusive flock without waiting: false when someone
// holds it. flock locks belong to the open file description, so a second
// open of the same file in this process conflicts too.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}
