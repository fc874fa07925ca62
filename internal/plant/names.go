package plant

// names are the planted bugs, each a plausible mistake in one part of the
// harness (the file that holds it in parentheses):
//
//   - driver-abort-while-running (core/driver.go): an abort mark starts the
//     abort invocation while the execute it marked still runs.
//   - abort-spares-recover (core/driver.go): an abort mark cancels a
//     running execute but not a running recover.
//   - wait-for-ended-task-registers (core/driver.go): WaitForTask on a
//     task that already ended waits for it to end, until its budget.
//   - line-admits-marked (core/driver.go, admission): a marked execute's
//     writes are admitted.
//   - driver-idle-early (core/driver.go): a conversation whose one live
//     foreground task waits on a dependency counts as idle.
//   - driver-forgets-dependents (core/driver.go): a settled task does not
//     wake the tasks that run after it.
//   - watch-drops-event (core/watcher.go): a commit's last event is lost
//     when it has more than two.
//   - watch-previous-is-next (core/watcher.go): a task_update event
//     carries the updated task as its previous one too.
//   - watch-previous-skips-batch (core/watcher.go): a task_update's
//     previous task ignores what earlier writes of its own commit did.
//   - watch-tail-off-by-one (core/watch.go, ApplyEvent): the fold keeps
//     one entry more than the view's tail.
//   - watch-tail-zero-unbounded (core/watch.go, ApplyEvent): a view whose
//     tail is 0 folds every entry instead of none.
//   - watch-capture-unflushed-preview (core/watcher.go): a watch's capture
//     shows a task's preview as its producer holds it mid-window, not as
//     the flushes published it.
//   - context-cache-keeps-aborted (core/contextcache.go): a request
//     projected from the cache keeps an aborted assistant message.
//   - context-cache-system-unscanned (core/contextcache.go): a context
//     derived again (after a head) starts its system fold past as many
//     entries as the old one had folded.
//   - request-baseline-in-place (core/context.go): a request leaves the
//     baseline system message where it stands instead of first.
//   - request-keeps-failed-answer (core/contextcache.go): a request keeps
//     an assistant message that ended in an error.
//   - request-skips-missing-result (core/contextcache.go): a request
//     supplies no result for a call that has none.
//   - context-edit-oldest-wins (core/context.go): of two edits of one
//     entry, the older wins.
//   - context-keeps-old-heads (core/context.go): the context keeps the
//     heads of its range other than the newest.
//   - usage-row-attempt-from-zero (core/agent/generation.go): a
//     generation's usage rows number its attempts from zero.
//   - input-done-names-placement (core/agent/generation.go): a done
//     input's result names its placement entry, not its answer.
//   - request-id-per-conversation (core/agent/inbox.go): a request id
//     already accepted in one conversation is accepted again in another.
//   - inbox-cancel-placed (core/agent/inbox.go): cancel-queued cancels an
//     input that already landed.
//   - inbox-steer-stays-queued (core/agent/inbox.go): a landed steer stays
//     in the inbox.
//   - posttools-two-successors (core/agent/posttools.go): steering that
//     joins at post_tools starts a second generation of its own.
//   - posttools-terminate-last-only (core/agent/posttools.go): a tool's
//     terminate ends the turn only when it is the exchange's last call.
//   - posttools-joins-followup (core/agent/posttools.go): followUp input
//     joins the running group at post_tools, as steer does.
//   - posttools-handoff-after-input (core/agent/posttools.go): a tool's
//     handoff head lands after the input placed at the same boundary.
//   - addtools-from-empty (core/agent/posttools.go): a tool's addTools on a
//     conversation with no selection yet selects only the added tools.
//   - abort-cancels-next-run (core/agent/inbox.go): a conversation abort
//     cancels queued nextRun input too.
//   - generation-retry-past-budget (core/agent/generation.go): a
//     rate-limited attempt retries once more after the last one.
//   - continuation-joins-followup (core/agent/generation.go): an on_yield
//     continuation takes queued followUp input into the turn, as steer.
//   - generation-poll-no-interval (core/agent/generation.go): a deferred
//     answer whose handle names no poll interval is polled at once.
//   - generation-fail-keeps-writes (core/agent/generation.go): a failed
//     turn leaves the writes queued behind it for a later boundary.
//   - generation-fail-forgets-inputs (core/agent/generation.go): a failed
//     generation leaves its input group running.
//   - collapse-publishes-stale (core/agent/collapse.go): a summary lands
//     though a newer head did first.
//   - collapse-stale-ignores-handoff (core/agent/collapse.go): a handoff
//     that lands while a collapse summarizes does not make it stale.
//   - memory-forks-list-deleted (storage/memory/read.go): the forks of a
//     conversation listed by Parent include deleted ones.
//   - sqlite-scan-lists-deleted (storage/sqlite/read.go): a whole scan of
//     the session's conversations lists deleted ones.
//   - state-merge-keeps-both (core/jsonmerge.go): a patch member that
//     replaces one of the state's is written beside it, not instead.
//   - fork-point-hidden-in-batch (core/validate.go): to a fork made in
//     the same batch, the entry it was forked at is not visible.
//   - dependency-on-itself (core/validate.go): a task may run after
//     itself.
//   - summary-keeps-from-through (core/agent/collapse.go): a summary's
//     head is the last entry it summarized, not the first one kept.
//   - retry-backoff-one-behind (core/agent/generation.go): a rate-limited
//     generation waits the backoff of the attempt before the one that failed.
//   - summarizer-misses-newest (core/agent/collapse.go): the summarizer
//     is not sent the last message of the prefix it summarizes.
//   - summarizer-drops-instructions (core/agent/collapse.go): a manual
//     collapse's instructions never reach the summarizer.
//   - tool-recover-replays-never (core/agent/tool.go): a call interrupted
//     by a restart runs again even when its tool is never replayed.
//   - abort-spares-follow-up (core/agent/inbox.go): a conversation abort
//     leaves queued followUp input queued.
//   - abort-marks-background (core/driver.go): a conversation abort marks
//     background tasks too.
//   - abort-stops-at-owners (core/driver.go): a conversation abort marks
//     only the conversation's own tasks, not those of the conversations
//     its live foreground tasks own.
//   - tool-abort-spares-children (core/agent/tool.go): an aborted call
//     leaves the subagents it runs working.
//   - recover-retries-past-budget (core/agent/generation.go): a
//     generation a restart interrupted before anything streamed retries
//     its last attempt.
//   - tool-abort-spares-job (core/agent/tool.go): an aborted call leaves
//     the job it still owns running.
//   - job-notices-twice (core/agent/job.go): delegating a live job appends
//     its notice at once as well as when it ends.
//   - subagent-replay-respawns (core/agent/subagent.go): a replayed run
//     makes its child again.
//   - subagent-reaches-any-child (core/agent/subagent.go): a subagent
//     command reaches any conversation's child, not only the caller's.
//   - budget-wall-clock-at-limit (core/agent/budget.go): a query that
//     starts exactly when the wall-clock limit runs out still goes.
//   - subagent-send-keeps-last-input (core/agent/subagent.go): send
//     leaves the child's latest input as it was, so a wait after it waits
//     for the input before.
//   - subagent-status-oldest (core/agent/subagent.go): status lists the
//     child's oldest entries instead of its newest.
//   - subagent-answers-its-input (core/agent/subagent.go): run and wait
//     answer with the entry that placed the input, not the one that
//     ended it.
//   - job-tool-any-conversation (core/agent/jobtools.go): the job tool
//     reads and stops another conversation's job.
//   - job-recover-kills (core/agent/job.go): a job a restart interrupted,
//     which may not run again, settles killed instead of lost.
//   - job-notice-says-exited (core/agent/job.go): the notice of a job
//     lost or killed says it exited.
//   - sink-replace-keeps-totals (core/agent/sink.go): a Replace keeps the
//     totals of what it replaced.
//   - sink-capture-only-when-truncated (core/agent/sink.go): captured
//     totals count only when the retained text was itself truncated.
//   - tool-abort-drops-usage (core/agent/tool.go): a call that ends other
//     than done records no usage row.
//   - sink-usage-keeps-first (core/agent/sink.go): a tool output's usage is
//     its first report alone, not the sum of them.
//   - collapse-keeps-a-unit-more (core/agent/collapse.go): a collapse
//     keeps one unit more than keepRecent has room for.
//   - inbox-lands-newest-first (core/agent/inbox.go): a boundary lands
//     queued input newest first.
//   - inbox-lands-one-per-mode (core/agent/inbox.go): a boundary lands
//     one queued input of each mode and leaves the rest queued.
//   - hook-subtree-ignored (core/hooks.go): a conversation's hook applies
//     to the conversations it owns without its subtree.
//   - hook-order-own-first (core/hooks.go): a conversation's own handlers
//     run before those of the conversations that own it.
//   - hook-off-removes-newest (core/hooks.go): removing a hook removes the
//     newest registration instead of its own.
//   - system-sections-append-only (core/agent/system.go): a system delta
//     appends new sections where the hooks put them earlier.
//   - system-tool-redefined-kept (core/agent/system.go): a tool whose
//     definition a hook changed is not told again.
//   - hook-block-takes-last (core/agent/tool.go): the last before_tool
//     handler that blocks gives the reason, not the first.
//   - tool-offered-by-selection (core/agent/generation.go): a call is
//     offered when the selection has its tool, whatever the request sent.
//   - estimate-skips-results (core/agent/estimate.go): the context
//     estimate leaves tool results out.
//   - estimate-anchor-before-head (core/agent/estimate.go): the estimate
//     starts from the usage of an answer the head retained.
//   - threshold-twice-the-budget (core/agent/generation.go): a generation
//     collapses first only past twice the threshold's budget.
//   - collapse-decline-overridden (core/agent/collapse.go): a
//     before_collapse handler after one that declined can take the
//     decline back.
//   - collapse-instructions-first-wins (core/agent/collapse.go): the first
//     handler's instructions stand, not the last's.
//   - collapse-host-instructions-override (core/agent/collapse.go): the
//     host's instructions for a collapse replace its hooks'.
//   - request-hooks-see-original (core/agent/generation.go): each
//     before_request handler sees the request as the generation built it,
//     and the last one's answer is sent.
//   - collapse-manual-keeps-default (core/agent/collapse.go): a manual
//     collapse keeps the default keepRecent, not the conversation's.
//   - sink-tail-line-too-many (core/agent/sink.go): a tool output's tail
//     window keeps one line more than its limit.
//   - sink-truncated-by-lines-only (core/agent/sink.go): an output is
//     marked truncated only when lines were dropped, not bytes alone.
//   - memory-sticky-remove-lost (storage/memory): removing an element of a
//     sticky list with more than one element does nothing.
//   - jsonl-replay-drops-last (storage/jsonl): reopening drops the main
//     file's last batch.
//   - jsonl-torn-tail-kept (storage/jsonl): a torn final line is reported
//     but not cut, so the next append lands after it.
//   - jsonl-replay-drops-after (storage/jsonl): reopening loses the tasks'
//     dependencies (what each runs after).
//   - jsonl-publish-before-write (storage/jsonl): a commit publishes its
//     batch before writing its line, and keeps it published when the
//     write fails.
//   - jsonl-failed-write-kept (storage/jsonl): a write that fails midway
//     (a full disk) is not cut back: its prefix stays in the file.
//   - memory-fork-cap-ignores-reader (storage/memory): a historical read
//     of a fork sees its source's state through the fork point even when
//     it reads at an earlier position.
//   - memory-version-at-cap-hidden (storage/memory): a historical read
//     does not see a rewindable value's version written at exactly the
//     position it reads at.
//   - memory-remove-own-level-only (storage/memory): a fork's read of a
//     rewindable list applies only its own removes, not those its sources
//     wrote before the fork point.
//   - memory-window-ignores-before (storage/memory): a forward scan with
//     both After and Before reads past Before.
//   - memory-kind-filter-own-level-only (storage/memory): a fork's
//     transcript scanned by kind holds only its own entries of the kind.
//   - memory-fork-scan-past-fork-point (storage/memory): a fork's
//     transcript scan holds its source's entries after the fork point.
//   - memory-head-inherited-uncapped (storage/memory): a fork's newest
//     head may be one its source wrote after the fork point.
//   - sqlite-clear-spares-inherited (storage/sqlite): a clear of a fork's
//     rewindable list hides only the fork's own elements, not those it
//     inherited.
//   - sqlite-list-backward-oldest (storage/sqlite): a backward page of a
//     list without history (session, sticky, scratch) holds its oldest
//     elements, not those just before the cursor.
//   - budget-turns-off-by-one (core/agent): a session limited to N turns
//     starts N+1.
//   - budget-turns-refused-early (core/agent): a session limited to N
//     turns refuses the Nth.
//   - budget-retries-free (core/agent): a retried query does not count
//     against the query limit.
//   - budget-output-off-by-one (core/agent): a session limited to N
//     output tokens still queries with exactly N spent.
//   - budget-wall-clock-restarts (core/agent): the wall-clock budget runs
//     from each turn's start, not the session's first use.
//   - budget-tool-calls-off-by-one (core/agent): a session limited to N
//     tool calls runs N+1.
//   - budget-spend-output-only (core/agent): the spend limit counts only
//     what the output tokens cost.
//   - budget-spend-retries-free (core/agent): a retried query is not held
//     to the spend limit.
//   - usage-totals-cost-not-summed (core/agent/models.go): the usage
//     totals' cost is the newest row's, not the sum of the rows'.
//   - after-response-skips-calls (core/agent/generation.go): an answer
//     that calls tools is not shown to the after_response handlers.
//   - after-response-no-usage (core/agent/generation.go): the
//     after_response handlers are shown no usage.
//   - args-first-failure-only (core/agent/schema.go): a call refused for
//     its arguments is told only the first failing location.
//   - args-pointer-unescaped (core/agent/schema.go): a failing location's
//     JSON pointer leaves "~" and "/" in member names unescaped.
//   - inherit-cut-at-failed-answer (core/agent/subagent.go): an inherited
//     context is cut at a failed or aborted answer with calls, as if it
//     were the exchange in flight.
//   - inherit-keeps-system (core/agent/subagent.go): an inherited context
//     keeps the parent's system entries.
//   - spawn-fresh-inherits (core/agent/subagent.go): a child spawned fresh
//     inherits its parent's context.
//   - independent-page-never-continues (core/harness.go, Conversations):
//     a page of the conversations owned by nobody never says another
//     follows.
//   - independent-backward-unreversed (core/harness.go, Conversations): a
//     backward page of the conversations owned by nobody takes the scan's
//     pages in ascending order.
//   - preview-reads-unflushed (core/preview.go): Harness.Preview reads a
//     task's preview as its producer holds it mid-window, not as the last
//     flush published it.
//   - schedule-lost-run-settles (core/agent/job.go): a schedule's run a
//     restart lost settles the schedule lost instead of planning its next.
//   - schedule-next-from-end (core/agent/job.go): a schedule's next run is
//     due an interval after the last one ended, off its grid.
//   - job-first-run-undelayed (core/agent/job.go): a job's first run
//     starts at once, before the time it is due.
//   - job-output-drops-last-chunk (core/agent/jobtools.go): a running
//     job's output, read for a UI or the job tool, leaves out its newest
//     chunk.
//   - read-offset-zero-based (core/agent/tools_builtin.go): the read
//     tool's offset counts lines from zero.
//   - write-appends (core/agent/tools_builtin.go): the write tool appends
//     to an existing file instead of replacing it.
//   - edit-allows-many (core/agent/tools_builtin.go): the edit tool
//     replaces the first of several occurrences instead of refusing.
//   - inherit-head-read-as-answer (core/agent/subagent.go): a head whose
//     messages begin with an answer is cut from an inherited context as
//     the exchange in flight.
//   - drive-own-scope-allowed (core/driver.go): a foreground task may
//     drive its own conversation, and waits for itself.
//   - prompt-returns-placement (core/agent/inbox.go): Prompt answers with
//     the entry that placed its input, not the one that ended it.
//   - conv-tx-remove-unbound (core/conversation.go): a conversation's
//     commit removes a list element at the address as given, unbound.
//   - snapshot-drops-parent (core/conversation.go): a conversation's
//     Snapshot leaves out where it was forked from.
//   - value-handle-at-now (core/handles.go): a value handle's read at a
//     position reads the current value.
//   - list-handle-read-ignores-at (core/handles.go): a list handle's page
//     read at a position reads the list as it is now.
//   - batch-map-spill-keeps-newest (storage/batchmap.go): a batch's small
//     map, grown past sixteen pairs, keeps only the pair that grew it.
//   - state-policy-change-allowed (storage/check.go): a batch may write a
//     state with the other rewind policy than it is stored with.
//   - remove-twice-allowed (storage/check.go): a batch may remove the same
//     list element twice.
//   - reorder-applied-inverse (core/delta/apply.go): a reorder puts each
//     element at the place its perm entry names, the inverse permutation.
//   - splice-clamp-keeps-last (core/delta/apply.go): a splice that removes
//     to the end of an array keeps its last element.
//   - delete-key-keeps-null (core/delta/apply.go): deleting an object key
//     leaves it null.
//   - stale-preview-read-unrebuilt (core/preview.go): a preview its task
//     left alone while nobody watched is read without rebuilding it.
//   - jsonl-parse-ahead-skips-short (storage/jsonl/lines.go): a parsing
//     worker skips one line too few of each chunk another worker parses.
//   - jsonl-parse-ahead-drops-last-chunk (storage/jsonl/lines.go): a
//     parsing worker never hands over the file's last chunk.
//   - job-notice-stopped-when-exited (core/agent/job.go): the notice of a
//     job that exited tells the model it was stopped.
//   - collapse-candidate-unread (core/agent/collapse.go): a collapse reads
//     its durable candidate summary as absent, so a recovery asks again.
//   - collapse-returns-no-task (core/agent/collapse.go): a host's Collapse
//     starts the collapse but returns task 0.
//   - capture-says-faulted (core/watcher.go): a watch's capture of a
//     conversation says the session faulted, though it did not.
//   - job-notice-drops-output (core/agent/job.go): the notice of a job's
//     end leaves out the end of its output.
//   - watch-default-bound-tiny (core/watcher.go): a session without a
//     WatchQueueMax bounds a watch's queue at two commits, not 1,024.
//   - system-section-text-unchanged (core/agent/system.go): a system
//     section whose text changes in place is never told again.
//   - write-drops-data (core/agent/inbox.go): an entry a host writes
//     lands without its data.
//   - system-tool-readded-unchanged (core/agent/system.go): every system
//     delta adds every tool again, changed or not.
//   - system-message-drops-removed-tools (core/agent/system.go): a system
//     entry's model message leaves out the tools it removes.
//   - job-exited-reported-stopped (core/agent/jobtools.go): a bash call or
//     job wait that saw its job exit tells the model the job was stopped.
//   - job-exit-code-ignored (core/agent/jobtools.go): a bash call or job
//     wait whose job exited with a code but 0 is no error.
//   - edit-replace-refused (storage/check.go): a batch with a context edit
//     that replaces an entry is refused as of an unknown action.
//   - classify-previous-is-self (core/boundary): a boundary names the
//     provider session it binds as the one before it, though the launch
//     was already bound to it.
//   - job-stop-ended-stops-again (core/agent/jobtools.go): the job tool's
//     stop of a job that was killed or lost says it is stopping it.
//   - read-range-said-at-end (core/agent/tools_builtin.go): a read that
//     shows a file to its last line still says which lines it showed.
//   - subagent-send-status-inverted (core/agent/subagent.go): a send
//     reports the input it gave queued when it was placed at once, and
//     running when it was queued.
//   - subagent-wait-finds-no-input (core/agent/subagent.go): a wait
//     refuses a child that was given input as having none to wait for.
//   - subagent-answer-unread (core/agent/subagent.go): a run or wait whose
//     input ended done cannot read its answer and refuses.
//   - new-self-wait-allowed (core/driver.go): a batch may create
//     foreground work that a waiting drive waits for and that depends on
//     the driving task.
//   - drive-dependent-scope-allowed (core/driver.go): a task may drive a
//     scope whose foreground tasks depend on it.
//   - fork-carry-at-fork-point (core/conversation.go): a fork carries a
//     rewindable value as the source had it at the fork point.
//   - fork-carry-skips-sticky (core/conversation.go): a fork carries no
//     sticky value.
//   - frame-delta-untrimmed (core/ai/frame.go): a text delta is framed
//     whole though the block's start showed part of it.
//   - frame-start-content-dropped (core/ai/frame.go): a text start frame
//     leaves out what the start showed.
//   - frame-checkpoint-last-delta-only (core/ai/frame.go): a tool call's
//     catch-up checkpoint holds only the delta that caught up.
//   - conv-tx-binds-session (core/conversation.go): a conversation's
//     commit binds a session address to the conversation.
//   - reduce-call-keeps-streamed-arguments (core/ai/frame.go): reducing
//     frames keeps a tool call's arguments as its deltas spelled them.
//   - tracker-always-replaces (core/delta/tracker.go): every flush of a
//     preview is the whole value, never the change.
//   - sink-usage-keeps-last (core/agent/sink.go): a tool output's usage is
//     the last it reported, not the sum.
//   - hook-cancellation-is-a-failure (core/hooks.go): a hook handler's
//     cancellation is taken as the hook's failure and reported.
//   - entry-model-utf8-unchecked (core/tx.go): an entry's model messages
//     may hold text that is not UTF-8.
//   - collapse-threshold-zero-refused (core/agent/collapse.go): a collapse
//     threshold of 0 (off) is refused as out of range.
//   - delete-refuses-idle (core/harness.go): a delete is refused as if the
//     conversation's subtree had live tasks, whatever it has.
//   - input-refused-from-any-invocation (core/agent/inbox.go): input a
//     task's execute gives is refused as if an abort gave it.
//   - abort-may-queue-input (core/agent/inbox.go): an abort invocation may
//     queue input.
//   - subagent-depth-off-by-one (core/agent/subagent.go): a child at the
//     depth bound may still run a subagent of its own.
//   - subagent-depth-one-level (core/agent/subagent.go): a child's depth
//     counts only its first owner.
//   - session-watch-drops-values (core/sessionwatch.go): a session watch
//     never receives the changes of the values it follows.
//   - tool-limits-retain-unread (core/agent/statejson.go): a tool state's
//     fast read leaves its output limits' retain unread.
//   - generation-after-collapse-unwritten (core/agent/statejson.go): a
//     generation state's hand-written encoding leaves out the collapse it
//     follows.
//   - message-tool-name-unread (core/ai/decode.go): a message's fast read
//     leaves a tool result's tool name unread.
//   - hint-keeps-first-key (core/delta/apply.go): a tracker's window
//     remembers only the first key it wrote of each object, so its flush
//     leaves the others' changes out.
//   - input-queued-skips-to-done (core/agent/rules.go): the input-result
//     rule lets a queued input's result skip to done.
//   - inbox-remove-unresulted (core/agent/rules.go): the input-result
//     rule lets an inbox element leave without its result.
//   - system-reorder-from-start (core/agent/system.go): a system delta
//     that reorders sections removes and adds again every kept one, not
//     only those from the first difference on.
//   - boundary-repeat-rebinds (core/boundary): a repeated delivery of a
//     provider session's boundary applies it again.
//   - boundary-clear-keeps-current (core/boundary): a clear does not make
//     its new conversation current.
//   - boundary-fork-at-start (core/boundary): a provider fork forks the
//     current conversation at its start, not at its newest entry.
//   - classify-compact-ignores-new-id (core/boundary): a compaction
//     event naming a provider session other than the bound one is a
//     compaction, not the resume Gemini's silent /resume is.
//   - classify-repeated-clear-clears (core/boundary): a repeated clear of
//     the bound provider session is classified a clear again.
//   - classify-codex-new-rebinds (core/boundary): Codex's startup with a
//     new session id (its /new) rebinds instead of clearing.
//   - sqlite-memo-survives-rollback (storage/sqlite): a commit that rolls
//     back keeps in its memo what its writes did, and reads answer it.
//   - sqlite-seq-before-commit (storage/sqlite): a commit moves the
//     store's last sequence before its COMMIT, and keeps it moved when the
//     COMMIT fails.
//   - sqlite-scan-ignores-through (storage/sqlite): a transcript scan
//     bounded above returns the entries past its bound too.
//   - sqlite-head-uncapped (storage/sqlite): a fork's newest head is looked
//     up past the fork point in its source conversation.
//   - usage-totals-skip-failed (core/agent/models.go): the usage totals
//     leave out the known usage of attempts that did not end done.
//   - edit-target-unchecked (core/validate.go): an entry may edit an id
//     that is no earlier visible entry.
//   - head-backwards-allowed (core/validate.go): a head may start before
//     the visible head's boundary.
//   - state-after-entry-allowed (core/tx.go): rewindable state may follow
//     an entry in one commit.
//   - dependency-any-tree (core/validate.go): a task may depend on a task
//     of another ownership tree.
//   - patch-may-end-a-task (core/tx.go): a patch may move a task to a
//     terminal status, bypassing its settlement.
//   - wait-for-self-allowed (core/driver.go): a task may wait for itself
//     (until its budget runs out).
//   - abort-may-create (core/driver.go): an abort invocation may create
//     tasks and conversations.
//   - line-authorizes-any-invocation (core/driver.go): any task's
//     invocation may change any task's status and state and settle it.
//   - sqlite-last-seq-any-session (storage/sqlite): opening a session reads
//     the first last sequence the database holds, whichever session's.
//   - sqlite-live-tasks-any-session (storage/sqlite): a scan of live tasks
//     returns other sessions' too.
var names = []string{
	"driver-abort-while-running", "abort-spares-recover", "wait-for-ended-task-registers", "line-admits-marked", "driver-idle-early", "driver-forgets-dependents",
	"watch-drops-event", "watch-previous-is-next", "watch-previous-skips-batch", "watch-tail-off-by-one", "watch-tail-zero-unbounded", "watch-capture-unflushed-preview",
	"context-cache-keeps-aborted", "context-cache-system-unscanned", "context-edit-oldest-wins", "context-keeps-old-heads",
	"request-baseline-in-place", "request-keeps-failed-answer", "request-skips-missing-result", "inbox-cancel-placed", "inbox-lands-newest-first", "inbox-lands-one-per-mode", "inbox-steer-stays-queued", "request-id-per-conversation", "input-done-names-placement", "usage-row-attempt-from-zero",
	"posttools-two-successors", "posttools-terminate-last-only", "posttools-joins-followup", "posttools-handoff-after-input", "addtools-from-empty",
	"abort-cancels-next-run", "generation-retry-past-budget", "continuation-joins-followup", "generation-poll-no-interval", "generation-fail-keeps-writes",
	"generation-fail-forgets-inputs", "collapse-publishes-stale", "collapse-keeps-a-unit-more", "collapse-manual-keeps-default", "collapse-stale-ignores-handoff",
	"summarizer-misses-newest", "summarizer-drops-instructions", "memory-forks-list-deleted", "sqlite-scan-lists-deleted",
	"state-merge-keeps-both", "fork-point-hidden-in-batch", "dependency-on-itself",
	"summary-keeps-from-through", "retry-backoff-one-behind",
	"abort-spares-follow-up", "abort-marks-background", "abort-stops-at-owners", "tool-abort-spares-children",
	"recover-retries-past-budget",
	"tool-recover-replays-never", "tool-abort-spares-job", "sink-tail-line-too-many", "tool-abort-drops-usage", "sink-usage-keeps-first", "sink-replace-keeps-totals", "sink-capture-only-when-truncated", "sink-truncated-by-lines-only", "job-notices-twice", "subagent-replay-respawns", "subagent-reaches-any-child", "job-tool-any-conversation", "job-recover-kills", "job-notice-says-exited",
	"subagent-send-keeps-last-input", "subagent-status-oldest", "subagent-answers-its-input",
	"hook-subtree-ignored", "hook-order-own-first", "hook-off-removes-newest", "system-sections-append-only", "system-tool-redefined-kept", "hook-block-takes-last", "tool-offered-by-selection",
	"estimate-skips-results", "estimate-anchor-before-head", "threshold-twice-the-budget",
	"collapse-decline-overridden", "collapse-instructions-first-wins", "collapse-host-instructions-override", "request-hooks-see-original",
	"memory-sticky-remove-lost", "jsonl-replay-drops-last", "jsonl-torn-tail-kept", "jsonl-replay-drops-after",
	"jsonl-publish-before-write", "jsonl-failed-write-kept", "sqlite-memo-survives-rollback", "sqlite-seq-before-commit",
	"sqlite-scan-ignores-through", "sqlite-head-uncapped", "sqlite-last-seq-any-session", "sqlite-live-tasks-any-session",
	"usage-totals-skip-failed", "line-authorizes-any-invocation", "abort-may-create", "wait-for-self-allowed",
	"edit-target-unchecked", "head-backwards-allowed", "state-after-entry-allowed", "patch-may-end-a-task",
	"dependency-any-tree", "memory-fork-cap-ignores-reader", "memory-version-at-cap-hidden", "memory-remove-own-level-only",
	"sqlite-clear-spares-inherited", "memory-window-ignores-before",
	"sqlite-list-backward-oldest", "budget-turns-off-by-one", "budget-turns-refused-early", "budget-retries-free", "budget-tool-calls-off-by-one", "budget-output-off-by-one", "budget-wall-clock-restarts", "budget-wall-clock-at-limit",
	"budget-spend-output-only", "budget-spend-retries-free", "usage-totals-cost-not-summed",
	"after-response-skips-calls", "after-response-no-usage",
	"args-first-failure-only", "args-pointer-unescaped",
	"inherit-cut-at-failed-answer", "inherit-keeps-system", "spawn-fresh-inherits",
	"independent-page-never-continues", "independent-backward-unreversed", "preview-reads-unflushed",
	"schedule-lost-run-settles", "schedule-next-from-end", "job-first-run-undelayed", "job-output-drops-last-chunk",
	"read-offset-zero-based", "write-appends", "edit-allows-many", "inherit-head-read-as-answer",
	"drive-own-scope-allowed", "prompt-returns-placement",
	"boundary-repeat-rebinds", "boundary-clear-keeps-current", "boundary-fork-at-start",
	"memory-kind-filter-own-level-only", "memory-fork-scan-past-fork-point", "memory-head-inherited-uncapped",
	"classify-compact-ignores-new-id", "classify-repeated-clear-clears", "classify-codex-new-rebinds",
	"conv-tx-remove-unbound", "snapshot-drops-parent", "value-handle-at-now", "list-handle-read-ignores-at",
	"batch-map-spill-keeps-newest", "state-policy-change-allowed", "remove-twice-allowed",
	"reorder-applied-inverse", "splice-clamp-keeps-last", "delete-key-keeps-null",
	"stale-preview-read-unrebuilt", "jsonl-parse-ahead-skips-short", "jsonl-parse-ahead-drops-last-chunk",
	"job-notice-stopped-when-exited", "collapse-candidate-unread", "collapse-returns-no-task", "capture-says-faulted",
	"job-notice-drops-output", "watch-default-bound-tiny", "system-section-text-unchanged",
	"write-drops-data", "system-tool-readded-unchanged", "system-message-drops-removed-tools", "system-reorder-from-start",
	"input-queued-skips-to-done", "inbox-remove-unresulted", "job-exited-reported-stopped", "job-exit-code-ignored",
	"classify-previous-is-self", "edit-replace-refused",
	"job-stop-ended-stops-again", "read-range-said-at-end",
	"subagent-send-status-inverted", "subagent-wait-finds-no-input",
	"subagent-answer-unread", "new-self-wait-allowed", "drive-dependent-scope-allowed",
	"fork-carry-at-fork-point", "fork-carry-skips-sticky", "frame-delta-untrimmed", "frame-start-content-dropped",
	"frame-checkpoint-last-delta-only", "conv-tx-binds-session",
	"reduce-call-keeps-streamed-arguments", "tracker-always-replaces", "sink-usage-keeps-last",
	"hook-cancellation-is-a-failure", "entry-model-utf8-unchecked", "collapse-threshold-zero-refused",
	"delete-refuses-idle", "input-refused-from-any-invocation", "abort-may-queue-input",
	"subagent-depth-off-by-one", "subagent-depth-one-level", "session-watch-drops-values",
	"tool-limits-retain-unread", "generation-after-collapse-unwritten", "message-tool-name-unread",
	"hint-keeps-first-key", "before-tool-empty-clears-args", "posttools-conflict-settles-done",
	"entry-model-kept-as-given", "config-get-first-only", "check-drive-never-refuses",
	"config-reads-committed-only", "model-resolves-to-default", "collapse-on-default-model",
	"call-id-answered-once", "cut-result-by-id-alone", "inherit-answered-by-any-result",
	"posttools-hands-off-unasked", "tool-result-drops-images", "recover-row-says-retry", "addtools-from-catalog",
	"job-rerun-unrecorded", "tool-replay-default-unrecorded", "generation-fail-drops-answer",
	"watch-delete-sends-value", "spawn-context-unchecked",
	"session-totals-as-value", "system-hook-failure-unreported",
	"job-cut-run-keeps-code", "before-tool-fails-open", "overflow-unsettled",
	"collapse-retries-any-failure", "new-context-no-handoff", "cut-id-twice-unanswered",
	"result-at-every-call-of-an-id", "independent-page-read-at-nothing",
	"abort-cancels-own-queue-only", "queued-head-dropped", "provider-span-error-unset",
	"failed-turn-trace-ok", "nested-line-call-waits", "turns-untraced", "sqlite-retire-wrong-table",
	"cancel-drops-result", "boundary-from-deleted-current", "cancel-says-not-found",
	"write-placed-unreturned", "inspect-shares-records", "collapse-busy-names-nothing",
}

// Names are the planted bugs, for the measuring test.
func Names() []string { return names }
