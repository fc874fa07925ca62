package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

var progressList = storage.ScratchList[string]("progress")

func progressFrames(t testing.TB, ctx context.Context, rt *core.TaskRuntime) []string {
	var out []string
	must(rt.Scratch(ctx, func(sc core.ScratchTx) error {
		p, err := sc.ReadList(progressList.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 100}})
		for _, e := range p.Items {
			var s string
			json.Unmarshal(e.Value, &s)
			out = append(out, s)
		}
		return err
	}))
	return out
}

func TestProgressDropsOutputAfterTheMarkAndDrains(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		started := rt.NewEvent("started")
		var dropped int
		var seenByAbort []string
		kind := simtest.StepKind("streamer", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			p := must(trt.Progress(ctx))
			p.Write(func(sc core.ScratchTx) error { sc.Append(progressList.Address, "f1"); return nil })
			started.Set()
			rt.NewEvent("never").Wait(ctx) // the signal arrives after the mark
			p.Write(func(sc core.ScratchTx) error { sc.Append(progressList.Address, "late"); return nil })
			dropped = p.Dropped()
			return core.ErrTaskCancelled
		})
		kind.AbortFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			seenByAbort = progressFrames(t, ctx, trt)
			_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Root().Drive(ctx) })
		started.Wait(ctx)
		must(0, h.AbortTask(ctx, id))
		must(h.Root().Drive(ctx))
		if dropped != 1 || !slices.Equal(seenByAbort, []string{"f1"}) {
			t.Fatalf("dropped %d, abort saw %v; want the late frame dropped and [f1] durable", dropped, seenByAbort)
		}
		h.Close(ctx)
	})
}

func TestProgressPersistenceFailureFaultsTheSession(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		plan := fault.Plan{Faults: []fault.Fault{{Name: "disk", Kind: fault.Fail, Commit: 2, Batch: storage.BatchScratch}}}
		store := fault.Wrap(s.Runtime(), memory.New(), plan, s)
		kind := simtest.StepKind("streamer", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			p := must(trt.Progress(ctx))
			p.Write(func(sc core.ScratchTx) error { sc.Append(progressList.Address, "f1"); return nil })
			p.Write(func(sc core.ScratchTx) error { sc.Append(progressList.Address, "f2"); return nil })
			return nil
		})
		h := open(t, ctx, s, store, kind)
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		_, err := h.Root().Drive(ctx)
		var fe *core.FaultError
		if !errors.As(err, &fe) || !errors.Is(err, fault.ErrInjected) {
			t.Fatalf("drive = %v; want a fault caused by the injected persistence failure", err)
		}
	})
}

func TestDerivedContextsKeepTheTaskIdentity(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		type key struct{}
		kind := core.KindFuncs{Statuses: core.Statuses{Name: "deriver", Initial: "planned", Roles: simtest.TaskRoles},
			ExecuteFunc: func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				derived, cancel := context.WithCancel(context.WithValue(ctx, key{}, "telemetry-ish"))
				defer cancel()
				_, err := trt.Commit(derived, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "done", nil); return nil })
				return err
			}}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		if got := simtest.Status(t, ctx, h, id); got != "done" {
			t.Fatalf("status = %s; a derived ctx must keep the invocation's authority", got)
		}
		h.Close(ctx)
	})
}

func TestRepeatedMarkSparesARunningAbort(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		aborting, release := rt.NewEvent("aborting"), rt.NewEvent("release")
		var abortCtxErr error
		kind := simtest.StepKind("slow-abort", nil)
		kind.AbortFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			aborting.Set()
			release.Wait(ctx)
			abortCtxErr = ctx.Err()
			_, err := trt.Commit(ctx, func(tx *core.ConversationTx) error { tx.Settle(task.ID, "aborted", nil); return nil })
			return err
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(0, h.AbortTask(ctx, id)) // marked before it ever ran: abort ignores after and execute
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Root().Drive(ctx) })
		aborting.Wait(ctx)
		last := h.Store().LastSeq()
		must(0, h.AbortTask(ctx, id))
		if h.Store().LastSeq() != last {
			t.Fatal("a repeated mark wrote something")
		}
		release.Set()
		must(h.Root().Drive(ctx))
		if abortCtxErr != nil || simtest.Status(t, ctx, h, id) != "aborted" {
			t.Fatalf("abort ctx %v, status %s; want an undisturbed abort that settled", abortCtxErr, simtest.Status(t, ctx, h, id))
		}
		h.Close(ctx)
	})
}

func TestCloseInterruptsShutdown(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		aborting := rt.NewEvent("aborting")
		kind := simtest.StepKind("stuck-abort", func(ctx context.Context, _ *storage.Task, _ *core.TaskRuntime) error {
			return rt.NewEvent("never").Wait(ctx)
		})
		kind.AbortFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			aborting.Set()
			return rt.NewEvent("never").Wait(ctx) // only close cancels an abort handler
		}
		h := open(t, ctx, s, nil, kind)
		simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		var shutdownErr error
		done := rt.NewEvent("shutdown-returned")
		rt.Go(ctx, "driver", func(ctx context.Context) { h.Root().Drive(ctx) })
		rt.Go(ctx, "shutdown", func(ctx context.Context) {
			shutdownErr = h.Shutdown(ctx)
			done.Set()
		})
		aborting.Wait(ctx)
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		done.Wait(ctx)
		if !errors.Is(shutdownErr, core.ErrShutdownInterrupted) {
			t.Fatalf("shutdown = %v; want ErrShutdownInterrupted", shutdownErr)
		}
	})
}

func TestOwnershipLinksAreReleasedWhenNothingNeedsThem(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		kind := simtest.StepKind("child-work", nil)
		h := open(t, ctx, s, nil, kind)
		root := h.Root()
		rt := s.Runtime()
		baseline := -1
		for round := range 3 {
			// A background owner spawns ten owned children, each with work.
			must(root.Commit(ctx, func(tx *core.ConversationTx) error {
				owner := tx.Task(kind, core.TaskSpec{Background: true})
				for range 10 {
					child := tx.CreateConversation(core.ConversationSpec{Owner: owner})
					tx.Tx.Task(kind, core.TaskSpec{ConversationID: child})
				}
				return nil
			}))
			must(h.Drive(ctx))
			rt.Sleep(ctx, 1) // let every invocation return
			st := must(h.Stats(ctx))
			if st.Live != 0 || st.Running != 0 {
				t.Fatalf("round %d: %+v; want nothing live or running", round, st)
			}
			if baseline < 0 {
				baseline = st.Links
			} else if st.Links != baseline {
				t.Fatalf("round %d: %d cached links; want %d, as after the first round (links leak)", round, st.Links, baseline)
			}
		}
		if baseline > 2 {
			t.Fatalf("%d links cached with nothing live; want only the session attachment's", baseline)
		}
		h.Close(ctx)
	})
}
