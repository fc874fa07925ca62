package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

func TestDriveRunsATaskToCompletion(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("step", nil)
		h := open(t, ctx, s, nil, kind)
		root := h.Root()
		id := simtest.CreateTask(t, ctx, root, kind, core.TaskSpec{})
		if got := must(root.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		if got := simtest.Status(t, ctx, h, id); got != "done" {
			t.Fatalf("status = %s; want done", got)
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOpenStartsNothing(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		ran := false
		kind := simtest.StepKind("step", func(context.Context, *storage.Task, *core.TaskRuntime) error { ran = true; return nil })
		h := open(t, ctx, s, nil, kind)
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		s.Runtime().Sleep(ctx, 1000)
		if ran {
			t.Fatal("a task ran without a drive")
		}
		in := must(h.Inspect(ctx))
		if len(in.Start) != 1 || len(in.Inflight) != 0 {
			t.Fatalf("inspect = %d start, %d inflight; want 1 and 0", len(in.Start), len(in.Inflight))
		}
		h.Close(ctx)
	})
}

func TestReturningWithoutATransitionFaultsTheSession(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		lazy := core.KindFuncs{Statuses: core.Statuses{Name: "lazy", Initial: "planned", Roles: simtest.TaskRoles},
			ExecuteFunc: func(context.Context, *storage.Task, *core.TaskRuntime) error { return nil }}
		store := simtest.Reopenable{Store: memory.New()} // readable after the fault closed the harness
		h := open(t, ctx, s, store, lazy)
		id := simtest.CreateTask(t, ctx, h.Root(), lazy, core.TaskSpec{})
		_, err := h.Root().Drive(ctx)
		var fe *core.FaultError
		if !errors.As(err, &fe) || fe.Task != id || fe.Kind != "lazy" || fe.Method != "execute" {
			t.Fatalf("drive = %v; want a fault naming task %d, lazy, execute", err, id)
		}
		if _, err := h.Commit(ctx, func(*core.Tx) error { return nil }); !errors.As(err, &fe) {
			t.Fatalf("commit after fault = %v; want the fault", err)
		}
		if got := must(store.GetTasks(ctx, []storage.ID{id}))[id].Status; got != "planned" {
			t.Fatalf("status after fault = %s; no outcome may be manufactured", got)
		}
	})
}

func TestAbortRunsAFreshInvocationAfterExecuteReturns(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		started := rt.NewEvent("started")
		var executeReturned, abortSawReturn bool
		var sameIdentity bool
		var executeRT *core.TaskRuntime
		kind := simtest.StepKind("blocker", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			executeRT = trt
			started.Set()
			rt.NewEvent("never").Wait(ctx) // cooperatively waits for its signal
			// the mark revoked authority: a main or scratch write rejects
			_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
			if !errors.Is(err, core.ErrTaskCancelled) {
				t.Errorf("post-mark commit = %v; want ErrTaskCancelled", err)
			}
			executeReturned = true
			return err
		})
		kind.AbortFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			abortSawReturn = executeReturned
			sameIdentity = trt == executeRT
			_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		done := rt.NewEvent("drive-done")
		rt.Go(ctx, "driver", func(ctx context.Context) {
			if r := must(h.Root().Drive(ctx)); r != core.Idle {
				t.Errorf("drive = %s", r)
			}
			done.Set()
		})
		started.Wait(ctx)
		if err := h.AbortTask(ctx, id); err != nil {
			t.Fatal(err)
		}
		done.Wait(ctx)
		if got := simtest.Status(t, ctx, h, id); got != "aborted" || !abortSawReturn || sameIdentity {
			t.Fatalf("status %s, abort after execute returned %v, same runtime %v; want aborted, true, false", got, abortSawReturn, sameIdentity)
		}
		if err := h.AbortTask(ctx, id); core.RuleOf(err) != core.RuleTaskTerminal {
			t.Fatalf("abort of a terminal task = %v; want %s", err, core.RuleTaskTerminal)
		}
		h.Close(ctx)
	})
}
