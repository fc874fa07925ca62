package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pico-go/pico/core"
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

// meddleAsTool is a tool call's meddling, as its task's invocation.
func (e *env) meddleAsTool(ctx context.Context, rt *core.TaskRuntime, tool, call string) {
	e.meddle(ctx, rt.Harness(), rt.ConversationID(), rt.TaskID(), fmt.Sprintf("task %d (tool %s, call %s)", rt.TaskID(), tool, call),
		func(ctx context.Context, plan func(*core.Tx)) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error { plan(tx.Tx); return nil })
			return err
		})
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
// abort at once; its abort tries to create a task and then a conversation,
// a commit each, before it settles the task. The kernel must refuse both;
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
		// Refused, or cut short by the mark: any answer but an error is a
		// wait the kernel let happen.
		if ended, err := rt.WaitForTask(ctx, task.ID, selfWaitBudget); err == nil {
			_ = e.oracle.fail(broke(ruleNoSelfWait, "task %d waited for itself, and the wait returned %t", task.ID, ended))
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
			return settle(ctx, rt, "aborted")
		},
	}
}

// startMeddler starts a meddler task in conversation conv and marks it for
// abort a little later, once its execute could try to wait for itself.
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
	if e.s.Runtime().Sleep(ctx, 2*selfWaitBudget) == nil {
		_ = e.h.AbortTask(ctx, id)
	}
}
