package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
)

// The oracles every run is held to as it goes (DESIGN §6): each committed
// batch, with the invocation that wrote it, and each task method call are
// checked the moment they happen, so a violation is caught at its commit
// rather than inferred from the end state. They run beside the kernel's own
// index invariants (CheckInvariants), which panic at the commit that breaks
// them.

// oracleRule names the rule a history broke.
type oracleRule string

const (
	// ruleIDsIncrease: a process's commits number on from its last
	// sequence without a gap or an overlap.
	ruleIDsIncrease oracleRule = "ids-increase"
	// ruleSettledTask: nothing writes to a task after its settlement, its
	// scratch included.
	ruleSettledTask oracleRule = "write-after-settle"
	// ruleStateMembers: a task's state, as created and as each patch and
	// settlement leave it, names each of its members once (a merge that
	// kept the old member beside the new one is still read as the new one
	// by most decoders, but is not the state the rule of §4.3 gives).
	ruleStateMembers oracleRule = "state-members-once"
	// ruleBackoff: a generation a rate limit stopped waits, before its
	// next attempt, the retry policy's delay for the attempt that failed:
	// the first delay after the first attempt, doubling after each later
	// one, never more than a minute (§8.2).
	ruleBackoff oracleRule = "retry-waits-its-backoff"
	// ruleMarkedWrite: an execute or recover invocation writes nothing,
	// main or scratch, once its task's abort mark committed.
	ruleMarkedWrite oracleRule = "write-after-mark"
	// ruleOneInvocation: a task has at most one method running at a time.
	ruleOneInvocation oracleRule = "one-invocation"
	// ruleRecoverAfterRestart: recover is for a task a stopped process
	// left in flight; a built-in kind's execute that returns leaves its
	// task settled, waiting or pending again, never in flight for the
	// same process to recover.
	ruleRecoverAfterRestart oracleRule = "recover-only-after-a-restart"
	// ruleInputResult: an input's result, once terminal, never changes.
	ruleInputResult oracleRule = "terminal-input-result"
	// ruleWatchFold: a live watch's folded view equals a fresh capture.
	ruleWatchFold oracleRule = "watch-fold"
	// ruleOneNotice: a job's end is announced at most once.
	ruleOneNotice oracleRule = "one-notice-per-job"
	// ruleAbortCleanup: a call that settles aborted while it still owns its
	// job leaves that job marked or ended in the same commit.
	ruleAbortCleanup oracleRule = "abort-cleanup"
	// ruleOneBoundary: a provider session starts at most one conversation.
	ruleOneBoundary oracleRule = "one-boundary-per-provider-session"
	// ruleSpanTree: the run's spans have DESIGN §9's shape (spans.go).
	ruleSpanTree oracleRule = "span-tree"
	// ruleInputBoundary: queued input lands at the boundaries its mode
	// names (§8.1): a post_tools places only write and steer input, as
	// does a generation's on_yield continuation; a generation's settlement
	// also followUp, and nextRun only an idle acceptance; a conversation
	// abort cancels only steer and followUp.
	ruleInputBoundary oracleRule = "input-lands-at-its-boundary"
	// ruleWritesLand: a queued write lands at the next boundary of its
	// conversation (§8.1): a generation or post_tools that settles, other
	// than aborted, leaves no write queued that was accepted before it.
	ruleWritesLand oracleRule = "writes-land-at-every-boundary"
	// ruleRetryBudget: a rate-limited attempt, or one a restart
	// interrupted before anything streamed, retries only while its
	// generation or collapse has attempts left (§8.2); its last one fails.
	ruleRetryBudget oracleRule = "retry-budget"
	// ruleReplayNever: a call of a tool that is never replayed runs at most
	// once, whatever restarts interrupt it (§8.3), and its state records
	// the policy its tool declares (never, for a tool that declares none).
	ruleReplayNever oracleRule = "replay-never-runs-once"
	// ruleStaleSummary: a collapse publishes its summary only if no head
	// landed in its conversation after the context it summarized was
	// captured (§8.4); otherwise it settles stale.
	ruleStaleSummary oracleRule = "no-stale-summary"
	// ruleTerminate: an exchange one of whose tools terminated the turn
	// ends there (§5.5): its post_tools settles stopped and creates no
	// generation.
	ruleTerminate oracleRule = "terminate-stops-the-turn"
	// ruleOneSuccessor: an exchange that goes on (its post_tools settles
	// done, not stopped) creates one generation of its conversation, which
	// takes the steering that joined it (§6.2), in the commit that settles.
	ruleOneSuccessor oracleRule = "an-exchange-that-goes-on-has-one-successor"
	// ruleHandoff: an exchange whose tools asked for one handoff goes on
	// from it, the handoff first (§5.5); one whose tools asked for two
	// different ones fails; one that goes on selects the tools its calls
	// added; and a work call asks for what its arguments told it to.
	ruleHandoff oracleRule = "an-exchange-hands-off-as-its-tools-ask"
	// ruleWaitsItsTurn: a generation that waits to retry or to poll a
	// deferred answer (§8.2) commits nothing from its execute before the
	// time it waits for, and a poll waits the handle's interval (the
	// default when it names none).
	ruleWaitsItsTurn oracleRule = "waits-its-turn"
	// rulePlacedInContext: input placed at a boundary is in its
	// conversation's context as of the commit that placed it: a head the
	// same commit writes (a handoff's) comes before it (§8.1), unless it is
	// the placement of an input accepted after it.
	rulePlacedInContext oracleRule = "placed-input-in-context"
	// ruleReach: a task writes only to its own conversation and the
	// conversations its conversation's tasks own, and theirs (§8.5: a
	// subagent command names a child of the calling conversation); a
	// conversation it creates is owned by it.
	ruleReach oracleRule = "tasks-reach-only-their-own"
	// rulePromptAbort: an abort mark cancels the execute or recover it
	// marks (§6.3), so one that waits on nothing but ctx (a model's
	// stream, a retry's or a poll's wait, a tool of the run's own but
	// bash and job) returns at once, not when its wait would have ended.
	rulePromptAbort oracleRule = "abort-is-prompt"
	// ruleWaitOnEnded: waiting for a task that has ended returns at once
	// (§8.6: the job tool's wait on a job that exited before the call).
	ruleWaitOnEnded oracleRule = "a-wait-on-an-ended-task-returns"
	// ruleSelectionAdds: an exchange whose tools add tools selects what its
	// conversation selected before its commit (the catalog when nothing),
	// then each added tool it lacked, in order (§5.5): addTools adds to what
	// the model was offered, whatever the host narrowed it to.
	ruleSelectionAdds oracleRule = "an-exchange-adds-to-the-selection"
	// ruleFailedWrite: a commit whose write failed (the disk filled
	// mid-line) keeps nothing of its batch: the store's last sequence, its
	// files and what it answers of the batch's records are as before it.
	ruleFailedWrite oracleRule = "a-failed-write-keeps-nothing"
	// ruleIdleHoldsNothing: a session with no live task holds no drive
	// or task waiter (Harness.Stats): every wait ended with the work it
	// waited for.
	ruleIdleHoldsNothing oracleRule = "an-idle-session-holds-no-waiter"
)

// committer names who committed a batch: a task's method, or a host.
func committer(inv core.Invocation, byTask bool) string {
	if !byTask {
		return "a host"
	}
	return fmt.Sprintf("task %d's %s", inv.Task, inv.Method)
}

// oracleError is a broken rule, named, with what broke it.
type oracleError struct {
	Rule   oracleRule
	Detail string
}

func (e *oracleError) Error() string { return fmt.Sprintf("oracle %s: %s", e.Rule, e.Detail) }

func broke(rule oracleRule, format string, args ...any) error {
	return &oracleError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// oracle is the state the rules need: what the history so far settled,
// marked and ended. It sees the commits of every process of a run, in
// order; restart starts a new process's numbering.
type oracle struct {
	last       storage.ID
	settled    map[storage.ID]bool
	marked     map[storage.ID]bool
	terminal   map[string]agent.InputStatus   // input result address → its terminal status
	active     map[storage.ID]core.Method     // task → the method running
	notices    map[storage.ID]bool            // jobs whose end was announced
	candidates map[storage.ID]bool            // collapses whose candidate summary is durable
	starts     map[string]bool                // provider/session ids that started a conversation
	kinds      map[storage.ID]string          // task → its kind
	modes      map[storage.ID]agent.InputMode // inbox item (input id) → its mode
	queued     map[storage.ID]storage.ID      // queued input (its id) → its conversation
	background map[storage.ID]bool            // background tasks
	budgets    map[storage.ID]int             // generation or collapse → its attempts (maxAttempts)
	stopping   map[storage.ID]bool            // tool tasks that settled asking to terminate the turn
	handoffs   map[storage.ID]string          // settled tool tasks → the handoff each asked for ("": none)
	added      map[storage.ID][]string        // settled tool tasks → the tools each asked to add
	convs      map[storage.ID]storage.ID      // task → its conversation
	heads      map[storage.ID]storage.ID      // conversation → the newest head entry written to it
	waiting    map[storage.ID]time.Time       // generation → the time its retry or poll may go out
	groups     map[storage.ID][]storage.ID    // generation → its input group
	owners     map[storage.ID]storage.ID      // conversation → the task that owns it (0: none)
	tools      map[storage.ID]string          // tool task → its call's tool
	spills     map[storage.ID]spillCall       // spill tool task → its call (spill.go)
	typedAt    map[storage.ID][]string        // typed tool task → where its arguments fail (argsrule.go)
	launches   map[storage.ID]spawnIntent     // subagent run or spawn task → how it makes its child (inheritrule.go)
	hostSpawn  spawnIntent                    // the host's spawn under way, if any
	jobTimes   map[storage.ID]*jobTime        // job → its schedule as followed (jobrule.go)
	fileRuns   map[storage.ID]*fileRun        // file tool call's task → its last run (filerule.go)
	subagents  subagentWatch                  // the subagent tool's calls and children (subagentrule.go)
	settings   map[settingKey][]settingWrite  // conversations' collapse settings as written (keeprule.go)
	// manualKeep is the keepRecent a host's manual collapse passes while
	// it makes it (nil: the conversation's); window is every served
	// model's context window (0: they differ, or it is not known).
	manualKeep *int64
	window     int
	markedAt   map[storage.ID]time.Time  // task → when a mark landed while it ran cancellably
	waitsFor   map[storage.ID]storage.ID // job tool call waiting → the job it waits for
	jobEnds    map[storage.ID]jobEnd     // a settled job → how its last run ended
	jobCalls   map[storage.ID]jobCall    // a job tool call → its command and job
	callStart  map[storage.ID]storage.ID // a job tool call → the last sequence when its execute started
	startedAt  map[storage.ID]time.Time  // job tool call → when it started, its job already ended
	created    []storage.ID              // conversations, in the order they were created
	// transcripts are the conversations and entries the batches wrote (or,
	// after a restart, the store holds), and requests each conversation's
	// newest attempt's projected request (requestrule.go).
	transcripts *transcripts
	requests    map[storage.ID]expectedRequest
	// summaries are the collapses' attempts' projected summarizer
	// requests (summarizerrule.go).
	summaries map[storage.ID]expectedSummary
	// attempts are the generations' current attempts, and statuses the
	// generations' and jobs' statuses (usagerule.go).
	attempts map[storage.ID]int
	statuses map[storage.ID]string
	// configs are the generations' captured configurations, and models
	// the models the run's provider serves (nil: models are not checked)
	// (modelrule.go).
	// adding is the selection the commit being checked wrote for the tools
	// its exchange added, checked against the store (selectionAdded).
	adding      *addedTools
	configs     map[storage.ID]agent.GenerationConfig
	turnConfigs map[storage.ID]agent.GenerationConfig // a turn's first input → what its first generation captured
	models      []ai.Model
	// retryDelay is the session's retry policy's first delay (the
	// harness's default when the run sets none).
	retryDelay time.Duration
	// now is the run's clock (nil: waits are not checked). exactClock says
	// a commit lands at the virtual time its plan ran: no held commit
	// lets time pass while a plan waits for the line.
	now func() time.Time
	// actor names the actor running now (nil outside a simulation), and
	// servedTo what kind of answer each actor's last request got
	// (ruleRetryCause).
	actor      func() any
	servedTo   map[any]string
	exactClock bool
	// catalog are the tools the run's harness registers (nil: selections
	// are not checked).
	catalog []string
	// replays are the replay policies the run's own tools declare, by name.
	replays map[string]agent.ReplayPolicy
	// limits are the session's budget limits, spent what the run has
	// spent against them (budgetrule.go).
	limits agent.BudgetLimits
	spent  budgetCount
	// sessionState is what the boundary transition rule follows, adapters
	// its reading of each provider's launch (boundaryrule.go).
	sessionState boundarySession
	adapters     map[boundary.Provider]adapterModel
	// hooks is what the hook rules follow (hookrule.go).
	hooks hookWatch
	// executedHere are the tasks an execute of the current process ran
	// and returned from (ruleRecoverAfterRestart).
	executedHere map[storage.ID]bool
	// hookFailures are the failures failing hooks returned that the
	// harness has not reported yet (failhooks.go).
	hookFailures []hookFailure
	// frames are each live generation's frames of its current attempt
	// (framerule.go).
	frames map[storage.ID][]ai.Frame
	// restarts counts the run's restarts (resync).
	restarts int
	// firstAttempts are the generations whose first attempt the threshold
	// rule holds (thresholdrule.go).
	firstAttempts map[storage.ID]bool
	// idleWatches follow the Drives of conversations under way
	// (driverule.go).
	idleWatches []*idleWatch
	// withdrawn are the inputs a host's CancelQueued said it cancelled
	// (inboxrule.go), and placedAtOnce the inputs placed in the commit
	// that accepted them, with their placement entries.
	withdrawn    map[storage.ID]bool
	placedAtOnce map[storage.ID]storage.ID
	first        error // the first violation
}

func newOracle() *oracle {
	return &oracle{settled: map[storage.ID]bool{}, marked: map[storage.ID]bool{},
		terminal: map[string]agent.InputStatus{}, active: map[storage.ID]core.Method{}, notices: map[storage.ID]bool{}, candidates: map[storage.ID]bool{}, starts: map[string]bool{},
		kinds: map[storage.ID]string{}, modes: map[storage.ID]agent.InputMode{}, budgets: map[storage.ID]int{},
		stopping: map[storage.ID]bool{}, handoffs: map[storage.ID]string{}, added: map[storage.ID][]string{}, convs: map[storage.ID]storage.ID{}, heads: map[storage.ID]storage.ID{},
		queued: map[storage.ID]storage.ID{}, background: map[storage.ID]bool{}, waiting: map[storage.ID]time.Time{}, groups: map[storage.ID][]storage.ID{},
		owners: map[storage.ID]storage.ID{}, tools: map[storage.ID]string{}, spills: map[storage.ID]spillCall{}, typedAt: map[storage.ID][]string{}, launches: map[storage.ID]spawnIntent{}, jobTimes: map[storage.ID]*jobTime{}, fileRuns: map[storage.ID]*fileRun{}, subagents: newSubagentWatch(), settings: map[settingKey][]settingWrite{}, markedAt: map[storage.ID]time.Time{},
		executedHere: map[storage.ID]bool{}, servedTo: map[any]string{},
		transcripts: newTranscripts(), requests: map[storage.ID]expectedRequest{}, summaries: map[storage.ID]expectedSummary{}, attempts: map[storage.ID]int{}, statuses: map[storage.ID]string{}, configs: map[storage.ID]agent.GenerationConfig{}, turnConfigs: map[storage.ID]agent.GenerationConfig{},
		waitsFor: map[storage.ID]storage.ID{}, jobEnds: map[storage.ID]jobEnd{}, jobCalls: map[storage.ID]jobCall{}, callStart: map[storage.ID]storage.ID{}, startedAt: map[storage.ID]time.Time{}, adapters: map[boundary.Provider]adapterModel{},
		hooks: newHookWatch(), firstAttempts: map[storage.ID]bool{}, frames: map[storage.ID][]ai.Frame{}, withdrawn: map[storage.ID]bool{}, placedAtOnce: map[storage.ID]storage.ID{}}
}

// child is what a generated run's model names as a subagent of asker:
// asker's newest child, or with other (or when it has none) the newest
// child of another conversation, else the newest other conversation, else
// an id no conversation has. Only the first is one the tool may reach.
func (o *oracle) child(asker storage.ID, other bool) storage.ID {
	if c, ok := o.ownChild(asker); ok && !other {
		return c
	}
	own := func(c storage.ID) bool { return o.owners[c] != 0 && o.convs[o.owners[c]] == asker }
	if c, ok := newestOf(o.created, func(c storage.ID) bool { return o.owners[c] != 0 && !own(c) && c != asker }); ok {
		return c
	}
	if c, ok := newestOf(o.created, func(c storage.ID) bool { return !own(c) && c != asker }); ok {
		return c
	}
	return unknownID
}

// ownChild is asker's newest child: a conversation one of its tasks owns.
func (o *oracle) ownChild(asker storage.ID) (storage.ID, bool) {
	return newestOf(o.created, func(c storage.ID) bool { return o.owners[c] != 0 && o.convs[o.owners[c]] == asker })
}

// job is what a generated run's model names as a job: asker's newest, or
// with other (or when it has none) another conversation's newest, a live
// one before one that ended, else an id no task has.
func (o *oracle) job(asker storage.ID, other bool) storage.ID {
	if j, ok := o.ownJob(asker); ok && !other {
		return j
	}
	if j, ok := o.otherJob(asker); ok {
		return j
	}
	return unknownID
}

// ownJob is asker's newest job, a live one first.
func (o *oracle) ownJob(asker storage.ID) (storage.ID, bool) {
	return o.newestJob(func(t storage.ID) bool { return o.convs[t] == asker })
}

// otherJob is the newest job of another conversation than asker, a live
// one first.
func (o *oracle) otherJob(asker storage.ID) (storage.ID, bool) {
	return o.newestJob(func(t storage.ID) bool { return o.convs[t] != asker })
}

func (o *oracle) newestJob(keep func(storage.ID) bool) (storage.ID, bool) {
	jobs := o.jobs()
	if j, ok := newestOf(jobs, func(t storage.ID) bool { return keep(t) && !o.settled[t] }); ok {
		return j, true
	}
	return newestOf(jobs, keep)
}

// jobs are the run's jobs, oldest first.
func (o *oracle) jobs() []storage.ID {
	var jobs []storage.ID
	for t, kind := range o.kinds {
		if kind == agent.JobKindName {
			jobs = append(jobs, t)
		}
	}
	slices.Sort(jobs)
	return jobs
}

// unknownID is an id nothing in a run has.
const unknownID storage.ID = 1 << 40

// newestOf is the last of ids that keep.
func newestOf(ids []storage.ID, keep func(storage.ID) bool) (storage.ID, bool) {
	for i := len(ids) - 1; i >= 0; i-- {
		if keep(ids[i]) {
			return ids[i], true
		}
	}
	return 0, false
}

// restart begins a process whose store ends at last.
func (o *oracle) restart(last storage.ID) {
	o.last = last
	clear(o.markedAt) // the old process's invocations ended with it
	clear(o.startedAt)
}

// resync reads the queued writes, the tasks' conversations and kinds and
// the conversations' owners from a restarted process's store: a commit
// that failed as the process stopped may still have persisted (a crash
// after the bytes, an uncertain commit), and the oracle saw none of its
// writes.
func (o *oracle) resync(ctx context.Context, store storage.Storage) error {
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return store.ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return err
	}
	tasks, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
		return store.ScanTasks(ctx, storage.TaskQuery{Cursor: c})
	})
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if o.convs[t.ID] == 0 {
			o.kinds[t.ID], o.convs[t.ID] = t.Kind, t.ConversationID
		}
		var call agent.ToolState
		if t.Kind == agent.ToolKindName && o.tools[t.ID] == "" && json.Unmarshal(t.State, &call) == nil {
			// Made in a commit the oracle never saw (one a restart left
			// uncertain): its state names the call.
			o.tools[t.ID] = call.Call.Name
			o.typedCall(t.ID, call.Call)
			o.hooks.callArgs[t.ID] = call.Call.Arguments
			o.subagentLaunch(t.ID, call, t.ConversationID)
		}
		if t.Kind == agent.ToolKindName && !t.Live() {
			o.toolOutcome(t.ID, t.State)
		}
		if t.Kind == agent.ToolKindName && json.Unmarshal(t.State, &call) == nil && call.Args != nil {
			o.hooks.runArgs[t.ID] = call.Args // its running call's, maybe recorded unseen
		}
		// A commit that failed as the process stopped may have created,
		// settled or marked it.
		o.background[t.ID] = t.Background
		o.jobMade(t) // as the store has it: a due time is on the grid
		o.settled[t.ID] = o.settled[t.ID] || !t.Live()
		o.marked[t.ID] = o.marked[t.ID] || t.Abort
		o.jobResynced(t)
	}
	if err := o.resyncBudget(ctx, store, tasks); err != nil {
		return err
	}
	if err := o.resyncCandidates(ctx, store, tasks); err != nil {
		return err
	}
	if err := o.resyncSession(ctx, store, convs); err != nil {
		return err
	}
	deleted := o.transcripts.deleted
	if o.transcripts, err = readTranscripts(ctx, store, convs); err != nil {
		return err
	}
	for id := range deleted {
		o.transcripts.deleted[id] = true
		delete(o.transcripts.convs, id) // a store that still lists it breaks the conversation rule
	}
	o.subagentRestarted()
	o.restarts++
	if err := o.resyncSettings(ctx, store, convs); err != nil {
		return err
	}
	clear(o.requests) // the old process's attempts ended with it
	clear(o.summaries)
	clear(o.executedHere)
	o.resyncAttempts(tasks)
	o.resyncConfigs(tasks)
	for _, c := range convs {
		if !slices.Contains(o.created, c.ID) {
			o.owners[c.ID] = c.Owner
			o.created = append(o.created, c.ID)
		}
	}
	clear(o.queued)
	for _, c := range convs {
		inbox, err := storage.AllPages(func(cur storage.Cursor) (storage.Page[storage.Element], error) {
			return store.ReadList(ctx, agent.InboxList.In(c.ID).Address, storage.ListQuery{Cursor: cur})
		})
		if err != nil {
			return err
		}
		for _, el := range inbox {
			var item struct {
				Mode agent.InputMode `json:"mode"`
			}
			if json.Unmarshal(el.Value, &item) == nil {
				o.queued[el.ID], o.modes[el.ID] = c.ID, item.Mode
			}
		}
	}
	return nil
}

// memberTwice finds a member a JSON object names twice at its top level;
// false for one that names each once, or for anything else.
func memberTwice(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '{' {
		return "", false
	}
	var seen []string // a state has a handful of members
	twice := ""
	d := jsonvalue.NewDecoder(raw)
	d.Object(func(key []byte) bool {
		if slices.Contains(seen, string(key)) {
			twice = string(key)
			return false
		}
		seen = append(seen, string(key))
		return d.Skip()
	})
	return twice, twice != ""
}

// rateLimited reports whether batch b records a usage row of task's
// attempt that a rate limit stopped, to be retried (outcome "retry"): an
// interrupted attempt is retried at once instead.
func rateLimited(b storage.CommitBatch, task storage.ID) bool {
	for _, w := range b.Writes {
		var row agent.UsageRow
		if w.Type == storage.WriteListAppend && w.Addr != nil && *w.Addr == agent.UsageList.Address &&
			json.Unmarshal(w.Value, &row) == nil && row.TaskID == task && row.Outcome == "retry" {
			return true
		}
	}
	return false
}

// retryDelayDefault and retryDelayMax are the retry policy's first delay
// when a session sets none, and the longest wait it makes (§8.2).
const (
	retryDelayDefault = time.Second
	retryDelayMax     = time.Minute
)

// backoff is the wait after failed attempt n under a policy whose first
// delay is first: doubled n-1 times, at most retryDelayMax.
func backoff(first time.Duration, n int) time.Duration {
	if first <= 0 {
		first = retryDelayDefault
	}
	d := first
	for i := 1; i < n && d < retryDelayMax; i++ {
		d *= 2
	}
	return min(d, retryDelayMax)
}

// fail keeps the first violation and returns err.
func (o *oracle) fail(err error) error {
	if o.first == nil {
		o.first = err
	}
	return err
}

// commit checks one committed batch, written by inv (ok false: a host).
func (o *oracle) commit(inv core.Invocation, ok bool, r storage.Range, b storage.CommitBatch) error {
	if r.First != o.last+1 || r.Last != r.First+storage.ID(len(b.Writes))-1 {
		return o.fail(broke(ruleIDsIncrease, "a batch of %d writes committed at %d–%d after %d", len(b.Writes), r.First, r.Last, o.last))
	}
	o.last = r.Last
	o.hooks.tick++
	o.adding = nil
	by := committer(inv, ok)
	if ok {
		if err := o.reach(inv.Task, b, by, r); err != nil {
			return err
		}
		if o.marked[inv.Task] && (inv.Method == core.MethodExecute || inv.Method == core.MethodRecover) {
			return o.fail(broke(ruleMarkedWrite, "%s wrote %s batch %d–%d after the task's abort mark", by, b.Kind, r.First, r.Last))
		}
		if until, waits := o.waiting[inv.Task]; waits && inv.Method == core.MethodExecute {
			delete(o.waiting, inv.Task)
			if now := o.now(); now.Before(until) {
				return o.fail(broke(ruleWaitsItsTurn, "%s committed %d–%d at %s, %s before the time it waits for", by, r.First, r.Last, now.UTC().Format(time.StampMilli), until.Sub(now)))
			}
		}
	}
	if err := o.transition(b, by, r); err != nil {
		return err
	}
	if err := o.failuresReported(inv, ok, by, r); err != nil {
		return err
	}
	if err := o.retriesCaused(inv, ok, b, by, r); err != nil {
		return err
	}
	if err := o.jobRunsEnded(inv, ok, b, by, r); err != nil {
		return err
	}
	if err := o.failedAnswers(inv, ok, b, by, r); err != nil {
		return err
	}
	if err := o.abortRows(inv, ok, b, by, r); err != nil {
		return err
	}
	o.transcripts.record(b)
	if err := o.framesSeen(b, by, r); err != nil {
		return err
	}
	if err := o.cutChecked(b, r, by); err != nil {
		return err
	}
	if err := o.inheritChecked(inv, ok, b, r, by); err != nil {
		return err
	}
	if err := o.candidateSeen(inv, ok, b, by, r); err != nil {
		return err
	}
	if b.Kind == storage.BatchScratch && o.settled[b.Task] {
		return o.fail(broke(ruleSettledTask, "%s wrote scratch of task %d, settled earlier, at %d", by, b.Task, r.First))
	}
	continues := o.continues(b)
	before := o.queuedBefore(b)
	var placed []placedInput
	for i, w := range b.Writes {
		seq := r.First + storage.ID(i)
		task, state := w.ID, w.State
		if w.Type == storage.WriteTask && w.Task != nil {
			task, state = w.Task.ID, w.Task.State
		}
		if key, twice := memberTwice(state); twice {
			return o.fail(broke(ruleStateMembers, "%s wrote a state of task %d at %d with the member %q twice", by, task, seq, key))
		}
		switch w.Type {
		case storage.WritePatch, storage.WriteSettle:
			if o.settled[w.ID] {
				return o.fail(broke(ruleSettledTask, "%s wrote task %d, settled earlier, at %d", by, w.ID, seq))
			}
			if w.Type == storage.WriteSettle {
				o.settled[w.ID] = true
				if err := o.cleanup(w, b, by, seq); err != nil {
					return err
				}
				if err := o.terminate(w, b, by, seq); err != nil {
					return err
				}
				if err := o.summary(w, by, seq); err != nil {
					return err
				}
				o.summarizerSettled(w)
				if o.kinds[w.ID] == agent.CollapseKindName {
					if err := o.hookCollapse(inv, ok, w, b, by, seq); err != nil {
						return err
					}
				}
				if o.kinds[w.ID] == agent.GenerationKindName {
					if err := o.hookResponse(inv, ok, w, b, by, seq); err != nil {
						return err
					}
				}
				if err := o.summaryBoundary(w, b, by, seq); err != nil {
					return err
				}
				if err := o.spillSettled(w, b, by, seq); err != nil {
					return err
				}
				if err := o.subagentSettled(w, by, seq); err != nil {
					return err
				}
				if err := o.jobEnded(inv, ok, w, b, by, seq); err != nil {
					return err
				}
				o.jobSettled(w, seq)
				if err := o.shellCallSettled(inv, ok, w, by, seq); err != nil {
					return err
				}
				if err := o.toolUsage(w, b, by, seq); err != nil {
					return err
				}
				if err := o.fileSettled(w, by, seq); err != nil {
					return err
				}
			}
			if w.Abort {
				o.marked[w.ID] = true
				if m := o.active[w.ID]; o.now != nil && (m == core.MethodExecute || m == core.MethodRecover) && o.cancellable(w.ID) {
					o.markedAt[w.ID] = o.now()
				}
			}
			if w.Type == storage.WritePatch && o.now != nil && o.kinds[w.ID] == agent.GenerationKindName {
				if err := o.wait(w, b, by, seq); err != nil {
					return err
				}
			}
			if w.Type == storage.WritePatch && o.kinds[w.ID] == agent.GenerationKindName {
				o.attemptStarts(w, r)
				o.attemptStarted(w)
				if err := o.thresholdStreaming(inv, ok, w, r, by); err != nil {
					return err
				}
				if w.Status == "streaming" {
					if err := o.hookStreaming(inv, ok, w, r, by, seq); err != nil {
						return err
					}
				}
			}
			if o.kinds[w.ID] == agent.JobKindName {
				if err := o.jobTimed(w, by, seq); err != nil {
					return err
				}
			}
			if o.kinds[w.ID] == agent.ToolKindName {
				if err := o.hookCall(inv, ok, w, by, seq); err != nil {
					return err
				}
				if err := o.replayRecorded(w, by, seq); err != nil {
					return err
				}
				if err := o.argsCall(inv, ok, w, by, seq); err != nil {
					return err
				}
			}
			if w.Type == storage.WritePatch && o.kinds[w.ID] == agent.CollapseKindName {
				o.summarizerStarts(w)
			}
			if w.Type == storage.WritePatch {
				if err := o.spend(w, by, seq); err != nil {
					return err
				}
			}
		case storage.WriteCreateConversation:
			if w.Conversation != nil {
				if err := o.madeOnce(w.Conversation, by, seq); err != nil {
					return err
				}
				o.owners[w.Conversation.ID] = w.Conversation.Owner
				o.created = append(o.created, w.Conversation.ID)
			}
		case storage.WriteTask:
			if w.Task == nil {
				continue
			}
			o.kinds[w.Task.ID], o.convs[w.Task.ID] = w.Task.Kind, w.Task.ConversationID
			o.background[w.Task.ID] = w.Task.Background
			o.jobMade(w.Task)
			if err := o.hookTask(inv, ok, w.Task, by, seq); err != nil {
				return err
			}
			var call agent.ToolState
			if w.Task.Kind == agent.ToolKindName && json.Unmarshal(w.Task.State, &call) == nil {
				o.tools[w.Task.ID] = call.Call.Name
				o.subagentMade(w.Task.ID, call.Call, seq)
				o.typedCall(w.Task.ID, call.Call)
				o.hooks.callArgs[w.Task.ID] = call.Call.Arguments
				o.subagentLaunch(w.Task.ID, call, w.Task.ConversationID)
				var spill spillArgs
				if _, ok := spillTools[call.Call.Name]; ok && json.Unmarshal(call.Call.Arguments, &spill) == nil {
					o.spills[w.Task.ID] = spillCall{tool: call.Call.Name, args: spill, restarts: o.restarts}
				}
				var args struct {
					Command string     `json:"command"`
					ID      storage.ID `json:"id"`
				}
				if call.Call.Name == agent.JobToolName && json.Unmarshal(call.Call.Arguments, &args) == nil {
					o.jobCalls[w.Task.ID] = jobCall{command: args.Command, job: args.ID}
					if args.Command == "wait" {
						o.waitsFor[w.Task.ID] = args.ID
					}
				}
			}
			if err := o.collapseCut(w, by, seq, r.First-1); err != nil {
				return err
			}
			if err := o.thresholdCollapse(w, by, seq, r.First-1); err != nil {
				return err
			}
			o.firstAttemptMade(w.Task)
			var st agent.GenerationState
			if w.Task.Kind == agent.GenerationKindName && json.Unmarshal(w.Task.State, &st) == nil {
				o.budgets[w.Task.ID], o.groups[w.Task.ID] = st.MaxAttempts, st.Inputs
			}
			var cst agent.CollapseState
			if w.Task.Kind == agent.CollapseKindName && json.Unmarshal(w.Task.State, &cst) == nil && cst.MaxAttempts > 0 {
				o.budgets[w.Task.ID] = cst.MaxAttempts
			}
		case storage.WriteEntry:
			if err := o.systemEntryChecked(inv, ok, w, r, by, seq); err != nil {
				return err
			}
			if w.Entry != nil && w.Entry.Kind == boundary.EntryKind.Kind() {
				var d boundary.BoundaryData
				if json.Unmarshal(w.Entry.Data, &d) == nil {
					key := string(d.Provider) + "/" + d.SessionID
					if o.starts[key] {
						return o.fail(broke(ruleOneBoundary, "%s started a second conversation for provider session %s at %d", by, key, seq))
					}
					o.starts[key] = true
				}
				continue
			}
			if w.Entry == nil || w.Entry.Kind != core.NoticeKind.Kind() {
				continue
			}
			var d agent.JobNoticeData
			if json.Unmarshal(w.Entry.Data, &d) != nil || d.Job == 0 {
				continue
			}
			if o.notices[d.Job] {
				return o.fail(broke(ruleOneNotice, "%s announced the end of job %d again at %d", by, d.Job, seq))
			}
			o.notices[d.Job] = true
		case storage.WriteListAppend:
			var item struct {
				Mode agent.InputMode `json:"mode"`
			}
			var row agent.UsageRow
			switch {
			case w.Addr == nil:
			case w.Addr.Namespace == agent.InboxList.Namespace && json.Unmarshal(w.Value, &item) == nil:
				o.modes[seq], o.queued[seq] = item.Mode, w.Addr.Scope.ID
			case w.Addr.Namespace == agent.UsageList.Namespace && json.Unmarshal(w.Value, &row) == nil:
				o.usage(row)
				if err := o.usageRow(row, b, by, seq); err != nil {
					return err
				}
				if err := o.usageModel(row, by, seq); err != nil {
					return err
				}
				if err := o.usageOutcome(inv, ok, row, b, by, seq); err != nil {
					return err
				}
				if budget, known := o.budgets[row.TaskID]; known && (row.Outcome == "retry" || row.Outcome == "interrupted") && row.Attempt >= budget {
					return o.fail(broke(ruleRetryBudget, "%s retried %s %d's attempt %d (%s) at %d; its budget is %d attempts", by, o.kinds[row.TaskID], row.TaskID, row.Attempt, row.Outcome, seq, budget))
				}
			}
		case storage.WriteListRemove:
			if w.Addr != nil && w.Addr.Namespace == agent.InboxList.Namespace {
				delete(o.queued, w.Element)
			}
		case storage.WriteValueSet, storage.WriteValueDelete:
			o.settingWritten(w, seq)
			if w.Addr == nil || w.Addr.Namespace != agent.InputResultValue.Namespace {
				continue
			}
			key := w.Addr.StateKey()
			if was, ended := o.terminal[key]; ended {
				return o.fail(broke(ruleInputResult, "%s rewrote %s at %d; it had ended %s", by, key, seq, was))
			}
			var res agent.InputResult
			if w.Type != storage.WriteValueSet || json.Unmarshal(w.Value, &res) != nil {
				continue
			}
			o.subagentInput(inv, ok, *w.Addr, res, seq)
			if input, err := strconv.ParseInt(w.Addr.Key, 10, 64); err == nil && res.PlacementEntryID != 0 && storage.ID(input) >= r.First && storage.ID(input) <= r.Last {
				o.placedAtOnce[storage.ID(input)] = res.PlacementEntryID
			}
			if before != nil && (res.Status == agent.InputRunning || res.Status == agent.InputPlaced) && res.PlacementEntryID != 0 {
				if input, err := strconv.ParseInt(w.Addr.Key, 10, 64); err == nil {
					placed = append(placed, placedInput{input: storage.ID(input), conv: w.Addr.Scope.ID, entry: res.PlacementEntryID})
				}
			}
			if res.Status.Terminal() {
				o.terminal[key] = res.Status
				if err := o.refused(res, w.Addr.Key, by, seq); err != nil {
					return err
				}
				if err := o.answered(w.Addr.Key, w.Addr.Scope.ID, res, b, r, by, seq); err != nil {
					return err
				}
			}
			if input, err := strconv.ParseInt(w.Addr.Key, 10, 64); err == nil {
				kind := ""
				if ok {
					kind = o.kinds[inv.Task]
				}
				if continues {
					kind = continuation
				}
				if err := o.boundary(storage.ID(input), res, kind, by, seq); err != nil {
					return err
				}
			}
		}
	}
	o.batchSpent()
	if before != nil {
		if err := o.inboxOrder(before, placed, by, r); err != nil {
			return err
		}
	}
	if ok {
		if err := o.toolAborted(inv, b, r, by); err != nil {
			return err
		}
	}
	// A batch's own heads are newer than what its writes were checked
	// against (a summary is a head itself).
	for i, w := range b.Writes {
		if w.Type == storage.WriteEntry && w.Entry != nil && w.Entry.IsHead() {
			o.heads[w.Entry.ConversationID] = r.First + storage.ID(i)
		}
	}
	return o.boundaryWrites(b, by, r)
}

// reach checks that task's batch writes only within its conversation's
// reach: the conversation itself and those owned, at any depth, by tasks
// of it. Conversations the batch creates must be owned by task.
func (o *oracle) reach(task storage.ID, b storage.CommitBatch, by string, r storage.Range) error {
	home := o.convs[task]
	if home == 0 {
		return nil // a task created by a commit the oracle missed (an uncertain one before a restart)
	}
	var made []storage.ID
	for i, w := range b.Writes {
		var target storage.ID
		switch w.Type {
		case storage.WriteCreateConversation:
			if w.Conversation != nil && w.Conversation.Owner != task {
				return o.fail(broke(ruleReach, "%s created conversation %d owned by %d at %d", by, w.Conversation.ID, w.Conversation.Owner, r.First+storage.ID(i)))
			}
			if w.Conversation != nil {
				made = append(made, w.Conversation.ID)
			}
			continue
		case storage.WriteEntry:
			if w.Entry != nil {
				target = w.Entry.ConversationID
			}
		case storage.WriteTask:
			if w.Task != nil {
				target = w.Task.ConversationID
			}
		case storage.WritePatch, storage.WriteSettle:
			target = o.convs[w.ID]
		default:
			if w.Addr != nil && w.Addr.Scope.Kind == storage.ScopeConversation {
				target = w.Addr.Scope.ID
			}
		}
		if target != 0 && !slices.Contains(made, target) && !o.within(home, target) {
			return o.fail(broke(ruleReach, "%s, of conversation %d, wrote %s to conversation %d at %d, which no task of %d owns", by, home, w.Type, target, r.First+storage.ID(i), home))
		}
	}
	return nil
}

// within reports whether conv is home or owned, at any depth, by tasks of
// home.
func (o *oracle) within(home, conv storage.ID) bool {
	return o.ownedBy(home, conv, func(storage.ID) bool { return true })
}

// ownedBy reports whether conv is home or owned, through a chain of
// owner tasks each of which through admits, by a task of home.
func (o *oracle) ownedBy(home, conv storage.ID, through func(owner storage.ID) bool) bool {
	for range len(o.created) + 1 {
		if conv == home {
			return true
		}
		owner := o.owners[conv]
		if owner == 0 || !through(owner) {
			return false
		}
		conv = o.convs[owner]
	}
	return false // a cycle, which creation order rules out
}

// placed checks the batch's placements: every input result it writes that
// names a placement entry of the same batch must find that entry in its
// conversation's context, derived from store just after the commit, unless
// the head that ends it before the entry is itself the placement of an
// input accepted later (a reset queued behind a write lands after it).
func (o *oracle) placed(ctx context.Context, store storage.Storage, b storage.CommitBatch, r storage.Range, by string) error {
	placedBy := map[storage.ID]storage.ID{} // placement entry → its input
	type placement struct{ input, entry, conv storage.ID }
	var placements []placement
	for _, w := range b.Writes {
		var res agent.InputResult
		if w.Type != storage.WriteValueSet || w.Addr == nil || w.Addr.Namespace != agent.InputResultValue.Namespace ||
			json.Unmarshal(w.Value, &res) != nil || res.PlacementEntryID < r.First || res.PlacementEntryID > r.Last {
			continue
		}
		input, err := strconv.ParseInt(w.Addr.Key, 10, 64)
		if err != nil {
			continue
		}
		placedBy[res.PlacementEntryID] = storage.ID(input)
		placements = append(placements, placement{storage.ID(input), res.PlacementEntryID, w.Addr.Scope.ID})
	}
	for _, p := range placements {
		cx, err := core.DeriveContext(ctx, store, p.conv, 0)
		if err != nil || slices.Contains(cx.IDs(), p.entry) {
			continue // in the context, or the store failed: no verdict
		}
		if cx.Head != nil && cx.Head.ID > p.entry && placedBy[cx.Head.ID] > p.input {
			continue // a later input's head
		}
		return o.fail(broke(rulePlacedInContext, "%s placed input %d at entry %d in %d–%d, outside conversation %d's context (head %v)",
			by, p.input, p.entry, r.First, r.Last, p.conv, headID(cx)))
	}
	return nil
}

// headID is the id of a context's head, 0 without one.
func headID(cx *core.Context) storage.ID {
	if cx.Head == nil {
		return 0
	}
	return cx.Head.ID
}

// wait notes the time a generation's patch makes it wait for, which a
// deferred answer's poll must put at least its handle's interval (the
// harness's default when the handle names none) after the patch, in a run
// whose commits land at the time they were made (exactClock).
func (o *oracle) wait(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	var st struct {
		NotBefore int64        `json:"notBefore"`
		Deferred  *ai.Deferred `json:"deferred"`
		Attempt   int          `json:"attempt"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.NotBefore == 0 {
		return nil
	}
	until := time.UnixMilli(st.NotBefore)
	o.waiting[w.ID] = until
	if w.Status == "retry_wait" && o.exactClock && rateLimited(b, w.ID) {
		if want, got := backoff(o.retryDelay, st.Attempt), until.Sub(o.now()); got != want {
			return o.fail(broke(ruleBackoff, "%s made generation %d wait %s after attempt %d failed, at %d; the retry policy (first delay %s, doubling to at most %s) says %s",
				by, w.ID, got, st.Attempt, seq, o.retryDelay, retryDelayMax, want))
		}
	}
	if st.Deferred == nil || w.Status != "deferred" || !o.exactClock {
		return nil
	}
	interval := time.Duration(st.Deferred.PollAfterMs) * time.Millisecond
	if interval <= 0 {
		interval = agent.DeferredPollDefault
	}
	if now := o.now(); until.Sub(now) < interval {
		return o.fail(broke(ruleWaitsItsTurn, "%s made generation %d poll its deferred answer %s after %d; the handle asks %s", by, w.ID, until.Sub(now), seq, interval))
	}
	return nil
}

// boundaryWrites checks that the boundaries a batch settles leave no
// write of their conversation queued from before it. A generation that
// settles calling tools is no boundary: its exchange ends at the
// post_tools its batch creates. Nor is one that hands its turn over
// (§8.2), the turn going on in what its batch creates: a collapse its
// context's threshold asks for and the successor generation after it; an
// overflow's collapse, which owes the turn its retry; a retry waiting for
// another collapse.
func (o *oracle) boundaryWrites(b storage.CommitBatch, by string, r storage.Range) error {
	creates := func(kind string) bool {
		return slices.ContainsFunc(b.Writes, func(w storage.Write) bool {
			return w.Type == storage.WriteTask && w.Task != nil && w.Task.Kind == kind
		})
	}
	handsOver := slices.ContainsFunc(b.Writes, func(w storage.Write) bool {
		var st struct {
			Successor     json.RawMessage `json:"successor"`
			AfterCollapse storage.ID      `json:"afterCollapse"`
		}
		if w.Type != storage.WriteTask || w.Task == nil || json.Unmarshal(w.Task.State, &st) != nil {
			return false
		}
		return w.Task.Kind == agent.CollapseKindName && len(st.Successor) > 0 && string(st.Successor) != "null" ||
			w.Task.Kind == agent.GenerationKindName && st.AfterCollapse != 0
	})
	exchange := creates(agent.PostToolsKindName) || creates(agent.CollapseKindName) && creates(agent.GenerationKindName) || handsOver
	for _, w := range b.Writes {
		if w.Type != storage.WriteSettle || w.Status == "aborted" {
			continue
		}
		switch o.kinds[w.ID] {
		case agent.GenerationKindName:
			if exchange {
				continue
			}
		case agent.PostToolsKindName:
		default:
			continue
		}
		conv, oldest := o.convs[w.ID], storage.ID(0)
		for input, c := range o.queued {
			if c == conv && o.modes[input] == agent.ModeWrite && input < r.First && (oldest == 0 || input < oldest) {
				oldest = input // the same one on every replay, whatever the map's order
			}
		}
		if oldest != 0 {
			return o.fail(broke(ruleWritesLand, "%s settled %s %d %s at %d–%d, leaving write %d of conversation %d queued", by, o.kinds[w.ID], w.ID, w.Status, r.First, r.Last, oldest, conv))
		}
	}
	return nil
}

// summary checks a collapse's settlement: one that published a summary
// captured its context at a sequence no head of its conversation came
// after, up to this batch.
func (o *oracle) summary(w storage.Write, by string, seq storage.ID) error {
	if o.kinds[w.ID] != agent.CollapseKindName {
		return nil
	}
	var st agent.CollapseState
	if json.Unmarshal(w.State, &st) != nil || st.Summary == 0 {
		return nil
	}
	if head := o.heads[o.convs[w.ID]]; head > st.At {
		return o.fail(broke(ruleStaleSummary, "%s published collapse %d's summary at %d, though head %d landed after its context was captured at %d", by, w.ID, seq, head, st.At))
	}
	return nil
}

// cleanup checks a settlement: a tool call that ends aborted while its
// job reference says it owns the job (cancel on abort, not detached) must
// have marked or ended the job by the end of this batch.
func (o *oracle) cleanup(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if w.Status != "aborted" || len(w.State) == 0 {
		return nil
	}
	var st struct {
		Job *agent.ToolJob `json:"job"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Job == nil || !st.Job.CancelOnAbort || st.Job.Detached {
		return nil
	}
	job := st.Job.ID
	for _, x := range b.Writes {
		if (x.Type == storage.WritePatch && x.Abort || x.Type == storage.WriteSettle) && x.ID == job {
			return nil
		}
	}
	if o.marked[job] || o.settled[job] {
		return nil
	}
	return o.fail(broke(ruleAbortCleanup, "%s settled call %d aborted at %d, leaving its job %d unmarked", by, w.ID, seq, job))
}

// boundary checks where an input's result says it landed or was cancelled
// against its mode: kind is the kind of the task whose invocation wrote it
// ("" for a host's commit).
func (o *oracle) boundary(input storage.ID, res agent.InputResult, kind, by string, seq storage.ID) error {
	mode, known := o.modes[input]
	if !known {
		return nil
	}
	var allowed []agent.InputMode
	switch {
	case res.Status == agent.InputCancelled && res.Reason == agent.ReasonConversationAborted:
		allowed = []agent.InputMode{agent.ModeSteer, agent.ModeFollowUp}
	case res.Status != agent.InputRunning && res.Status != agent.InputPlaced:
		return nil
	case kind == agent.PostToolsKindName:
		allowed = []agent.InputMode{agent.ModeWrite, agent.ModeSteer}
	case kind == agent.GenerationKindName:
		allowed = []agent.InputMode{agent.ModeWrite, agent.ModeSteer, agent.ModeFollowUp}
	case kind == continuation:
		allowed = []agent.InputMode{agent.ModeWrite, agent.ModeSteer}
	default:
		return nil
	}
	if !slices.Contains(allowed, mode) {
		what := "landed by " + kind
		if res.Status == agent.InputCancelled {
			what = "cancelled by a conversation abort"
		}
		return o.fail(broke(ruleInputBoundary, "%s: %s input %d %s at %d", by, mode, input, what, seq))
	}
	return nil
}

// continuation names, for boundary, a generation that settled done but
// kept its input group for an on_yield continuation: a boundary inside the
// turn, where write and steer input land and followUp waits (§8.2).
const continuation = "generation (continued)"

// continues reports whether the batch settles a generation done while
// creating one that keeps its input group: an on_yield continuation.
func (o *oracle) continues(b storage.CommitBatch) bool {
	var settled []storage.ID
	for _, w := range b.Writes {
		if w.Type == storage.WriteSettle && w.Status == "done" && o.kinds[w.ID] == agent.GenerationKindName && len(o.groups[w.ID]) > 0 {
			settled = append(settled, o.groups[w.ID]...)
		}
	}
	for _, w := range b.Writes {
		var st agent.GenerationState
		if len(settled) > 0 && w.Type == storage.WriteTask && w.Task != nil && w.Task.Kind == agent.GenerationKindName &&
			json.Unmarshal(w.Task.State, &st) == nil && slices.Contains(st.Inputs, settled[0]) {
			return true
		}
	}
	return false
}

// terminate checks a settlement against the turn-ending rule and the
// handoff rule: a tool call's outcome (whether it asked to terminate the
// turn, the handoff it asked for) is remembered; the post_tools of its
// exchange must settle stopped, done, in a commit that starts no
// generation when one of its tools terminated the turn; failed, stopped,
// starting none when no tool did and two asked for different handoffs;
// and otherwise go on, not stopped, its commit appending the one handoff
// asked for before any other entry of the conversation.
func (o *oracle) terminate(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	switch o.kinds[w.ID] {
	case agent.ToolKindName:
		o.toolOutcome(w.ID, w.State)
		if err := o.worked(w, by, seq); err != nil {
			return err
		}
	case agent.PostToolsKindName:
		var st struct {
			Tools   []storage.ID `json:"tools"`
			Stopped bool         `json:"stopped"`
		}
		if w.Status == "aborted" || json.Unmarshal(w.State, &st) != nil {
			return nil
		}
		generates := slices.ContainsFunc(b.Writes, func(x storage.Write) bool {
			return x.Type == storage.WriteTask && x.Task != nil && x.Task.Kind == agent.GenerationKindName
		})
		for _, tool := range st.Tools {
			if !o.stopping[tool] {
				continue
			}
			if !st.Stopped || w.Status != "done" {
				return o.fail(broke(ruleTerminate, "%s settled post_tools %d %s at %d, stopped: %t, though its tool %d terminated the turn", by, w.ID, w.Status, seq, st.Stopped, tool))
			}
			if generates {
				return o.fail(broke(ruleTerminate, "%s settled post_tools %d at %d with a new generation, though its tool %d terminated the turn", by, w.ID, seq, tool))
			}
			return nil
		}
		if conv, known := o.convs[w.ID]; known && w.Status == "done" && !st.Stopped {
			n := 0
			for _, x := range b.Writes {
				if x.Type == storage.WriteTask && x.Task != nil && x.Task.Kind == agent.GenerationKindName && x.Task.ConversationID == conv {
					n++
				}
			}
			if n != 1 {
				return o.fail(broke(ruleOneSuccessor, "%s settled post_tools %d at %d going on with %d new generations of conversation %d, not one", by, w.ID, seq, n, conv))
			}
		}
		var handoffs, added []string
		for _, tool := range st.Tools {
			h, known := o.handoffs[tool]
			if !known {
				return nil // settled in a commit the oracle never saw
			}
			if h != "" && !slices.Contains(handoffs, h) {
				handoffs = append(handoffs, h)
			}
			added = append(added, o.added[tool]...)
		}
		if err := o.toolsAdded(w, b, st.Stopped, added, by, seq); err != nil {
			return err
		}
		switch {
		case len(handoffs) > 1:
			if !st.Stopped || w.Status != "failed" || generates {
				return o.fail(broke(ruleHandoff, "%s settled post_tools %d %s at %d (stopped: %t, a new generation: %t), though its tools asked for the handoffs %q, which conflict",
					by, w.ID, w.Status, seq, st.Stopped, generates, handoffs))
			}
		case st.Stopped:
			return o.fail(broke(ruleHandoff, "%s settled post_tools %d %s at %d stopped, though no tool of it terminated the turn and its handoffs %q do not conflict", by, w.ID, w.Status, seq, handoffs))
		case len(handoffs) == 1:
			conv := o.convs[w.ID]
			for _, x := range b.Writes {
				if x.Type != storage.WriteEntry || x.Entry == nil || x.Entry.ConversationID != conv {
					continue
				}
				var data core.HandoffData
				if x.Entry.Kind != core.HandoffKind.Kind() || json.Unmarshal(x.Entry.Data, &data) != nil || data.Text != handoffs[0] {
					return o.fail(broke(ruleHandoff, "%s settled post_tools %d at %d appending a %s entry to conversation %d first, not the handoff %q its tool asked for", by, w.ID, seq, x.Entry.Kind, conv, handoffs[0]))
				}
				return nil
			}
			return o.fail(broke(ruleHandoff, "%s settled post_tools %d at %d without the handoff %q its tool asked for", by, w.ID, seq, handoffs[0]))
		default:
			return o.noHandoff(w, b, by, seq)
		}
	}
	return nil
}

// noHandoff holds the commit b that settles post_tools w, whose tools
// asked for no handoff, to appending none to its conversation but an
// input's own placement (a queued handoff input lands at the boundary).
func (o *oracle) noHandoff(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	placements := map[storage.ID]bool{}
	for _, x := range b.Writes {
		var res agent.InputResult
		if x.Type == storage.WriteValueSet && x.Addr != nil && x.Addr.Namespace == agent.InputResultValue.Namespace && json.Unmarshal(x.Value, &res) == nil && res.PlacementEntryID > 0 {
			placements[res.PlacementEntryID] = true
		}
	}
	conv := o.convs[w.ID]
	for _, x := range b.Writes {
		if x.Type == storage.WriteEntry && x.Entry != nil && x.Entry.ConversationID == conv && x.Entry.Kind == core.HandoffKind.Kind() && !placements[x.Entry.ID] {
			return o.fail(broke(ruleHandoff, "%s settled post_tools %d at %d appending handoff %d to conversation %d, though no tool of it asked for one", by, w.ID, seq, x.Entry.ID, conv))
		}
	}
	return nil
}

// toolsAdded holds the commit b that settles post_tools w to the tools its
// calls asked to add: an exchange that goes on selects them all for the
// conversation in that commit; one that stops, or whose calls asked for
// none, leaves the selection alone.
func (o *oracle) toolsAdded(w storage.Write, b storage.CommitBatch, stopped bool, added []string, by string, seq storage.ID) error {
	conv := o.convs[w.ID]
	var selected []string
	set := false
	for _, x := range b.Writes {
		if x.Type == storage.WriteValueSet && x.Addr != nil && x.Addr.Namespace == agent.SelectedToolsValue.Namespace && x.Addr.Scope == storage.ConversationScope(conv) {
			set = true
			_ = json.Unmarshal(x.Value, &selected)
		}
	}
	switch {
	case (stopped || len(added) == 0) && set:
		return o.fail(broke(ruleHandoff, "%s settled post_tools %d at %d selecting %q, though its exchange %s", by, w.ID, seq, selected,
			map[bool]string{true: "stopped", false: "asked to add no tool"}[stopped]))
	case !stopped && len(added) > 0 && !set:
		return o.fail(broke(ruleHandoff, "%s settled post_tools %d at %d without selecting the tools %q its calls added", by, w.ID, seq, added))
	case !stopped && len(added) > 0:
		for _, n := range added {
			if count := countOf(selected, n); count != 1 {
				return o.fail(broke(ruleHandoff, "%s settled post_tools %d at %d selecting %q, not the tools %q its calls added, each once", by, w.ID, seq, selected, added))
			}
		}
		o.adding = &addedTools{postTools: w.ID, conv: conv, added: added, selected: selected, by: by, seq: seq}
	}
	return nil
}

// addedTools is a post_tools commit's selection of the tools its calls
// added, for selectionAdded to hold to what the store held before.
type addedTools struct {
	postTools, conv storage.ID
	added, selected []string
	by              string
	seq             storage.ID
}

// selectionAdded holds the selection the commit at r (just made) wrote for
// the tools its exchange added to the rule, against what store held for
// the conversation before the commit. A store that fails to answer gives
// no verdict.
func (o *oracle) selectionAdded(ctx context.Context, store storage.Storage, r storage.Range) error {
	a := o.adding
	o.adding = nil
	if a == nil || o.hooks.catalogTools == nil {
		return nil
	}
	addr := agent.SelectedToolsValue.In(a.conv).Address
	v, ok, err := store.GetValue(ctx, addr, r.First-1)
	if err != nil {
		return nil
	}
	want := toolNames(o.hooks.catalogTools) // the harness's registration order
	var held []string
	if ok && json.Unmarshal(v.Value, &held) != nil {
		return nil
	}
	if held != nil { // a null selection selects nothing out: the catalogue
		want = held
	}
	before := slices.Clone(want)
	for _, n := range a.added {
		if !slices.Contains(want, n) {
			want = append(want, n)
		}
	}
	if !slices.Equal(a.selected, want) {
		return o.fail(broke(ruleSelectionAdds, "%s settled post_tools %d at %d selecting %q for conversation %d; it selected %q before, and the calls added %q",
			a.by, a.postTools, a.seq, a.selected, a.conv, before, a.added))
	}
	return nil
}

// replayRecorded holds a tool call's write w, at seq, to the rule's
// second half: the write that starts the call (the first to record its
// arguments) records the replay policy its tool declares (replays; a tool
// that declares none is never replayed).
func (o *oracle) replayRecorded(w storage.Write, by string, seq storage.ID) error {
	var st struct {
		Args   json.RawMessage    `json:"args"`
		Replay agent.ReplayPolicy `json:"replay"`
	}
	want, known := o.replays[o.tools[w.ID]]
	if !known || w.Type != storage.WritePatch || json.Unmarshal(w.State, &st) != nil || len(st.Args) == 0 {
		return nil
	}
	if want == "" {
		want = agent.ReplayNever
	}
	if st.Replay != want {
		return o.fail(broke(ruleReplayNever, "%s started call %d of %s at %d recording the replay policy %q; its tool declares %q", by, w.ID, o.tools[w.ID], seq, st.Replay, want))
	}
	return nil
}

// countOf is how many times s holds v.
func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// worked holds a work call that settles done, not an error, to what its
// arguments asked (kit.WorkTool): its text says what it did, and it asks
// to terminate the turn, for the handoff "start afresh", or to add the
// tool b exactly when it was asked to.
func (o *oracle) worked(w storage.Write, by string, seq storage.ID) error {
	args, known := o.hooks.callArgs[w.ID]
	if w.Type != storage.WriteSettle || w.Status != "done" || o.tools[w.ID] != "work" || !known {
		return nil
	}
	var st agent.ToolState
	var asked struct{ Do string }
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil || st.Output.IsError || json.Unmarshal(args, &asked) != nil {
		return nil
	}
	out := st.Output
	var added []string
	var handoff string
	switch asked.Do {
	case "addTools":
		added = []string{"b"}
	case "handoff":
		handoff = "start afresh"
	}
	if outputText(out) != "worked: "+asked.Do || out.Terminate != (asked.Do == "terminate") || out.Handoff != handoff || !slices.Equal(out.AddedTools, added) {
		return o.fail(broke(ruleHandoff, "%s settled work call %d (%s) at %d with %q, terminate %t, handoff %q, added tools %q; it was asked to %q",
			by, w.ID, args, seq, outputText(out), out.Terminate, out.Handoff, out.AddedTools, asked.Do))
	}
	return nil
}

// toolOutcome remembers what a tool call's settled state asks of its
// exchange: to terminate the turn, a handoff ("" for none), tools to add.
func (o *oracle) toolOutcome(id storage.ID, state json.RawMessage) {
	var st struct {
		Output *struct {
			Terminate  bool     `json:"terminate"`
			Handoff    string   `json:"handoff"`
			AddedTools []string `json:"addedTools"`
		} `json:"output"`
	}
	if json.Unmarshal(state, &st) != nil || st.Output == nil {
		return
	}
	if st.Output.Terminate {
		o.stopping[id] = true
	}
	o.handoffs[id] = st.Output.Handoff
	o.added[id] = st.Output.AddedTools
}

// invocation checks a method call's start or return.
func (o *oracle) invocation(inv core.Invocation, returned bool) error {
	if returned {
		delete(o.active, inv.Task)
		if inv.Method == core.MethodExecute {
			o.executedHere[inv.Task] = true
		}
		if at, waited := o.startedAt[inv.Task]; waited {
			delete(o.startedAt, inv.Task)
			if took := o.now().Sub(at); took > promptAbortBound {
				return o.fail(broke(ruleWaitOnEnded, "task %d's %s waited %s for job %d, which had ended before it started", inv.Task, inv.Method, took, o.waitsFor[inv.Task]))
			}
		}
		if at, marked := o.markedAt[inv.Task]; marked {
			delete(o.markedAt, inv.Task)
			if late := o.now().Sub(at); late > promptAbortBound {
				return o.fail(broke(rulePromptAbort, "task %d's %s returned %s after its abort mark", inv.Task, inv.Method, late))
			}
		}
		return nil
	}
	if m, running := o.active[inv.Task]; running {
		return o.fail(broke(ruleOneInvocation, "task %d's %s started while its %s was still running", inv.Task, inv.Method, m))
	}
	if inv.Method == core.MethodRecover && o.executedHere[inv.Task] {
		return o.fail(broke(ruleRecoverAfterRestart, "task %d's recover started in the process whose execute of it returned: that execute left it %s", inv.Task, o.statuses[inv.Task]))
	}
	o.active[inv.Task] = inv.Method
	if _, ok := o.jobCalls[inv.Task]; ok && inv.Method == core.MethodExecute {
		o.callStart[inv.Task] = o.last
	}
	o.hooks.tick++
	o.hooks.invokedAt[inv.Task] = o.hooks.tick
	if inv.Method == core.MethodExecute && o.kinds[inv.Task] == agent.GenerationKindName {
		delete(o.hooks.seen, inv.ConversationID)
	}
	if job, waits := o.waitsFor[inv.Task]; waits && o.settled[job] && o.now != nil && (inv.Method == core.MethodExecute || inv.Method == core.MethodRecover) {
		o.startedAt[inv.Task] = o.now()
	}
	return nil
}

// promptAbortBound is how long, in virtual time, a cancellable invocation
// may take to return once its task's abort mark landed: a held commit
// delays it by milliseconds, a wait that ignores the mark by seconds.
const promptAbortBound = 500 * time.Millisecond

// cancellable reports whether task's invocations wait on nothing that
// outlasts ctx: a model's stream, a retry's or a poll's wait, a post_tools,
// a tool of the run's own. A job's process, and bash and job that wait on
// one, take their kill's grace.
func (o *oracle) cancellable(task storage.ID) bool {
	switch o.kinds[task] {
	case agent.GenerationKindName, agent.PostToolsKindName:
		return true
	case agent.ToolKindName:
		name := o.tools[task]
		return name != agent.BashToolName && name != agent.JobToolName && name != ""
	}
	return false
}

// sameView reports whether two views are the same as a client sees them:
// byte-equal JSON but for readAt is the quick answer; otherwise the
// structural comparison (which also equates empty and absent lists).
func sameView(want, got *core.ConversationView) bool {
	return sameBytes(want, got) || simtest.ViewDiff(want, got) == ""
}

// sameBytes is sameView's quick answer: the plain views encode alike.
func sameBytes(want, got *core.ConversationView) bool {
	a, b := plainView(want), plainView(got)
	ja, err1 := json.Marshal(&a)
	jb, err2 := json.Marshal(&b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// plainView is v without readAt and with its absent lists and maps empty,
// as the structural comparison equates them, so that equal views usually
// encode to equal bytes.
func plainView(v *core.ConversationView) core.ConversationView {
	p := *v
	p.ReadAt = 0
	if p.Entries == nil {
		p.Entries = []*storage.Entry{}
	}
	if p.Context == nil {
		p.Context = []storage.ID{}
	}
	if p.Tasks == nil {
		p.Tasks = []*storage.Task{}
	}
	if p.Inbox == nil {
		p.Inbox = []storage.Element{}
	}
	if p.Values == nil {
		p.Values = map[string]json.RawMessage{}
	}
	if p.Previews == nil {
		p.Previews = map[storage.ID]any{}
	}
	return p
}

// sessionWatched are the session values a program's session watch
// follows: the current conversation (provider boundaries), the budget
// spent, and the session values of its value lines (stateNames).
func sessionWatched() []storage.Address {
	out := []storage.Address{boundary.CurrentValue.Address, agent.BudgetUsedValue.Address}
	return append(out, hostValues("session", storage.SessionScope())...)
}

// hostWatched are the conversation values of the host's value lines
// (stateNames) in conv, which every watch of a run follows besides its
// kinds' configuration: deleting one, or a rewind that leaves it unset,
// sends an event saying the value is gone, which a client's fold must
// drop.
func hostWatched(conv storage.ID) []storage.Address {
	return hostValues("c", storage.ConversationScope(conv))
}

// hostValues are the addresses, in scope, of the host's value lines
// (stateNames) whose target is target ("session" or "c").
func hostValues(target string, scope storage.Scope) []storage.Address {
	var out []storage.Address
	for _, st := range stateNames {
		if st.op == "value" && st.target == target {
			ns, key, _ := strings.Cut(st.name, "/")
			out = append(out, storage.Address{Scope: scope, Namespace: ns, Key: key})
		}
	}
	return out
}

// checkSessionWatch holds a live session watch to a fresh capture, as
// checkWatch does a conversation watch.
func (e *env) checkSessionWatch(ctx context.Context, w *core.SessionWatchHandle) error {
	if w == nil || e.h == nil {
		return nil
	}
	return holdToCapture(e, ctx, "the session watch", w.View,
		func() (*core.SessionView, error) {
			fresh, err := e.h.WatchSession(ctx, sessionWatched()...)
			if err != nil {
				return nil, err
			}
			defer fresh.Unsubscribe()
			return fresh.View(), nil
		},
		func(v *core.SessionView) bool { return v.Faulted }, nil, sessionDiff)
}

// sessionDiff compares two session views as a client sees them: their
// JSON without readAt, empty and absent lists and maps alike.
func sessionDiff(want, got *core.SessionView) string {
	norm := func(v *core.SessionView) map[string]any {
		var m map[string]any
		raw, _ := json.Marshal(v)
		_ = json.Unmarshal(raw, &m)
		delete(m, "readAt")
		return m
	}
	return cmp.Diff(norm(want), norm(got), cmpopts.EquateEmpty())
}

// watchChecksMax bounds how many captures checkWatch takes while commits
// keep landing.
const watchChecksMax = 20

// checkWatch holds a live watch of conv to a fresh capture with the same
// tail. The capture is as of now; the watch may still be delivering, so
// it gets a virtual millisecond, in which every runnable actor (its own
// included) runs before time moves. If nothing committed meanwhile, the
// two must then agree; if something did, the capture is taken again.
func (e *env) checkWatch(ctx context.Context, w *core.WatchHandle, conv storage.ID, opts core.WatchOptions) error {
	if w == nil || e.h == nil {
		return nil
	}
	return holdToCapture(e, ctx, fmt.Sprintf("the watch of conversation %d", conv), w.View,
		func() (*core.ConversationView, error) {
			last := e.h.Store().LastSeq()
			fresh, err := e.h.Watch(ctx, conv, opts)
			if err != nil {
				return nil, err
			}
			defer fresh.Unsubscribe()
			v := fresh.View()
			return v, e.previewsAgree(ctx, v, last)
		},
		func(v *core.ConversationView) bool { return v.Faulted }, sameBytes,
		func(want, got *core.ConversationView) string {
			if sameView(want, got) {
				return ""
			}
			return simtest.ViewDiff(want, got)
		})
}

// previewsAgree holds Harness.Preview to a fresh capture v, taken with
// last the store's last sequence: while nothing has committed since, every
// preview v shows is the one Preview reads for its task, and a running
// job's is the output Harness.JobOutput reads for it. (A task whose
// preview was never flushed shows none in a capture, while Preview builds
// it from durable scratch.) A violation is the oracle's; the error is a
// read's.
func (e *env) previewsAgree(ctx context.Context, v *core.ConversationView, last storage.ID) error {
	if v.Faulted {
		return nil
	}
	for _, task := range slices.Sorted(maps.Keys(v.Previews)) {
		got, ok, err := e.h.Preview(ctx, task)
		if err != nil || e.h.Store().LastSeq() != last {
			return err
		}
		if want := v.Previews[task]; !ok || !sameJSON(got, want) {
			return e.oracle.fail(broke(ruleWatchFold, "Harness.Preview of task %d reads %s (has one: %v); a fresh capture of conversation %d shows %s",
				task, previewText(got), ok, v.Conversation.ID, previewText(want)))
		}
		if e.oracle.kinds[task] != agent.JobKindName {
			continue
		}
		// A running job's output, read for a UI, is its preview too.
		out, err := e.h.JobOutput(ctx, task)
		if err != nil || e.h.Store().LastSeq() != last {
			return err
		}
		if out.Status == agent.JobRunning && !sameJSON(out.Output, got) {
			return e.oracle.fail(broke(ruleWatchFold, "Harness.JobOutput of running job %d reads %s; its preview is %s", task, previewText(out.Output), previewText(got)))
		}
	}
	return nil
}

// sameJSON reports whether a and b are the same JSON value, as a client
// sees them (a struct and the map its fields make alike).
func sameJSON(a, b any) bool {
	plain := func(v any) (any, bool) {
		raw, err := json.Marshal(v)
		var out any
		return out, err == nil && json.Unmarshal(raw, &out) == nil
	}
	pa, ok1 := plain(a)
	pb, ok2 := plain(b)
	return ok1 && ok2 && reflect.DeepEqual(pa, pb)
}

// previewText is a preview as JSON, for a message.
func previewText(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// holdToCapture is the loop both watch checks share. A capture fails
// (the session is closing) or says faulted: there is nothing to hold the
// watch to, since a faulted session's watches stopped at the fault and
// what the store holds past it (an uncertain commit) is not theirs to
// show. Otherwise the watch gets a virtual millisecond to deliver; if
// nothing committed meanwhile, the two must then agree.
//
// quick, when set, answers the first comparison of each capture: a watch is
// often a commit behind at first, and only the comparison after its
// millisecond needs diff's full (and costly) answer. quick may say two
// equal views differ, never that different ones agree.
func holdToCapture[V any](e *env, ctx context.Context, what string, view func() *V, capture func() (*V, error),
	faulted func(*V) bool, quick func(want, got *V) bool, diff func(want, got *V) string) error {
	for range watchChecksMax {
		last := e.h.Store().LastSeq()
		want, err := capture()
		if err == nil && faulted(want) && e.unfaulted() {
			// A capture is read, not folded: it never lags, and it says
			// faulted only of a session that faulted.
			return e.oracle.fail(broke(ruleWatchFold, "a fresh capture for %s says the session faulted, though nothing faulted it", what))
		}
		if err != nil || faulted(want) || faulted(view()) {
			return nil
		}
		if quick != nil && quick(want, view()) || quick == nil && diff(want, view()) == "" {
			return nil
		}
		if err := e.s.Runtime().Sleep(ctx, time.Millisecond); err != nil || faulted(view()) {
			return nil
		}
		if e.h.Store().LastSeq() == last {
			if d := diff(want, view()); d != "" {
				return e.oracle.fail(broke(ruleWatchFold, "%s differs from a fresh capture (-capture +folded):\n%s", what, d))
			}
			return nil
		}
	}
	return nil
}

// ruleHostMade: a host verb that starts a task and returns no error
// returns the task it started, of its kind, in its conversation.
const ruleHostMade oracleRule = "a-host-verb-returns-what-it-made"

// hostMade holds the id a host's verb returned, with no error, to the task
// the oracle saw its commit make: of kind, in conversation conv.
func (o *oracle) hostMade(verb, kind string, conv, id storage.ID) error {
	if o.kinds[id] != kind || o.convs[id] != conv {
		return o.fail(broke(ruleHostMade, "%s of conversation %d returned task %d, which the session knows as a %q task of conversation %d",
			verb, conv, id, o.kinds[id], o.convs[id]))
	}
	return nil
}

// writeMade holds what a host's Write of conv (a Reset's included)
// returned, with no error, to ruleHostMade: the write's input, and the
// entry that placed it when the commit that accepted it did (an idle
// conversation), 0 when it queued: of conv, of the kind the host asked
// for, and heading the context from itself when it is a reset or handoff.
func (o *oracle) writeMade(ctx context.Context, store storage.Storage, conv, input, entry storage.ID, kind string) error {
	if want := o.placedAtOnce[input]; entry != want {
		return o.fail(broke(ruleHostMade, "a Write of a %s to conversation %d returned input %d and entry %d; the commit that accepted the input placed it at %d (0: queued it)", kind, conv, input, entry, want))
	}
	if entry == 0 {
		return nil
	}
	got, err := store.GetEntries(ctx, []storage.ID{entry})
	if err != nil {
		return err
	}
	results, err := inputResults(ctx, store, conv)
	if err != nil {
		return err
	}
	head := kind == core.ResetKind.Kind() || kind == core.HandoffKind.Kind()
	e, r := got[entry], results[input]
	if e == nil || e.ConversationID != conv || e.Kind != kind || head != (e.Head == entry) || r.PlacementEntryID != entry {
		return o.fail(broke(ruleHostMade, "a Write of a %s to conversation %d returned input %d and entry %d, which is %+v; the input's result is %+v", kind, conv, input, entry, e, r))
	}
	return nil
}
