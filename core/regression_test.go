package core_test

// Regression tests for bugs a review found in the driver.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// uncertainStore persists one armed commit and then reports failure, like
// a lost fsync reply: the batch is durable but the caller cannot know.
type uncertainStore struct {
	storage.Storage
	armed   bool
	written core.Event
}

func (u *uncertainStore) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := u.Storage.Commit(ctx, b)
	if err == nil && u.armed {
		u.armed = false
		u.written.Set()
		return storage.Range{}, errors.New("written, then the reply was lost")
	}
	return r, err
}

// Uncertain persistence faults the session before the line admits anything
// else: a commit waiting for the line must not act on storage the driver's
// indexes never learned about.
func TestUncertainPersistenceFaultsBeforeTheNextCommit(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		u := &uncertainStore{Storage: memory.New(), written: rt.NewEvent("written")}
		step := simtest.StepKind("step", nil)
		h := must(core.Open(ctx, u, core.Options{Runtime: rt, TaskKinds: []core.TaskKind{step}}))
		var otherErr error
		done := rt.NewEvent("other")
		rt.Go(ctx, "other", func(ctx context.Context) {
			defer done.Set()
			u.written.Wait(ctx)
			otherErr = h.AbortTask(ctx, u.LastSeq()) // the task the uncertain commit wrote
		})
		u.armed = true
		_, err := h.Root().Commit(ctx, func(tx *core.ConversationTx) error { tx.Task(step, core.TaskSpec{}); return nil })
		done.Wait(ctx)
		var pe *core.PersistenceError
		var fe *core.FaultError
		if !errors.As(err, &pe) || !errors.As(otherErr, &fe) {
			t.Fatalf("uncertain commit = %v, next commit = %v; want a persistence error, then the fault", err, otherErr)
		}
		h.Close(ctx)
	})
}

// A conversation attachment serves an owned child after its owner settled,
// even when a hook run had cached the child's link while the owner lived.
func TestAttachmentServesAnOwnedChildAfterItsLinksWereCachedAndDropped(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		var h *core.Harness
		var child storage.ID
		step := simtest.StepKind("step", nil)
		owner := simtest.StepKind("owner", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				child = tx.CreateConversation(core.ConversationSpec{Owner: task.ID})
				return nil
			})
			if err != nil {
				return err
			}
			_, err = h.RunHooks(ctx, step, "p", child, nil) // caches the child's link while the owner lives
			return err
		})
		h = open(t, ctx, s, nil, step, owner)
		root := h.Root()
		simtest.CreateTask(t, ctx, root, owner, core.TaskSpec{})
		must(root.Drive(ctx))
		s.Runtime().Sleep(ctx, 1) // the owner's invocation returns; its links are released
		applied := false
		root.Hooks().On(step, "p", func(context.Context, any) (any, error) { applied = true; return nil, nil }, core.HookOptions{Subtree: true})
		must(h.RunHooks(ctx, step, "p", child, nil))
		x := simtest.CreateTask(t, ctx, must(h.Conversation(ctx, child)), step, core.TaskSpec{})
		// The root is idle at once (the child's owner settled, so the child is
		// not in the root's foreground set), but its attachment serves the
		// child: let the served work run.
		s.Runtime().Sleep(ctx, 1)
		if !applied || simtest.Status(t, ctx, h, x) != "done" {
			t.Fatalf("subtree hook applied %v, child task %s; want true and done (served through the settled owner)", applied, simtest.Status(t, ctx, h, x))
		}
		h.Close(ctx)
	})
}

// A wait cycle through a task created earlier in the same batch rejects:
// W drives its child D; one commit creates X (background, after W) and Y
// (foreground in D, after X).
func TestSelfWaitThroughTasksOfTheSameBatchRejects(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		driving, release := rt.NewEvent("driving"), rt.NewEvent("release")
		var w, d storage.ID
		var h *core.Harness
		step := simtest.StepKind("step", nil)
		blocker := simtest.StepKind("blocker", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			return release.Wait(ctx) // keeps D busy, so W's drive of D keeps waiting
		})
		waiter := simtest.StepKind("waiter", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			c := must(trt.Conversation(ctx, d))
			driving.Set()
			_, err := c.Drive(ctx)
			return err
		})
		h = open(t, ctx, s, nil, step, waiter, blocker)
		must(h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			w = tx.Task(waiter, core.TaskSpec{Background: true})
			d = tx.CreateConversation(core.ConversationSpec{Owner: w})
			tx.Tx.Task(blocker, core.TaskSpec{ConversationID: d})
			return nil
		}))
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Drive(ctx) })
		driving.Wait(ctx)
		rt.Sleep(ctx, 1) // the waiter's drive is registered
		last := h.Store().LastSeq()
		_, err := h.Root().Commit(ctx, func(tx *core.ConversationTx) error {
			x := tx.Task(step, core.TaskSpec{Background: true, After: []storage.ID{w}})
			tx.Tx.Task(step, core.TaskSpec{ConversationID: d, After: []storage.ID{x}})
			return nil
		})
		if core.RuleOf(err) != core.RuleSelfWait || h.Store().LastSeq() != last {
			t.Fatalf("cycle through a same-batch task = %v; want %s and nothing written", err, core.RuleSelfWait)
		}
		release.Set()
		h.Close(ctx)
	})
}

// Found by picosim's generated programs: a watch registered on a faulted
// session was never ended (the fault ended only the watches it found, and
// close ended none), so its actor waited for ever. A fault starts the
// session's close, so a watch asked for after it is now refused, and close
// ends every watch still registered, whatever the phase.
func TestAWatchAfterAFaultIsRefusedAndCloseEndsTheRest(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		lazy := core.KindFuncs{Statuses: core.Statuses{Name: "lazy", Initial: "planned", Roles: simtest.TaskRoles},
			ExecuteFunc: func(context.Context, *storage.Task, *core.TaskRuntime) error { return nil }}
		h := open(t, ctx, s, simtest.Reopenable{Store: memory.New()}, lazy)
		var before string
		early := must(h.WatchSession(ctx))
		must(0, early.Start(ctx, func(e core.SessionEvent) { before = e.Type }))
		simtest.CreateTask(t, ctx, h.Root(), lazy, core.TaskSpec{})
		var fe *core.FaultError
		if _, err := h.Root().Drive(ctx); !errors.As(err, &fe) {
			t.Fatalf("drive = %v; want the fault", err)
		}
		if _, err := h.WatchSession(ctx); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("a session watch after the fault = %v; want ErrClosed", err)
		}
		if _, err := h.Watch(ctx, h.Root().ID, core.WatchOptions{}); !errors.Is(err, core.ErrClosed) {
			t.Fatalf("a conversation watch after the fault = %v; want ErrClosed", err)
		}
		_ = h.Close(ctx)
		must(0, s.Runtime().Sleep(ctx, time.Millisecond)) // the watch's actor delivers its last event
		if before != core.SessionEventFault {
			t.Fatalf("the earlier watch's last event = %q; want the fault", before)
		}
	})
}
