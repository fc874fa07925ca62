// Package proc is the simulation's execution environment: fake processes
// that print scripted output at scripted virtual times and end the scripted
// way, and an in-memory file system. It implements agent.ExecutionEnv, so the
// harness's tools run against it unchanged.
//
// Every wait goes through the core.Runtime it is given (Sleep and events),
// never through package time or a bare goroutine, so under the simulated
// runtime each output chunk, kill and exit happens at a virtual time and in
// an order fixed by the seed (DESIGN §5).
//
// # Files
//
//   - fs.go: the file system: a flat map from resolved path to contents; reads, writes and stats are instant.
//   - proc.go: the Env and Exec: a process's chunks at their times, kills and their grace, hangs, crashes, exit codes, and the spill file of an output past ExecOptions.SpillAfter.
//   - script.go: Scripts, the JSON form of what each command does and the files that exist at the start, and its validation.
//
// Tests: proc_test.go (output times, kills, hangs, crashes, unknown commands, spills,
// the file system, strict scripts, determinism across seeds, trace records).
package proc
