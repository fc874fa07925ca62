// Package agent is pico's agent loop: the built-in generation, tool,
// post_tools, collapse and job kinds, the bash, job and subagent tools, the tool sink and its output limits, argument checks,
// system instructions, models, retries and usage, the built-in file tools,
// and the inbox with its input modes (§5.5, §8). It is written against the
// kernel's exported kind API (package core) and nothing else, the way a
// database/sql driver is written against database/sql/driver: whatever the
// built-ins do, a plugin kind can do.
//
// Open registers the built-ins on a kernel session and returns a Harness
// whose conversations carry the reference's agent verbs: Accept, Prompt,
// Steer, FollowUp, NextRun, Write, CancelQueued, Result, Settings, Collapse,
// Reset and StartJob. The kinds themselves (GenerationKind, ToolKind,
// PostToolsKind, CollapseKind, JobKind) are plain
// values a host can wrap and pass as a replacement; they find the session's
// models, tools, retry policy and execution environment through the
// harness's extension (core.Options.Extensions), so they carry no state.
//
// The inbox lives here rather than in the kernel. The view does carry it
// (ConversationView.Inbox, inbox events), but only as a list the kernel is
// told to watch: what an item means, how modes land at boundaries, the
// input-result machine and its rule (RuleInputResult, a core.BatchRule), and
// the abort policy that cancels queued steer and followUp input (composed
// into core.Conversation.Abort's commit) are the agent loop's decisions, and
// a session opened with core.Open alone has none of them.
//
// # Files
//
//   - agent.go: Open and Options, the Harness and Conversation handles, the
//     per-session configuration the kinds look up, the agent's batch rules.
//   - models.go: model references and the generation's config values, the
//     model registry, the retry policy, usage rows and totals.
//   - generation.go: the generation kind: the threshold check, attempts,
//     streaming to scratch, retries and deferral, settlement, the overflow
//     hand-over to a collapse, recovery and abort.
//   - system.go: system instructions and the baseline or delta a generation
//     appends when they change.
//   - tool.go: the Tool type, the tool registry and the tool kind: checks,
//     before_tool and after_tool, replay policies, recovery and abort.
//   - sink.go: the tool sink (ToolOutput), the fold of its operations with
//     output limits and truncation, and the result message.
//   - schema.go: the JSON Schema validation of tool arguments.
//   - statejson.go: hand-written fast paths for decoding the generation,
//     tool and post_tools states and input results, and for encoding a
//     call's output, result data and settlement, held to encoding/json,
//     which decides every text and value they give up on.
//   - posttools.go: the post_tools kind, which decides what follows an
//     exchange in one commit.
//   - inbox.go: input modes, inbox items and input results, the agent verbs
//     and request receipts.
//   - collapse.go: the collapse kind (§8.4): the cut, before_collapse, the
//     summarizer, the stale rule, the overflow chain's successor, recovery
//     and abort; the collapse settings and their batch rule; Collapse and
//     Reset.
//   - estimate.go: the token estimate thresholds and cuts are made with.
//   - rules.go: the input-result batch rule.
//   - preview.go: the generation's preview, the partial answer kept in step
//     with its frames.
//   - tools_builtin.go: the built-in read, write, edit and new_context tools.
//   - job.go: the job kind (§8.6): a command run through the execution
//     environment once or on a schedule, its output bridged into scratch
//     with a bounded store footprint, recovery and abort, and the
//     notification requests and notices of delegated jobs.
//   - jobtools.go: the bash tool (a job first, waited on with the blocking
//     budget, delegated when it runs out), the job tool, and JobOutput.
//   - subagent.go: the subagent tool and Spawn (§8.5).
//   - env.go: ExecutionEnv, where tools act (core/localenv is the real one,
//     sim/proc the simulated one).
//
// Tests run every scenario under the simulated runtime with fixed seeds and
// sweeps: generation, tools, the inbox's modes and races, previews, watch
// folds of agent sessions, stored-batch validation, and the faux-turn
// benchmarks.
package agent
