// Package localenv is the real execution environment: commands run as
// processes under /bin/sh on this machine, and files are read and written
// on disk, confined to a root directory. It implements agent.ExecutionEnv,
// the host's counterpart of sim/proc's scripted one.
//
// A command runs in a process group of its own, so that cancelling it
// (SIGTERM, then SIGKILL after a grace) stops everything it started, down
// to grandchildren. Its output is read by one goroutine per stream and
// handed over a bounded channel to the goroutine that called Exec, which
// alone calls OnUpdate: the caller's actor never sees a concurrent call.
// Output past the caller's window is kept whole in a private spill file.
//
// It is the one part of core exempt from DESIGN §5's concurrency contract
// (core's TestCoreKeepsTheConcurrencyContract says so): it runs real
// processes, which os/exec reads and waits for on goroutines of its own,
// and real time bounds their kill grace. Under the simulator, sim/proc
// takes its place.
//
// Confinement resolves every path, symlinks included, before it is used,
// and refuses one outside the root with an *EscapeError; it keeps the file
// tools inside the root, not a command, which can reach whatever the user
// can.
//
// # Files
//
//   - env.go: Env, New and its Options (kill grace, spill directory), RootError, file modes.
//   - path.go: resolving a path inside the root, dangling symlinks, EscapeError.
//   - fs.go: ReadFile, WriteFile and Stat.
//   - exec.go: Exec: the shell, its cwd and environment, the delivery loop, cancellation, how it ended.
//   - output.go: the stream readers, their bounds, and chunks that do not cut a UTF-8 sequence.
//   - spill.go: keeping the whole output once it outgrows SpillAfter, and the spill directory.
//   - group_unix.go: process groups, group signals, exit statuses and signal names.
//   - group_other.go: the same elsewhere, where Exec refuses to run (errors.ErrUnsupported).
//
// Tests: localenv_test.go (output order per stream and on the calling
// goroutine, cwd and environment, exit statuses and foreign signals, start
// failures, killing a group with its grandchildren, SIGKILL after the grace,
// returning while a leftover process holds the output, spill files and
// their modes, paths escaping the root by "..", absolute paths and
// symlinks, file round trips and modes, New's root), output_internal_test.go
// (where a chunk may end in UTF-8).
package localenv
