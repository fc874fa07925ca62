package agent

import (
	"context"
	"io/fs"
)

// ExecutionEnv is where tools act: a file system and a shell. The host
// supplies a real one; sim/proc supplies a scripted one with fake processes
// and an in-memory file system.
type ExecutionEnv interface {
	// Exec runs command and returns when it exits, is killed, or ctx is
	// done (which kills it). Output arrives through opts.OnUpdate as it is
	// produced. A process that could not be started is an error; a process
	// that ran and failed is a result with a non-zero exit code.
	Exec(ctx context.Context, command string, opts ExecOptions) (ExecResult, error)
	ReadFile(ctx context.Context, path string) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte) error
	// Stat reports a file's size; a missing file is an error wrapping fs.ErrNotExist.
	Stat(ctx context.Context, path string) (FileInfo, error)
}

// ExecOptions configures one Exec.
type ExecOptions struct {
	Cwd string
	Env map[string]string
	// OnUpdate receives output chunks in order, on the calling actor.
	OnUpdate func(OutputChunk)
	// SpillAfter, when positive, asks the environment to keep the whole
	// output in a file of its own once it passes this many bytes, since
	// the caller keeps only a window of it; ExecResult.SpillPath names it.
	SpillAfter int
}

// OutputChunk is one piece of process output.
type OutputChunk struct {
	Stream string `json:"stream"` // "stdout" or "stderr"
	Data   string `json:"data"`
}

// ExecResult is how a process ended.
type ExecResult struct {
	ExitCode int  `json:"exitCode"`
	Killed   bool `json:"killed,omitempty"`
	// Signal names the signal that ended the process ("TERM", "KILL"),
	// when one did.
	Signal string `json:"signal,omitempty"`
	// SpillPath is the file holding the whole output (ExecOptions.SpillAfter).
	SpillPath string `json:"spillPath,omitempty"`
}

// SpillError is what Exec returns beside a valid ExecResult when the
// process ran to its end but its whole output could not be kept
// (ExecOptions.SpillAfter): the result still says how the process ended.
type SpillError struct{ Err error }

func (e *SpillError) Error() string { return "keeping the whole output: " + e.Err.Error() }

func (e *SpillError) Unwrap() error { return e.Err }

// FileInfo describes a file.
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// ErrNotExist is fs.ErrNotExist, for ExecutionEnv implementations.
var ErrNotExist = fs.ErrNotExist
