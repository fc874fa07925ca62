package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/pico-go/pico/sim/fault"
)

// Exit statuses (README "picosim commands"). Each error type below picks
// one, so that a script can tell a failing run from a mistake, a broken
// machine or an interruption.
const (
	// exitFailed: a run failed, a replay differs, a session is invalid.
	exitFailed = 1
	// exitUsage: a mistake of use, or a damaged or invalid trace.
	exitUsage = 2
	// exitEnvironment: the machine failed picosim (see envError).
	exitEnvironment = 3
	// exitSignalBase plus the signal's number is the status of a command
	// a signal interrupted, as a shell reports a process the signal killed.
	exitSignalBase = 128
)

// usageError is a mistake in how picosim was called, or a trace that cannot
// be replayed: one line, exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// fieldError is a field of a run's spec that no run can carry out. run
// names it as its flag and replay as the trace header's field, so both
// refuse the same specs with the same words. Exit 2.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// envError is the machine failing picosim rather than the harness failing
// a run or the user calling picosim wrongly: a temporary directory that
// cannot be made or written (missing, read-only, full), a trace that cannot
// be written, a SQLite backend built without cgo. Exit 3, so that neither
// the harness nor the user's file is blamed for it.
type envError struct{ err error }

func (e *envError) Error() string { return e.err.Error() }
func (e *envError) Unwrap() error { return e.err }

// interrupted is the cause of main's context once SIGINT or SIGTERM came.
type interrupted struct{ sig os.Signal }

func (e *interrupted) Error() string { return "interrupted by " + signalName(e.sig) }

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// exitCode is the exit status err calls for.
func exitCode(err error) int {
	var (
		ie *interrupted
		ee *envError
		ue *usageError
		fe *fieldError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ie):
		if n, ok := ie.sig.(syscall.Signal); ok {
			return exitSignalBase + int(n)
		}
		return exitFailed
	case errors.As(err, &ee):
		return exitEnvironment
	case errors.As(err, &ue), errors.As(err, &fe):
		return exitUsage
	}
	return exitFailed
}

// fail prints err as picosim's one error line for cmd and returns the exit
// status it calls for.
func fail(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "picosim: %s: %v\n", cmd, err)
	return exitCode(err)
}

// signalContext is cancelled, with an *interrupted cause, by the first
// SIGINT or SIGTERM, instead of the signal killing the process: every
// command then stops between runs, removes its temporary directories and
// says it was interrupted. (signal.NotifyContext does the same but its
// cause does not say which signal, which the exit status needs.) A second
// signal kills the process as usual. A signal ignored when picosim started,
// like a background job's SIGINT, stays ignored.
func signalContext() context.Context {
	var sigs []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return context.Background() // signal.Notify without signals would relay every one
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		s := <-ch
		signal.Stop(ch)
		cancel(&interrupted{sig: s})
	}()
	return ctx
}

// interruption is the error of work that a signal cut short, or nil while
// ctx is live.
func interruption(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// environmentErrnos are the system errors that say the machine failed a
// run: its disk is full or read-only or failing, picosim's own files are
// not its to write, the process is out of file descriptors. Picosim writes
// only in directories it made, so none of them is the harness's doing.
var environmentErrnos = []syscall.Errno{
	syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO,
	syscall.EACCES, syscall.EPERM, syscall.EMFILE, syscall.ENFILE,
}

// isEnvironment reports whether err is the machine's failure rather than a
// run's: one of environmentErrnos, or SQLite saying the same. A fault the
// plan injected never is.
func isEnvironment(err error) bool {
	var fe *fault.Error
	if err == nil || errors.As(err, &fe) {
		return false
	}
	for _, n := range environmentErrnos {
		if errors.Is(err, n) {
			return true
		}
	}
	return sqliteEnvironment(err)
}
