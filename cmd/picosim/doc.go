// Command picosim runs pico scenarios under the deterministic simulation
// harness. Without arguments it runs the built-in scenario suite over a
// default set of seeds on JSONL (every fifth on SQLite) and exits 1 on any failure. Its commands:
// `list` and `run` (one deterministic run of a scenario), `replay` (re-run a
// trace and report the first line that differs), `fuzz` (explore schedules
// and fault plans in parallel and shrink the runs that fail), `check`
// (validate a JSONL session or a SQLite database without writing to it),
// `bench` (the peer's faux-turn workload), `demo` (the kernel walk-through:
// a turn, a compaction and a fork with derived contexts printed, then a
// seeded sweep of a small task pipeline, every seed run twice and compared
// by trace digest) and `help`.
//
// # Files
//
//   - abortrule.go: the oracles abort-marks-its-foreground-set (a conversation abort, or a fork's, marks the live foreground tasks it reaches through their owners and cancels their conversations' queued steer and followUp, nothing else) and tool-abort-marks-its-children (an aborted call marks the subagents it owns).
//   - answerrule.go: the oracle done-names-its-answer: a done input's result names its generation's final answer.
//   - bench.go: `picosim bench`: the peer's faux-turn workload under the real runtime, reported in the peer's fields.
//   - bench_compare.go: `picosim bench --compare PEER.json`: the peer's lines beside ours as issue 20's ratio table.
//   - bench_counting.go: the store wrapper that counts a bench's queries, rows decoded and commits.
//   - bench_workload.go: the §10.3 workloads, each `picosim bench --workload NAME` and a benchmark.
//   - boundary.go: the provider-boundary scenario (DESIGN §11): a Claude clear while the root answers, then again; any provider's lifecycle events as a hook delivers them.
//   - boundaryrule.go: the oracles boundary-transition (a boundary's commit writes what its kind says; one from a current conversation the host deleted is refused and writes nothing) and boundary-classify (a delivery means what its provider's hooks say).
//   - budgetrule.go: the oracle budget-holds: a session's limits on turns, queries, output tokens, wall clock and tool calls, counted from what the run did.
//   - check.go: `picosim check`: a session's copy replayed under the harness's rules, then its state checked.
//   - collapse.go: the collapse scenarios (§8.4): collapse under a turn, the overflow chain, a stale summary.
//   - conform.go: `picosim conform --port CMD`: the data scenarios run on another port and compared.
//   - contextrule.go: the oracle context-derives-by-the-rule: the context rule (§2.2) derived from own entries and parents alone.
//   - oracles.go also holds an-exchange-hands-off-as-its-tools-ask (one handoff asked for lands first in the post_tools commit; two different ones fail the turn; none asked for, none appended), an-exchange-adds-to-the-selection (the selection before it, or the catalog, then the added tools), state-members-once (a task state names each member once), retry-waits-its-backoff (a rate-limited retry waits the policy's backoff), retry-budget (a rate-limited or interrupted attempt of a generation or collapse retries only within its budget) and writes-land-at-every-boundary (not where a turn is handed over to a collapse).
//   - convrule.go: the oracle conversations-by-the-rule: the conversations listed (whole, by parent, by owner) are those the batches created and did not delete, and each page of the harness's listing says the position it was read at, never before its previous page's.
//   - cutrule.go: the oracle a-summary-keeps-exchanges-whole: a collapse's cut never separates a call from its result.
//   - driverule.go: the oracle a-drive-returns-idle-only-when-idle: a conversation's Drive returns idle only if the conversation had no live foreground task at some commit since it began.
//   - env.go: a scenario's session: backend, fault handle, faux model and tools; reopening, host actions, the verdict; and the oracle reports-have-a-reason (the harness reports only a fault of the session).
//   - exit.go: exit statuses and the errors that pick them (usage, environment, interruption); SIGINT and SIGTERM.
//   - faults.go: reading --faults and --drop, the fault plans the suite and fuzz draw, and failure signatures.
//   - filerule.go: the oracle a-file-tool-does-what-it-says: a read, write or edit call does to the files what its arguments say, and a new_context call asks for the handoff its message names; the generator's file calls (every third seed from 3, shell programs).
//   - files.go: what picosim writes (0600 files, 0700 directories), temporary directories, the session file of a backend.
//   - framerule.go: the oracle frames-replay-the-stream: a generation's durable frames reduce to the answer its attempt ends with (exactly, and streamed, for an answer; a prefix for a failure).
//   - fuzz.go: `picosim fuzz`: seeds explored in parallel, failures shrunk to fewest faults, preemptions and actions.
//   - gc.go: the collector's target simulations run with (GOGC=400 unless the environment sets GOGC; bench keeps Go's default).
//   - help.go: the top-level usage text.
//   - keeprule.go: the oracle collapse-keeps-its-recent-tokens: a manual collapse cuts its context where the conversation's keepRecent puts the cut, derived on its own.
//   - jobs.go: the job scenarios (§8.3, §8.6): a bash call outliving its budget, a schedule across a restart, an abort killing a job.
//   - failhooks.go: failing hooks (hook TARGET fail), a handler failing by an error or a panic at every point that reports and skips a failure, and at before_tool, where it blocks the call (the block rule holds every call it surely ran before to that); the oracle a-failed-hook-is-reported: each failure is reported as a HookError of its task and point before its invocation commits again (every sixth seed from 4 draws them).
//   - hooks.go: the host's hooks (hook and unhook lines): system_instructions and before_tool handlers scoped to the session, a conversation or its subtree, registered again after every reopen; the generator's hook programs.
//   - hookrule.go: the oracles system-follows-its-hooks (an attempt's context tells the model what the hooks that may have run ask for, in handler order), a-call-is-blocked-by-its-hooks, a-call-runs-with-what-its-hooks-made-of-its-arguments (the args hooks that may have run, in handler order, and what an echo tool wrote), a-call-is-offered-as-its-request and a-collapse-follows-its-hooks (declined, summarized and instructed as the before_collapse hooks that may have run say).
//   - systemrule.go: the oracle a-system-entry-says-what-changed: a generation's system entry is the change from the system its context told to the one it tells after it, derived on its own (a baseline only without one, a delta never empty, in place or from the first difference on), and its model message carries that change.
//   - shellrule.go: the oracle a-shell-call-reports-its-job: a bash call or job wait that saw its job end is an error exactly when the job ran badly (killed, lost, crashed, a code but 0), ending with the line that says how, its details as the job settled, and a job tool's stop or status reports the job as it stood; the generator's failing commands (lint, which exits 1).
//   - thresholdrule.go: the oracle collapse-at-the-threshold: a generation's first attempt collapses first exactly when its context's estimate, derived on its own, is over the threshold's budget; the generator's threshold programs.
//   - inboxrule.go: the oracles queued-input-lands-in-order (a commit that lands queued input lands all of each mode it lands, in acceptance order) and cancel-withdraws-queued-input (CancelQueued says what it did: cancelled only an input it withdrew, not found only one that was not queued).
//   - jobrule.go (with the short tool budgets every seventh shell program from 3 draws, which delegate its bash calls): the oracle a-job-ends-as-its-method: an abort settles a job killed, a recover lost (or exited, when it ran again), and the notice in that commit says so; and a-cut-run-has-no-exit-code: a running job killed or lost settles without an exit code, not even an earlier run's.
//   - main.go: command dispatch, flags anywhere among arguments, and `picosim demo`'s kernel walk-through.
//   - meddle.go: the oracles only-its-own-invocation-changes-a-task (even seeds' tools and host try to change others' tasks), a-nested-line-call-is-refused (every tenth seed's tools from 4 commit from inside their own commit's plan), abort-creates-no-work, no-self-wait and no-new-self-wait (their host starts tasks of picosim's own kind, whose abort tries to create work (a task, a conversation, an input) and whose execute to wait for itself, then to give its own child conversation input, which must land, and to drive that child while it commits work there that runs after it), bad-writes-are-refused-by-their-rule (their host tries a commit breaking each rule of the data model, dependencies on the task itself and on a later one of its batch included, and each way to break the agent's input-result rule: a cleared inbox, a result under no input id, one that begins done, an ended one moved back, a queued one skipping to done, a queued input's element removed without its result; text that is not UTF-8, collapse settings out of range) and good-writes-commit (a fork with a head and an edit at its fork point, in one batch, lands; so do collapse settings at the ends of their ranges).
//   - mirror.go: the oracle backends-agree: a disk run's reads asked of a memory store given the same batches, and its cold-opened files swept whole.
//   - neighbour.go: the two neighbour sessions every SQLite run's database starts with, and their rows held after the run; the run's own rows held to leaving none of a key behind.
//   - oracles.go: the oracles every run is held to at each commit and method call (DESIGN §6).
//   - otel.go: `run --otel`: a run's spans written as the SDK's stdout exporter writes them.
//   - program.go: host-action programs (DESIGN §6): drawn from a seed, printed, parsed back, run and shrunk; the oracle a-verb-keeps-the-rules (no rule refuses the commit the harness builds for a host verb: an input, an abort, a cancel, a fork, a delete, a boundary).
//   - progress.go: the progress line long commands write on stderr.
//   - replay.go: `picosim replay`: a trace's run repeated from its header and compared line by line.
//   - receiptrule.go: the oracle a-request-is-accepted-once: a program's request ids, each accepted once and its receipt recovered.
//   - requestrule.go: the oracle request-projects-the-context: what each generation sends its model is its context projected by §3.2's rules, derived from the batches alone.
//   - run.go: `picosim run` and `list`: one deterministic run of a scenario, its trace header and result.
//   - scenario.go: the built-in agent-loop scenarios and the checks each ends with.
//   - show.go, showpage.go: `picosim show`: a trace as a timeline with the actors as columns, or with --html as one self-contained page.
//   - spill.go: the spill tools, whose output overflows its window (every third recipe replacing it midway, every fifth capturing totals measured elsewhere), and the oracle tool-output-window: an output is the window of what its run wrote since its last replace, and a call ends in an error only when its recipe fails or a restart or abort cut it short.
//   - spans.go: the spans every run records, held to DESIGN §9's turn-trace shape: a run whose generations ran traced a turn, a failed turn and a provider call stopped on an error end in error.
//   - settingsrule.go: the settings lines (a kind's configuration written through core.Config and read back whole) and the oracle settings-read-as-the-store-holds-them.
//   - staterule.go: the oracles state-reads-by-the-rule (every value, list and namespace read, at every position and from every fork, derived from the batches alone) and a-fork-carries-its-values (a fork's carried values read as the source has them).
//   - summarizerrule.go: the oracles summarizer-sees-the-prefix (what a collapse sends its summarizer is the prefix it captured, projected as a request is) and summary-keeps-what-follows-the-prefix (a summary's head is the entry after that prefix).
//   - sqlite_cgo.go, sqlite_nocgo.go: whether this build can run SQLite, and SQLite's errors that are the machine's.
//   - subagent.go: the subagent scenarios (§8.5): a run across a restart, a spawned child an abort spares and stop cancels, runs nested to the depth bound.
//   - subagentrule.go: the oracle subagent-answers-for-its-child: each subagent command names its own child, the input it gave or the child's latest, and answers with the entry that ended it; a status lists the child's newest entries; a run or spawn call makes its child once, and is refused for depth exactly at agent.SubagentDepthMax (every thirteenth seed from 11 nests runs that deep); and the oracle a-spawn-is-refused-only-for-bad-options: a host spawn is refused with a SpawnError exactly when its context mode is neither fresh nor inherit (every seventh seed from 5 draws such spawns).
//   - suite.go: the default run: every scenario over seeds 1 to 50, each replayed, even seeds with faults.
//   - sweep.go: the demo's seeded sweep of a three-stage task pipeline, each seed replayed by digest.
//   - failrule.go: the oracle a-failed-generation-keeps-its-answer: a generation that fails after its request appends its model's answer in the settling commit and names it; one that fails before any request, or hands an overflow to a collapse, appends none.
//   - usagerule.go: the oracles usage-row-is-its-attempts (a generation's usage row is its current attempt's, a done one its answer's usage), usage-row-names-its-outcome (done, failed, overflow, stale, retry, interrupted, deferred or aborted, as the commit that records it says) tool-usage-row-is-its-output (a call's settlement records its output's usage, aborted or not), a-retry-follows-a-rate-limit (an execute waits to retry only after its model's answer was a rate limit, as the program served it) and usage-totals-ride-usage-events (a session watch never delivers the totals as a value event).
//   - modelrule.go: the oracle a-generation-asks-the-model-its-conversation-names (a generation captures its conversation's configuration as it is made, a retry its turn's; its requests ask that model with that thinking level; a collapse and its summarizer likewise; a subagent's child holds its parent's).
//   - watchrule.go: the oracle task-update-carries-the-previous-task: a watch's task_update names, as previous, the task as that watch last showed it.
//   - transcriptrule.go: the oracle transcripts-by-the-rule: every transcript scan and newest head, derived from the batches alone.
//
// Tests: run_test.go (scenarios, traces, replay, faults, dropped actions),
// oracles_test.go and mirror_test.go (each oracle rejects a hand-broken
// history and passes it unbroken), neighbour_test.go, contextrule_test.go (the
// rule against the harness on drawn transcripts), staterule_test.go (the state
// and transcript rules against the memory store on drawn sessions, and lying
// stores caught), budgetrule_test.go and boundaryrule_test.go (each rule's
// counts and readings, and programs that run into them), spill_test.go
// (windows by their definition, the rule against hand-broken outputs, and
// programs on every backend), requestrule_test.go (the projection of a
// hand-written transcript, the harness's too, and requests held to it),
// answerrule_test.go (a done result's answer, and what is not one),
// usagerule_test.go (a usage row's attempt, conversation and usage),
// failrule_test.go (failed generations' answers kept, dropped and misnamed),
// failhooks_test.go (hook failures reported, and reports that answer none),
// cutrule_test.go (summaries that split an exchange, and that do not),
// summarizerrule_test.go (summarizer requests held to their prefix),
// convrule_test.go (stores that still list a deleted conversation caught),
// receiptrule_test.go (second acceptances caught, and refused across a
// restart and a fork), watchrule_test.go (task_update events with a wrong
// previous task caught, after captures and resnapshots),
// fuzz_test.go (planted bugs found and shrunk), check_test.go, bench_test.go,
// gc_test.go (GOGC wins over picosim's target),
// main_test.go (the demo's golden output), binary_test.go (the built command
// and its help texts against testdata), failmodes_test.go (picosim's own
// failure modes through the built command: full disks, unusable TMPDIRs,
// damaged traces, signals, argument mistakes), kill_test.go (a bench killed
// with SIGKILL leaves a session that checks clean).
package main
