// Package fault wraps any storage.Storage and injects the storage faults of
// DESIGN §5 at the commits a Plan selects: hold a constructed commit before
// persistence until released, fail it cleanly, make it uncertain (persisted,
// error returned), crash the process at it, or fail the unlink that retires
// settled tasks' scratch. Every fault is named by its plan, drawn from a seed
// when the plan is random, and written to a Recorder (a *sim.Sim puts it in
// the run's trace) at the moment it fires.
//
// The wrapper stands for one process's handle on durable storage. Over a
// memory store (Wrap) the inner store stands for the durable bytes: a crash
// kills the handle and keeps the inner store, and Reopen is the restarted
// process's new handle on it. Over a file-backed store (WrapDisk) the files
// are the durable bytes: a crash keeps only what was written, optionally
// tearing the crashing batch's line at a seeded offset, and Restart closes
// the dead process's store and opens the files again, so recovery is
// exactly the backend's own replay of the bytes on disk.
//
// # Files
//
//   - commit.go: Commit: counting a commit's ordinals, picking the faults that select it, holding it, and its outcome.
//   - disk.go: Disk and WrapDisk, a store whose durable state is its files, and Restart, which opens them again.
//   - errors.go: the errors a fault makes a call return (injected, uncertain, crashed) and PlanError.
//   - plan.go: Plan and Fault, the kinds of fault and which commit each selects, ParsePlan and RandomPlan.
//   - read.go: reads, which pass through to the inner store and fail on a dead or closed handle.
//   - storage.go: the Storage handle: Wrap, the Recorder and its Firings, Release and WaitHeld, Close, Reopen and death.
//   - tear.go: torn crashes and failed unlinks on disk: cutting the crashing batch's line, putting back unlinked files.
//
// Tests: fault_test.go (each kind of fault over a memory store under the
// simulator, plan JSON and validation, random plans), disk_test.go (torn
// JSONL lines, SQLite crashes, restarts and failed unlinks on disk).
package fault
