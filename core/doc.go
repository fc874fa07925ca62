// Package core is pico's kernel: the commit line and its transactions, the
// kind registry, context derivation and its cache, the driver, the harness
// shell and its handles, scoped hooks, previews and watch. It depends on
// storage and never on a backend.
//
// The kernel names no built-in task kind. It is to pico's kinds what
// database/sql is to its drivers: package core/agent writes the built-in
// kinds, the inbox and the usage record against the exported kind API alone
// (TaskKind and TaskRuntime, Tx and its doors, hooks, reports, the cached
// derived context, batch rules, watched state, extensions), so a plugin kind
// can do anything a built-in does. What the views carry beyond
// the kernel's records (the conversation inbox, the usage feed) and the
// rules a batch must keep beyond the kernel's are registered by whoever
// opens the session (Options.Watched, Options.Rules); core.Open takes plugin
// kinds only, agent.Open adds pico's.
//
// Concurrency contract (DESIGN §5): core never starts a goroutine, reads the
// clock, sleeps or blocks on another goroutine except through Runtime, so the
// same code runs under the real runtime and under the simulated scheduler of
// package sim, where a seed fixes every interleaving.
//
// # Files
//
//   - runtime.go, realtime.go: the Runtime interface every wait goes through,
//     and its real implementation.
//   - line.go: the commit line, one plan at a time; batch rules.
//   - tx.go: Tx, the batch builder with final ids, and ScratchTx; the doors a
//     plan uses (PendingEntry, Busy, MarkForeground, Marshal).
//   - typed.go: typed value and list views inside a transaction.
//   - validate.go: the structural rules of §7.3 that need the transcript, and
//     ValidateBatch for stored batches.
//   - errors.go: rules, CommitError and Rejectf, and the kernel's sentinel and typed errors.
//   - kinds.go: TaskKind, KindFuncs, Statuses and the registry of entry and task kinds.
//   - entries.go: the built-in entry kinds and their append helpers.
//   - context.go: context derivation (§2.2), the system fold and the request projection.
//   - contextcache.go: the per-conversation cache of the derived context and
//     its projection; the Tx doors to it, each held to a fresh derivation
//     under Options.CheckContexts.
//   - driver.go: every driver decision: seeding, ownership links, admission,
//     authority, applying a commit, reserving and completing invocations,
//     drives and waiters, faults and closing; the lifecycle phase and its moves.
//   - handon.go: under the real runtime, a settling invocation's goroutine
//     runs the task its settlement made runnable, instead of waking another.
//   - invariants.go: the check of the driver's indexes after every commit
//     (Options.CheckInvariants).
//   - harness.go: Open and Options, the Harness handle and its reads, abort,
//     close, shutdown and delete.
//   - conversation.go: the Conversation handle (commit, drive, abort, fork,
//     config, hooks) and ConversationTx.
//   - taskruntime.go: TaskRuntime, what one invocation gets, and the Progress bridge.
//   - hooks.go: scoped hook registration, hook runs and chains, HookResult.
//   - preview.go: task previews and their flushes into task outputs.
//   - watch.go: ConversationView, its events and ApplyEvent, the kind-free reducer.
//   - watcher.go: subscriptions: capture on the line, bounded per-commit
//     delivery, resnapshot, and deriving each commit's events.
//   - sessionwatch.go: SessionView, its events and the session watch.
//
// Tests: plugin_test.go (a plugin kind on the exported API alone),
// kindapi_test.go (each door), driver_internal_test.go (the invariant
// checker and phase moves), handon_test.go (handing on under the real
// runtime), and the driver's semantics, the line, contexts
// and the cache, forks, scratch, previews, watch and telemetry.
package core
