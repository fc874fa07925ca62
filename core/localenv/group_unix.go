//go:build unix

package localenv

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// A command runs as the leader of a process group of its own, so that one
// signal to the group reaches everything it started — a pipeline, a
// background job, a grandchild — and nothing else.

func groupAttr() (*syscall.SysProcAttr, error) {
	return &syscall.SysProcAttr{Setpgid: true}, nil
}

// signalGroup sends s to the process group led by pid. A group that is
// already gone is not an error: it has nothing left to stop.
func signalGroup(pid int, s stopSignal) error {
	sig := syscall.SIGTERM
	if s == stopKill {
		sig = syscall.SIGKILL
	}
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// endOf reads how a process ended: its exit status, or 128 + the signal's
// number and the signal's name, as a shell reports a signalled child.
func endOf(ps *os.ProcessState) (code int, signal string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), signalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

// signalNames are the names a shell's kill -l gives, without "SIG". The
// numbers differ between systems, so the table is keyed by syscall's.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT",
	syscall.SIGILL: "ILL", syscall.SIGTRAP: "TRAP", syscall.SIGABRT: "ABRT",
	syscall.SIGBUS: "BUS", syscall.SIGFPE: "FPE", syscall.SIGKILL: "KILL",
	syscall.SIGUSR1: "USR1", syscall.SIGSEGV: "SEGV", syscall.SIGUSR2: "USR2",
	syscall.SIGPIPE: "PIPE", syscall.SIGALRM: "ALRM", syscall.SIGTERM: "TERM",
	syscall.SIGXCPU: "XCPU", syscall.SIGXFSZ: "XFSZ", syscall.SIGSYS: "SYS",
}

// signalName names sig; one without a name (a real-time signal) is its number.
func signalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return strconv.Itoa(int(sig))
}
