package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// Only a task's own invocation changes its status or state or settles it
// (§6.1); another task's invocation and the host may only mark it for
// abort. Nothing in the built-in kinds tries otherwise, so a kernel that
// let anyone change any task would pass every other check. On every
// meddleSeeds-th seed, therefore, the run's echo tools, and the host after
// each of a program's sleeps, try: they patch another live task of the
// conversation to its own status, patch its state, and settle it, each in
// a commit of its own. The kernel must refuse every one; a commit that
// lands fails the run (a refusal for another reason, such as the task
// having ended meanwhile, is not the meddler's to judge).

// ruleOnlyItsOwn: only a task's own invocation changes its status or
// state or settles it; the host changes none (§6.1).
const ruleOnlyItsOwn oracleRule = "only-its-own-invocation-changes-a-task"

// meddleSeeds is how often a run meddles: every second seed (the golden
// traces' seed 1 does not).
const meddleSeeds = 2

func (e *env) meddles() bool { return e.spec.seed%meddleSeeds == 0 }

// meddleStatuses are the terminal statuses a settle tries, the first the
// target's kind has being used.
var meddleStatuses = []string{"done", "failed", "aborted", "stopped", "exited"}

// meddle makes the attempts on the lowest-numbered live task of conversation
// conv other than self (0 for the host), committing each with commit; by
// names the meddler in a failure.
func (e *env) meddle(ctx context.Context, h *core.Harness, conv, self storage.ID, by string, commit func(context.Context, func(*core.Tx)) error) {
	live := true
	page, err := h.Store().ScanTasks(ctx, storage.TaskQuery{ConversationIDs: []storage.ID{conv}, Live: &live, Cursor: storage.Cursor{Limit: 4}})
	if err != nil {
		return
	}
	var target *storage.Task
	for _, t := range page.Items {
		if t.ID != self {
			target = t
			break
		}
	}
	if target == nil {
		return
	}
	kind, ok := h.Kinds().Task(target.Kind)
	if !ok {
		return
	}
	type attempt struct {
		what string
		plan func(*core.Tx)
	}
	attempts := []attempt{
		{"status", func(tx *core.Tx) { tx.Patch(target.ID, core.TaskPatch{Status: target.Status}) }},
		{"state", func(tx *core.Tx) { tx.Patch(target.ID, core.TaskPatch{State: map[string]bool{"meddled": true}}) }},
	}
	for _, s := range meddleStatuses {
		if role, ok := kind.Role(s); ok && role == storage.RoleTerminal {
			attempts = append(attempts, attempt{"settlement (" + s + ")", func(tx *core.Tx) { tx.Settle(target.ID, s, nil) }})
			break
		}
	}
	for _, a := range attempts {
		if err := commit(ctx, a.plan); err == nil {
			_ = e.oracle.fail(broke(ruleOnlyItsOwn, "%s changed the %s of task %d (%s, %s), and the kernel let it",
				by, a.what, target.ID, target.Kind, target.Status))
			return
		}
	}
}

// nestedSeeds is how often, among the meddling seeds, a tool also calls
// the line from inside its own commit's plan: every tenth seed from 4.
const nestedSeeds = 10

// ruleNestedRefused: a line call from inside a plan on the same line is
// refused with core.ErrNestedLineCall at once, never left waiting for the
// line its own plan holds (which the simulator would report as a
// deadlock).
const ruleNestedRefused oracleRule = "a-nested-line-call-is-refused"

// errNestedTried ends the plan a nested call was tried from: it commits
// nothing.
var errNestedTried = errors.New("picosim: a nested line call was tried")

// callNested has a tool's invocation commit from inside its own commit's
// plan, then abandon the outer plan.
func (e *env) callNested(ctx context.Context, rt *core.TaskRuntime, by string) {
	var nested error
	_, err := rt.Commit(ctx, func(*core.ConversationTx) error {
		_, nested = rt.Commit(ctx, func(*core.ConversationTx) error { return nil })
		return errNestedTried
	})
	if errors.Is(err, errNestedTried) && !errors.Is(nested, core.ErrNestedLineCall) {
		_ = e.oracle.fail(broke(ruleNestedRefused, "%s committed from inside its own commit's plan, and the call returned %v", by, nested))
	}
}

// meddleAsTool is a tool call's meddling, as its task's invocation.
func (e *env) meddleAsTool(ctx context.Context, rt *core.TaskRuntime, tool, call string) {
	by := fmt.Sprintf("task %d (tool %s, call %s)", rt.TaskID(), tool, call)
	if e.spec.seed%nestedSeeds == 4 {
		e.callNested(ctx, rt, by)
	}
	e.meddle(ctx, rt.Harness(), rt.ConversationID(), rt.TaskID(), by,
		func(ctx context.Context, plan func(*core.Tx)) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { plan(tx.Tx); return nil })
			return err
		})
	e.driveOwnScope(ctx, rt.Harness(), rt.ConversationID(), by)
}

// ruleNoSelfDrive: a foreground task that drives its own conversation,
// its own foreground scope, is refused at once with a *core.SelfWaitError
// (§6.2): the drive would wait for the task itself.
const ruleNoSelfDrive oracleRule = "no-self-drive"

// selfDriveBound is how long a drive of a task's own scope may take to be
// refused, in virtual time.
const selfDriveBound = time.Second

// driveOwnScope has a foreground invocation (a tool's call, a
// generation's on_yield hook: the one a task no other task depends on yet)
// drive its own conversation conv, from a helper actor with its identity
// (ctx), and holds the answer to the rule: a SelfWaitError within
// selfDriveBound (an error of a closing session is no answer to judge).
func (e *env) driveOwnScope(ctx context.Context, h *core.Harness, conv storage.ID, by string) {
	c, err := h.Conversation(ctx, conv)
	if err != nil {
		return
	}
	// The check a verb that commits before it drives makes first must
	// refuse alike.
	var self *core.SelfWaitError
	if err := c.CheckDrive(ctx); !errors.As(err, &self) && !sessionGone(ctx, err) {
		_ = e.oracle.fail(broke(ruleNoSelfDrive, "%s checked a drive of its own conversation %d, answered %v; want a *core.SelfWaitError", by, conv, err))
	}
	bounded, cancel := context.WithCancel(ctx)
	defer cancel()
	d := e.startHelperDrive(bounded, c, "self-drive")
	if !d.await(ctx) {
		return
	}
	switch {
	case !d.done.IsSet():
		_ = e.oracle.fail(broke(ruleNoSelfDrive, "%s drove its own conversation %d, and the kernel let it wait", by, conv))
	case d.err == nil:
		_ = e.oracle.fail(broke(ruleNoSelfDrive, "%s drove its own conversation %d, and the drive returned", by, conv))
	case !d.refusedAsSelfWait():
		_ = e.oracle.fail(broke(ruleNoSelfDrive, "%s drove its own conversation %d, refused with %v; want a *core.SelfWaitError", by, conv, d.err))
	}
}

// helperDrive is a drive of a conversation from a helper actor with the
// identity of the invocation its ctx carries.
type helperDrive struct {
	rt     core.Runtime
	done   core.Event
	result core.DriveResult
	err    error
}

// startHelperDrive starts a drive of c, named name, under ctx.
func (e *env) startHelperDrive(ctx context.Context, c *core.Conversation, name string) *helperDrive {
	d := &helperDrive{rt: e.s.Runtime(), done: e.s.Runtime().NewEvent(name)}
	d.rt.Go(ctx, name, func(ctx context.Context) {
		d.result, d.err = c.Drive(ctx)
		d.done.Set()
	})
	return d
}

// await gives the drive selfDriveBound of virtual time to answer: a
// refusal is the line's first answer, and a commit a hold fault parks keeps
// the line a few virtual milliseconds. It reports false when ctx ended
// first.
func (d *helperDrive) await(ctx context.Context) bool {
	for start := d.rt.Now(); !d.done.IsSet() && d.rt.Now().Sub(start) < selfDriveBound; {
		if d.rt.Sleep(ctx, time.Millisecond) != nil {
			return false
		}
	}
	return true
}

// refusedAsSelfWait reports whether the drive's error is the refusal the
// rules want, or one that is no answer to judge (a closing session, the
// caller's cancellation).
func (d *helperDrive) refusedAsSelfWait() bool {
	var self *core.SelfWaitError
	return errors.As(d.err, &self) || isSessionFault(d.err) || errors.Is(d.err, context.Canceled)
}

// meddleAsHost is the host's meddling, in conversation conv.
func (e *env) meddleAsHost(ctx context.Context, conv storage.ID) {
	if e.h == nil {
		return
	}
	h := e.h.Harness
	e.meddle(ctx, h, conv, 0, "the host", func(ctx context.Context, plan func(*core.Tx)) error {
		_, err := h.Commit(ctx, func(tx *core.Tx) error { plan(tx); return nil })
		return err
	})
}

// An abort invocation creates no new work: no task, no conversation
// (§6.3). No built-in kind's abort tries, and none runs code of a run's
// own (a tool has no abort hook), so the kernel's refusal was never put to
// the test. On meddling seeds, therefore, the host also starts a task of
// picosim's own kind after each of a program's sleeps and marks it for
// abort at once; its abort tries to create a task, a conversation and an
// input, each on its own, before it settles the task (while its execute's
// input into a conversation of its own must land). The kernel must refuse both;
// one that lands fails the run. Its execute, when it gets to run before
// the mark, first tries to wait for itself, which the kernel must refuse.

// ruleAbortCreates: an abort invocation creates no task and no
// conversation (§6.3).
const ruleAbortCreates oracleRule = "abort-creates-no-work"

// ruleNoSelfWait: a task that waits for itself is refused with a
// *core.SelfWaitError (§6.2), never left waiting. The meddler's execute
// tries first thing, with a budget that runs out before its abort mark
// comes, so that a kernel that lets it wait shows as a wait that returned.
const ruleNoSelfWait oracleRule = "no-self-wait"

// selfWaitBudget bounds the meddler's wait for itself; the host marks a
// meddler twice that long (virtual time) after starting it.
const selfWaitBudget = 10 * time.Millisecond

// meddlerStatuses are picosim's own task kind's: a meddler task waits,
// and settles done after meddlerWait, or its abort tries to create work
// and settles it aborted.
var meddlerStatuses = core.Statuses{Name: "picosim.meddler", Initial: "waiting", Roles: map[string]storage.TaskRole{
	"waiting": storage.RoleStart, "done": storage.RoleTerminal, "aborted": storage.RoleTerminal}}

// meddlerWait is how long a meddler task waits for its abort mark, in
// virtual time: longer than any run.
const meddlerWait = time.Hour

// meddlerKind is the kind, its abort judged by e's oracle.
func (e *env) meddlerKind() core.TaskKind {
	settle := func(ctx context.Context, rt *core.TaskRuntime, status string) error {
		_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(rt.TaskID(), status, nil); return nil })
		return err
	}
	wait := func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
		if !isKeeper(task) {
			// Refused, or cut short by the mark: any answer but an error is a
			// wait the kernel let happen.
			if ended, err := rt.WaitForTask(ctx, task.ID, selfWaitBudget); err == nil {
				_ = e.oracle.fail(broke(ruleNoSelfWait, "task %d waited for itself, and the wait returned %t", task.ID, ended))
			}
			e.newWorkOnDriver(ctx, task, rt)
		}
		if err := rt.Sleep(ctx, rt.Now().Add(meddlerWait)); err != nil {
			return err
		}
		return settle(ctx, rt, "done")
	}
	return core.KindFuncs{
		Statuses:    meddlerStatuses,
		ExecuteFunc: wait,
		RecoverFunc: wait,
		AbortFunc: func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if isKeeper(task) {
				return settle(ctx, rt, "aborted")
			}
			by := fmt.Sprintf("the abort of task %d", task.ID)
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Task(meddlerStatuses, core.TaskSpec{ConversationID: task.ConversationID, Background: true})
				return nil
			}); err == nil {
				_ = e.oracle.fail(broke(ruleAbortCreates, "%s created a task, and the kernel let it", by))
			}
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.CreateConversation(core.ConversationSpec{})
				return nil
			}); err == nil {
				_ = e.oracle.fail(broke(ruleAbortCreates, "%s created a conversation, and the kernel let it", by))
			}
			if ac, err := e.h.Conversation(ctx, task.ConversationID); err == nil {
				if _, _, err := ac.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "meddled"}}); err == nil {
					_ = e.oracle.fail(broke(ruleAbortCreates, "%s wrote input into conversation %d, and the harness let it", by, task.ConversationID))
				}
			}
			return settle(ctx, rt, "aborted")
		},
	}
}

// A drive by a task waits for a scope to be idle, so work that the drive
// waits for and that depends on the driving task is a deadlock: the kernel
// refuses the batch that creates it while the drive waits (§6.2), and the
// drive when the work came first. The built-in kinds never try either.
// The meddler's execute therefore, after its wait for itself, creates a
// child conversation with a keeper task (so that the child is not idle),
// drives the child from a helper actor with its identity, and meanwhile
// commits a foreground task in the child that runs after the meddler
// (directly, or through a background task of the same batch on every
// other meddler). Whichever reaches the line first, the other must be
// refused.

// ruleNoNewSelfWait: new work never makes a waiting task wait for itself:
// the batch is refused by core.RuleSelfWait, or the drive that comes after
// it with a *core.SelfWaitError (§6.2).
const ruleNoNewSelfWait oracleRule = "no-new-self-wait"

// keeperState marks a meddler task that only keeps its conversation busy:
// it makes no attempts of its own.
var keeperState = map[string]bool{"keeper": true}

// isKeeper reports whether task is a keeper.
func isKeeper(task *storage.Task) bool {
	s, err := core.Unmarshal[map[string]bool](task.State)
	return err == nil && s["keeper"]
}

// newWorkOnDriver makes the attempt for meddler task, from its invocation
// rt, and then aborts the keepers it created.
func (e *env) newWorkOnDriver(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) {
	var child storage.ID
	var keepers []storage.ID
	defer func() {
		var left []storage.ID
		for _, k := range keepers {
			err := e.h.AbortTask(context.WithoutCancel(ctx), k)
			if errors.Is(err, core.ErrTaskCancelled) || errors.Is(err, core.ErrStaleInvocation) {
				left = append(left, k)
			}
		}
		if len(left) > 0 && e.hostCtx != nil {
			// Marked meanwhile, the execute may commit nothing more (an
			// abort of its own included): the host ends what it left.
			e.s.Runtime().Go(e.hostCtx, "meddler-cleanup:"+strconv.FormatInt(int64(task.ID), 10), func(ctx context.Context) {
				for _, k := range left {
					_ = e.h.AbortTask(ctx, k)
				}
			})
		}
	}()
	if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		child = tx.CreateConversation(core.ConversationSpec{Owner: task.ID})
		keepers = []storage.ID{tx.Tx.Task(meddlerStatuses, core.TaskSpec{ConversationID: child, State: keeperState})}
		return nil
	}); err != nil {
		keepers = nil
		return
	}
	// Input an execute gives is new work it may make (only an abort may
	// not): a write into the child lands or queues.
	if ac, err := e.h.Conversation(ctx, child); err == nil {
		if _, _, err := ac.Write(ctx, core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "meddled"}}); core.RuleOf(err) == core.RuleAbortCreates {
			_ = e.oracle.fail(broke(ruleAbortCreates, "task %d's execute wrote input into its child conversation %d, and the kernel refused it as an abort's: %v", task.ID, child, err))
		}
	}
	c, err := rt.Conversation(ctx, child)
	if err != nil {
		return
	}
	bounded, cancel := context.WithCancel(ctx)
	defer cancel()
	d := e.startHelperDrive(bounded, c, "meddler-drive")
	var made []storage.ID
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		made = nil
		after := task.ID
		if task.ID%2 == 0 {
			after = tx.Task(meddlerStatuses, core.TaskSpec{Background: true, State: keeperState, After: []storage.ID{task.ID}})
			made = append(made, after)
		}
		made = append(made, tx.Tx.Task(meddlerStatuses, core.TaskSpec{ConversationID: child, State: keeperState, After: []storage.ID{after}}))
		return nil
	})
	what := fmt.Sprintf("task %d, driving its child conversation %d, committed a foreground task there that runs after it", task.ID, child)
	if task.ID%2 == 0 {
		what += " through a background one"
	}
	switch got := core.RuleOf(err); {
	case err == nil:
		keepers = append(keepers, made...)
	case got == core.RuleSelfWait:
		return
	case got != "":
		_ = e.oracle.fail(broke(ruleNoNewSelfWait, "%s; the kernel refused it by %q, not %q: %v", what, got, core.RuleSelfWait, err))
		return
	default: // a closing session, the abort mark
		return
	}
	if !d.await(ctx) {
		return
	}
	switch {
	case !d.done.IsSet():
		_ = e.oracle.fail(broke(ruleNoNewSelfWait, "%s, and the kernel let both the task and the drive wait", what))
	case d.err == nil && d.result != core.Closed:
		if e.keeperEnded(ctx, keepers[0]) {
			// Another's abort (a subagent stop of the conversation's newest
			// child) ended the child's first keeper under the drive, which
			// then had nothing to wait for: its answer says nothing.
			return
		}
		_ = e.oracle.fail(broke(ruleNoNewSelfWait, "%s, and the drive returned %s", what, d.result))
	case d.err != nil && !d.refusedAsSelfWait():
		_ = e.oracle.fail(broke(ruleNoNewSelfWait, "%s; the drive was refused with %v, want a *core.SelfWaitError", what, d.err))
	}
}

// abortOrphanedKeepers aborts, from a helper actor, the keepers a stopped
// process's meddlers left: the cleanup that was to abort each one
// (newWorkOnDriver's) ended with that process, and a keeper holds its
// conversation an hour, so the session could not be idle before then.
func (e *env) abortOrphanedKeepers(ctx context.Context) {
	if e.hostCtx == nil {
		return
	}
	in, err := e.h.Inspect(ctx)
	if err != nil {
		return
	}
	var keepers []storage.ID
	for _, t := range append(in.Start, in.Inflight...) {
		if t.Kind == meddlerStatuses.Name && isKeeper(t) {
			keepers = append(keepers, t.ID)
		}
	}
	if len(keepers) == 0 {
		return
	}
	h := e.h
	e.s.Runtime().Go(e.hostCtx, "keeper-cleanup", func(ctx context.Context) {
		for _, k := range keepers {
			_ = h.AbortTask(ctx, k)
		}
	})
}

// keeperEnded reports whether keeper has ended (a read that fails says
// it has: nothing can be judged then).
func (e *env) keeperEnded(ctx context.Context, keeper storage.ID) bool {
	t, ok, err := e.h.GetTask(ctx, keeper)
	return err != nil || !ok || t.Role == storage.RoleTerminal
}

// startMeddler starts a meddler task in conversation conv and marks it for
// abort later, once its execute could try to wait for itself and to drive
// its child: the host goes on after 2*selfWaitBudget, and a helper actor
// marks the task selfDriveBound after that. (Holding the host for the whole
// of it would move every later line of the program past the work it was
// drawn to meet: an abort-task after a sleep would find its call ended.)
func (e *env) startMeddler(ctx context.Context, conv storage.ID) {
	if e.h == nil {
		return
	}
	var id storage.ID
	if _, err := e.h.Commit(ctx, func(tx *core.Tx) error {
		id = tx.Task(meddlerStatuses, core.TaskSpec{ConversationID: conv, Background: true})
		return nil
	}); err != nil {
		return
	}
	rt := e.s.Runtime()
	if rt.Sleep(ctx, 2*selfWaitBudget) != nil {
		return
	}
	rt.Go(ctx, "meddler-mark:"+strconv.FormatInt(int64(id), 10), func(ctx context.Context) {
		if rt.Sleep(ctx, selfDriveBound) == nil {
			_ = e.h.AbortTask(ctx, id)
		}
	})
}

// meddlerMarked is how long after startMeddler returns its task is marked
// for abort, in virtual time.
const meddlerMarked = selfDriveBound

// The commit line refuses a batch that breaks a rule of the data model
// (§2.1 heads and edits, §3.2 state before entries, kinds and statuses,
// dependencies, payloads, addresses), each with its rule. No built-in kind
// writes such a batch, so the refusals were never put to the test either.
// On meddling seeds, therefore, the host also tries, after each of a
// program's sleeps, one commit for each rule, breaking only it; the kernel
// must refuse each by that rule, and one that lands, or is refused by
// another, fails the run.

// ruleRefusesBadWrites: a batch that breaks a rule of the data model is
// refused, naming that rule.
const ruleRefusesBadWrites oracleRule = "bad-writes-are-refused-by-their-rule"

// rawKind is a kind known to nobody.
type rawKind string

func (k rawKind) Kind() string { return string(k) }

// badWrite is one attempt: the rule it breaks, and its plan. A plan that
// finds its premise gone on the line writes nothing, and the attempt is
// skipped.
type badWrite struct {
	rule core.Rule
	what string
	plan func(tx *core.ConversationTx)
}

// onTheLiveTask are the rules whose attempts patch or settle the live task
// of badFacts, which may have moved on by the time the attempt reaches the
// line: the attempt is then skipped (stillAsRead).
var onTheLiveTask = []core.Rule{core.RuleUnknownStatus, core.RuleSettleNotTerminal, core.RulePatchTerminal}

// stillAsRead reports, on the line, whether task t is live at the status
// the attempts were built for.
func stillAsRead(tx *core.ConversationTx, t *storage.Task) bool {
	now, err := tx.GetTasks([]storage.ID{t.ID})
	return err == nil && now[t.ID] != nil && now[t.ID].Live() && now[t.ID].Status == t.Status
}

// errNotAnymore is how an attempt whose premise went away is skipped.
var errNotAnymore = errors.New("picosim: the bad write's premise went away")

// badFacts are what the attempts on a conversation build on: its visible
// entries (ascending) and the newest head among them (nil: none), a task
// of the session (0: none), a live one with a terminal status of its kind
// (nil: none), an ended one (nil: none), a task of another ownership tree
// (0: none), and the last sequence.
type badFacts struct {
	conv     storage.ID
	entries  []*storage.Entry
	head     *storage.Entry
	task     storage.ID
	live     *storage.Task
	terminal string
	ended    *storage.Task
	stranger storage.ID
	last     storage.ID
	// queuedInput and endedInput are inputs of the conversation whose
	// results are queued and terminal (0: none).
	queuedInput, endedInput storage.ID
}

// badWrites are the attempts the facts allow.
func badWrites(f badFacts) []badWrite {
	conv, entries, head, task, last := f.conv, f.entries, f.head, f.task, f.last
	note := func(d core.EntryDraft) core.EntryDraft {
		d.Data = map[string]string{"text": "meddled"}
		return d
	}
	rewind := storage.ConversationValue[int]("picosim.meddled", storage.Rewind).Address
	out := []badWrite{
		{core.RuleStateAfterEntry, "rewindable state after an entry", func(tx *core.ConversationTx) {
			tx.Entry(core.NoticeKind, note(core.EntryDraft{}))
			tx.SetValue(rewind, 1)
		}},
		{core.RuleUnknownEntryKind, "an entry of a kind nobody registered", func(tx *core.ConversationTx) {
			tx.Entry(rawKind("picosim.nonesuch"), note(core.EntryDraft{}))
		}},
		{core.RuleUnknownTaskKind, "a task of a kind nobody registered", func(tx *core.ConversationTx) {
			tx.Task(rawKind("picosim.nonesuch"), core.TaskSpec{Background: true})
		}},
		{core.RuleDependency, "a task after one that does not exist", func(tx *core.ConversationTx) {
			tx.Task(meddlerStatuses, core.TaskSpec{Background: true, After: []storage.ID{last + 1000}})
		}},
		{core.RuleDependency, "a task after itself", func(tx *core.ConversationTx) {
			n := tx.Entry(core.NoticeKind, note(core.EntryDraft{})) // the task's id is the next
			tx.Task(meddlerStatuses, core.TaskSpec{Background: true, After: []storage.ID{n + 1}})
		}},
		{core.RuleDependency, "a task after a later task of its batch", func(tx *core.ConversationTx) {
			n := tx.Entry(core.NoticeKind, note(core.EntryDraft{}))
			tx.Task(meddlerStatuses, core.TaskSpec{Background: true, After: []storage.ID{n + 2}})
			tx.Task(meddlerStatuses, core.TaskSpec{Background: true})
		}},
		{core.RuleDependency, "a task after an earlier id that is no task", func(tx *core.ConversationTx) {
			n := tx.Entry(core.NoticeKind, note(core.EntryDraft{}))
			tx.Task(meddlerStatuses, core.TaskSpec{Background: true, After: []storage.ID{n}})
		}},
		{core.RuleBadPayload, "a value that is not JSON", func(tx *core.ConversationTx) {
			tx.SetValue(storage.ConversationValue[int]("picosim.meddled.sticky", storage.Sticky).Address, json.RawMessage(`{"open":`))
		}},
		{core.RuleInvalidUTF8, "an entry whose message is not UTF-8", func(tx *core.ConversationTx) {
			tx.Entry(core.NoticeKind, core.EntryDraft{Model: []ai.Message{ai.UserText("meddled \xff", 0)}})
		}},
		{core.RuleInvalidUTF8, "a value that is not UTF-8", func(tx *core.ConversationTx) {
			tx.SetValue(storage.ConversationValue[string]("picosim.meddled.text", storage.Sticky).Address, "meddled \xff")
		}},
		{agent.RuleCollapseSetting, "a collapse threshold above 1", func(tx *core.ConversationTx) {
			tx.SetValue(agent.CollapseThresholdValue.Address, 1.5)
		}},
		{agent.RuleCollapseSetting, "a collapse threshold below 0", func(tx *core.ConversationTx) {
			tx.SetValue(agent.CollapseThresholdValue.Address, -0.25)
		}},
		{agent.RuleCollapseSetting, "a negative count of recent tokens to keep", func(tx *core.ConversationTx) {
			tx.SetValue(agent.CollapseKeepRecentValue.Address, int64(-1))
		}},
		{core.RuleUnknownConv, "an entry in a conversation that does not exist", func(tx *core.ConversationTx) {
			tx.Tx.Entry(core.NoticeKind, last+1000, note(core.EntryDraft{}))
		}},
		{core.RuleHeadNotVisible, "a head at an id that is no entry", func(tx *core.ConversationTx) {
			tx.Entry(core.NoticeKind, note(core.EntryDraft{Head: conv}))
		}},
		{core.RuleEditTarget, "an edit of an id that is no entry", func(tx *core.ConversationTx) {
			tx.Entry(core.NoticeKind, note(core.EntryDraft{Edits: []storage.ContextEdit{{Target: conv, Action: storage.EditOmit}}}))
		}},
	}
	if task != 0 {
		out = append(out, badWrite{core.RuleScratchInMain, "a task's scratch written in a main commit", func(tx *core.ConversationTx) {
			tx.Tx.SetValue(storage.ScratchValue[int]("picosim.meddled").In(task).Address, 1)
		}})
	}
	out = append(out, badWrite{core.RuleBadAddress, "a value at an address without a namespace", func(tx *core.ConversationTx) {
		tx.SetValue(storage.Address{Scope: storage.Scope{Kind: storage.ScopeConversation}}, 1)
	}}, badWrite{core.RuleUnknownTask, "a patch of a task that does not exist", func(tx *core.ConversationTx) {
		tx.Patch(last+1000, core.TaskPatch{Abort: true})
	}})
	if t := f.live; t != nil {
		out = append(out, badWrite{core.RuleUnknownStatus, "a patch to a status the task's kind does not have", func(tx *core.ConversationTx) {
			tx.Patch(t.ID, core.TaskPatch{Status: "picosim.nonesuch"})
		}}, badWrite{core.RuleSettleNotTerminal, "a settlement at a status that is not terminal", func(tx *core.ConversationTx) {
			tx.Settle(t.ID, t.Status, nil)
		}})
		if f.terminal != "" {
			out = append(out, badWrite{core.RulePatchTerminal, "a patch to a terminal status", func(tx *core.ConversationTx) {
				tx.Patch(t.ID, core.TaskPatch{Status: f.terminal})
			}})
		}
	}
	if f.stranger != 0 {
		out = append(out, badWrite{core.RuleDependencyTree, "a task after a task of another ownership tree", func(tx *core.ConversationTx) {
			tx.Task(meddlerStatuses, core.TaskSpec{Background: true, After: []storage.ID{f.stranger}})
		}})
	}
	if t := f.ended; t != nil {
		out = append(out, badWrite{core.RuleTaskTerminal, "a patch of a task that ended", func(tx *core.ConversationTx) {
			tx.Patch(t.ID, core.TaskPatch{Abort: true})
		}})
	}
	out = append(out, inputBadWrites(f)...)
	if head != nil {
		for _, e := range entries {
			if e.ID < head.Head {
				before := e.ID
				out = append(out, badWrite{core.RuleHeadBackwards, "a head before the visible head's boundary", func(tx *core.ConversationTx) {
					tx.Entry(core.NoticeKind, note(core.EntryDraft{Head: before}))
				}})
				break
			}
		}
	}
	return out
}

// inputBadWrites are the attempts on the agent's batch rule (§7.3, §8.1),
// registered with the kernel like any plugin's: an input result never
// skips a state or leaves a terminal one, and no inbox element leaves
// without its result. An attempt on a queued input checks on the line that
// it is still queued, and writes nothing when it is not.
func inputBadWrites(f badFacts) []badWrite {
	conv := f.conv
	result := func(tx *core.ConversationTx, input storage.ID, st agent.InputStatus) {
		tx.SetValue(agent.InputResultValue.In(conv).WithKey(strconv.FormatInt(int64(input), 10)).Address, agent.InputResult{Status: st})
	}
	out := []badWrite{
		{agent.RuleInputResult, "a clear of the inbox", func(tx *core.ConversationTx) {
			tx.Clear(agent.InboxList.In(conv).Address)
		}},
		{agent.RuleInputResult, "an input result under a key that is no input id", func(tx *core.ConversationTx) {
			tx.SetValue(agent.InputResultValue.In(conv).WithKey("meddled").Address, agent.InputResult{Status: agent.InputQueued})
		}},
		{agent.RuleInputResult, "an input result that begins done", func(tx *core.ConversationTx) {
			result(tx, f.last+1000, agent.InputDone)
		}},
	}
	if in := f.endedInput; in != 0 {
		out = append(out, badWrite{agent.RuleInputResult, "an ended input's result moved back to running", func(tx *core.ConversationTx) {
			result(tx, in, agent.InputRunning)
		}})
	}
	if in := f.queuedInput; in != 0 {
		still := func(tx *core.ConversationTx) bool {
			v, ok, err := tx.GetValue(agent.InputResultValue.In(conv).WithKey(strconv.FormatInt(int64(in), 10)).Address, 0)
			r, uerr := core.Unmarshal[agent.InputResult](v.Value)
			return err == nil && ok && uerr == nil && r.Status == agent.InputQueued
		}
		out = append(out, badWrite{agent.RuleInputResult, "a queued input's result skipping to done", func(tx *core.ConversationTx) {
			if still(tx) {
				result(tx, in, agent.InputDone)
			}
		}}, badWrite{agent.RuleInputResult, "a queued input's inbox element removed without its result", func(tx *core.ConversationTx) {
			if still(tx) {
				tx.Remove(agent.InboxList.In(conv).Address, in)
			}
		}})
	}
	return out
}

// inputFacts finds a queued and an ended input of conversation conv among
// its input results (0: none).
func inputFacts(ctx context.Context, store storage.Storage, conv storage.ID) (queued, ended storage.ID) {
	page, err := store.ScanValues(ctx, storage.ValueQuery{Scope: storage.Scope{Kind: storage.ScopeConversation, ID: conv},
		Namespace: agent.InputResultValue.Namespace, Limit: storage.PageLimitMax})
	if err != nil {
		return 0, 0
	}
	for _, kv := range page.Items {
		id, err := strconv.ParseInt(kv.Key, 10, 64)
		r, uerr := core.Unmarshal[agent.InputResult](kv.Version.Value)
		switch {
		case err != nil || uerr != nil:
		case r.Status == agent.InputQueued && queued == 0:
			queued = storage.ID(id)
		case r.Status.Terminal() && ended == 0:
			ended = storage.ID(id)
		}
	}
	return queued, ended
}

// ruleAdmitsGoodWrites: a batch that breaks no rule commits. The bad
// writes' refusals say nothing of a kernel that refuses too much: a fork
// made in a batch and, in the same batch, a head and an edit in the fork
// at the entry it was forked at (visible to it through its parent, §2.1)
// must land.
const ruleAdmitsGoodWrites oracleRule = "good-writes-commit"

// tryGoodWrite commits, as the host, a fork of conversation conv at its
// newest entry with a head and an edit of that entry in the fork, in one
// batch, and collapse settings at the ends of their ranges; a refusal by a
// rule fails the run.
func (e *env) tryGoodWrite(ctx context.Context, h *core.Harness, conv storage.ID, entries []*storage.Entry) {
	if len(entries) == 0 {
		return
	}
	at := entries[len(entries)-1].ID
	_, err := h.Commit(ctx, func(tx *core.Tx) error {
		fork := tx.Fork(conv, at)
		draft := core.EntryDraft{Data: map[string]string{"text": "meddled"}}
		head, edit := draft, draft
		head.Head = at
		edit.Edits = []storage.ContextEdit{{Target: at, Action: storage.EditOmit}}
		tx.Entry(core.NoticeKind, fork, head)
		tx.Entry(core.NoticeKind, fork, edit)
		return nil
	})
	if rule := core.RuleOf(err); rule != "" {
		_ = e.oracle.fail(broke(ruleAdmitsGoodWrites, "the host's fork of conversation %d at entry %d, with a head and an edit of it in the fork, was refused by %q: %v", conv, at, rule, err))
		return
	}
	// Collapse settings at the ends of their ranges, in a conversation of
	// their own (so that no turn collapses by them): a threshold of 0
	// (off) with nothing kept, then of 1.
	var fresh storage.ID
	for i, threshold := range []float64{0, 1} {
		_, err := h.Commit(ctx, func(tx *core.Tx) error {
			if i == 0 {
				fresh = tx.CreateConversation(core.ConversationSpec{})
				tx.SetValue(agent.CollapseKeepRecentValue.In(fresh).Address, int64(0))
			}
			tx.SetValue(agent.CollapseThresholdValue.In(fresh).Address, threshold)
			return nil
		})
		if rule := core.RuleOf(err); rule != "" {
			_ = e.oracle.fail(broke(ruleAdmitsGoodWrites, "the host's collapse threshold of %v in a conversation of its own was refused by %q: %v", threshold, rule, err))
			return
		}
		if err != nil {
			return
		}
	}
}

// tryBadWrites makes the attempts on conversation conv as the host, and
// returns the rules that refused them.
func (e *env) tryBadWrites(ctx context.Context, conv storage.ID) (refused []core.Rule) {
	if e.h == nil {
		return nil
	}
	h := e.h.Harness
	c, err := h.Conversation(ctx, conv)
	if err != nil {
		return nil
	}
	page, err := h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax})
	if err != nil {
		return nil
	}
	head, _, err := h.Store().NewestHead(ctx, conv, 0)
	if err != nil {
		return nil
	}
	f := badFacts{conv: conv, entries: page.Items, head: head, last: h.Store().LastSeq()}
	if tasks, err := h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: 1}}); err == nil && len(tasks.Items) > 0 {
		f.task = tasks.Items[0].ID
	}
	live := true
	if tasks, err := h.Store().ScanTasks(ctx, storage.TaskQuery{Live: &live, Cursor: storage.Cursor{Limit: 1}}); err == nil && len(tasks.Items) > 0 {
		f.live = tasks.Items[0]
		if kind, ok := h.Kinds().Task(f.live.Kind); ok {
			for _, st := range meddleStatuses {
				if role, ok := kind.Role(st); ok && role == storage.RoleTerminal {
					f.terminal = st
					break
				}
			}
		}
	}
	if tasks, err := h.Store().ScanTasks(ctx, storage.TaskQuery{Role: storage.RoleTerminal, Cursor: storage.Cursor{Limit: 1}}); err == nil && len(tasks.Items) > 0 {
		f.ended = tasks.Items[0]
	}
	f.stranger = strangerTask(ctx, h.Store(), conv)
	f.queuedInput, f.endedInput = inputFacts(ctx, h.Store(), conv)
	e.tryGoodWrite(ctx, h, conv, page.Items)
	for _, w := range badWrites(f) {
		rng, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
			if slices.Contains(onTheLiveTask, w.rule) && !stillAsRead(tx, f.live) {
				return errNotAnymore
			}
			w.plan(tx)
			return nil
		})
		switch got := core.RuleOf(err); {
		case errors.Is(err, errNotAnymore), err == nil && rng.Last < rng.First: // its premise went away
		case err == nil:
			_ = e.oracle.fail(broke(ruleRefusesBadWrites, "the host committed %s in conversation %d, and the kernel let it", w.what, conv))
			return refused
		case got == w.rule:
			refused = append(refused, got)
		case !isSessionFault(err) && !errors.Is(err, core.ErrClosed):
			_ = e.oracle.fail(broke(ruleRefusesBadWrites, "the host's %s in conversation %d was refused by %q, not %q: %v", w.what, conv, got, w.rule, err))
			return refused
		}
	}
	return refused
}

// strangerTask is the first of the session's tasks (among its first
// strangerScan) whose conversation's ownership tree is not conv's, or 0.
func strangerTask(ctx context.Context, store storage.Storage, conv storage.ID) storage.ID {
	mine, ok := ownershipRoot(ctx, store, conv)
	if !ok {
		return 0
	}
	tasks, err := store.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: strangerScan}})
	if err != nil {
		return 0
	}
	for _, t := range tasks.Items {
		if root, ok := ownershipRoot(ctx, store, t.ConversationID); ok && root != mine {
			return t.ID
		}
	}
	return 0
}

// strangerScan bounds the tasks strangerTask looks at.
const strangerScan = 64

// ownershipRoot walks from conv through the tasks that own conversations
// to a conversation nobody owns (§2.5: a fork's parent is history, not an
// owner); false when a link cannot be read.
func ownershipRoot(ctx context.Context, store storage.Storage, conv storage.ID) (storage.ID, bool) {
	for range ownershipLinksMax {
		got, err := store.GetConversations(ctx, []storage.ID{conv})
		c, ok := got[conv]
		if err != nil || !ok {
			return 0, false
		}
		if c.Owner == 0 {
			return conv, true
		}
		owners, err := store.GetTasks(ctx, []storage.ID{c.Owner})
		if err != nil || owners[c.Owner] == nil {
			return 0, false
		}
		conv = owners[c.Owner].ConversationID
	}
	return 0, false
}

// ownershipLinksMax bounds ownershipRoot's walk.
const ownershipLinksMax = 64
