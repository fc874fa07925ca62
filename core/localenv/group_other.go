//go:build !unix

package localenv

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// Exec needs process groups to kill a command with everything it started;
// without them it refuses to run rather than leave processes behind. The
// file operations work everywhere.

func groupAttr() (*syscall.SysProcAttr, error) {
	return nil, fmt.Errorf("localenv: exec needs unix process groups, which %s lacks: %w", runtime.GOOS, errors.ErrUnsupported)
}

func signalGroup(int, stopSignal) error { return errors.ErrUnsupported }

func endOf(ps *os.ProcessState) (code int, signal string) { return ps.ExitCode(), "" }
