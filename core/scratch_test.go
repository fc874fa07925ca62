package core_test

// Scratch (reference §4.6): one task's working state while it runs, written
// only by that task's current invocation, durable across a crash, retired by
// settlement.

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
)

var (
	frames     = storage.ScratchList[string]("frames")
	checkpoint = storage.ScratchValue[string]("checkpoint")
)

// appendFrames appends to the invocation's own frames list.
func appendFrames(ctx context.Context, rt *core.TaskRuntime, fs ...string) error {
	_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
		for _, f := range fs {
			sc.Append(frames.Address, f)
		}
		return nil
	})
	return err
}

// readFrames reads the invocation's own frames through a scratch plan.
func readFrames(ctx context.Context, rt *core.TaskRuntime) ([]string, error) {
	var out []string
	_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
		p, err := sc.ReadList(frames.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 100}})
		if err != nil {
			return err
		}
		out, err = decodeStrings(p.Items)
		return err
	})
	return out, err
}

func decodeStrings(items []storage.Element) ([]string, error) {
	out := []string{}
	for _, e := range items {
		var s string
		if err := json.Unmarshal(e.Value, &s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// storedFrames reads task id's frames from storage, outside any invocation.
func storedFrames(t testing.TB, ctx context.Context, store storage.Storage, id storage.ID) []string {
	t.Helper()
	p := must(store.ReadList(ctx, frames.In(id).Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 100}}))
	return must(decodeStrings(p.Items))
}

// A scratch plan rejects and the builder never runs.
type builderProbe struct{ ran bool }

func (b *builderProbe) scratch(ctx context.Context, rt *core.TaskRuntime) error {
	_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
		b.ran = true
		sc.Append(frames.Address, "late")
		return nil
	})
	return err
}

func TestScratchWritesOnlyTheTasksOwnScratch(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		var other storage.ID
		var errs []error
		kind := simtest.StepKind("scribe", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if err := appendFrames(ctx, rt, "mine"); err != nil {
				return err
			}
			// Another task's scratch, conversation state and session state
			// are all out of a scratch commit's reach; scratch is out of a
			// main commit's.
			_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error { sc.Append(frames.In(other).Address, "theirs"); return nil })
			errs = append(errs, err)
			_, err = rt.Scratch(ctx, func(sc core.ScratchTx) error {
				sc.SetValue(storage.ConversationValue[string]("ui.note", storage.Sticky).In(rt.ConversationID()).Address, "x")
				return nil
			})
			errs = append(errs, err)
			_, err = rt.Scratch(ctx, func(sc core.ScratchTx) error {
				sc.SetValue(storage.SessionValue[string]("note").Address, "x")
				return nil
			})
			errs = append(errs, err)
			_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error { tx.SetValue(checkpoint.In(task.ID).Address, "c"); return nil })
			errs = append(errs, err)
			return nil
		})
		h := open(t, ctx, s, nil, kind)
		other = simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{Background: true})
		_, err := h.Commit(ctx, func(tx *core.Tx) error { tx.SetValue(checkpoint.In(other).Address, "host"); return nil })
		if core.RuleOf(err) != core.RuleScratchInMain {
			t.Fatalf("host main commit writing scratch = %v; want %s", err, core.RuleScratchInMain)
		}
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(0, h.AbortTask(ctx, other)) // it only aborts: its scratch stays untouched
		must(h.Root().Drive(ctx))
		wantRules := []core.Rule{core.RuleMainInScratch, core.RuleMainInScratch, core.RuleMainInScratch, core.RuleScratchInMain}
		if len(errs) != len(wantRules) {
			t.Fatalf("%d attempts recorded; want %d", len(errs), len(wantRules))
		}
		for i, err := range errs {
			if core.RuleOf(err) != wantRules[i] {
				t.Fatalf("attempt %d = %v; want %s", i, err, wantRules[i])
			}
		}
		if got := simtest.Status(t, ctx, h, id); got != "done" {
			t.Fatalf("status = %s; want done (rejected commits are not faults)", got)
		}
		if got := storedFrames(t, ctx, h.Store(), other); len(got) != 0 {
			t.Fatalf("the other task's scratch = %v; want empty", got)
		}
		must(0, h.Close(ctx))
	})
}

// After the abort mark the execute's scratch writes reject with
// ErrTaskCancelled before the builder runs; the scratch written before the
// mark is still there for the abort handler, and settlement retires it.
func TestScratchAfterTheAbortMarkRejectsBeforeTheBuilder(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		up := rt.NewEvent("up")
		probe := &builderProbe{}
		var lateErr error
		var seenByAbort []string
		kind := simtest.StepKind("streamer", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			if err := appendFrames(ctx, trt, "f1", "f2"); err != nil {
				return err
			}
			up.Set()
			rt.NewEvent("never").Wait(ctx) // until the mark's signal
			lateErr = probe.scratch(ctx, trt)
			return lateErr
		})
		kind.AbortFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
			var err error
			if seenByAbort, err = readFrames(ctx, trt); err != nil {
				return err
			}
			return settleTask(ctx, trt, task.ID, "aborted", nil)
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		done := simtest.DriveInActor(ctx, s, h.Root(), nil)
		up.Wait(ctx)
		must(0, h.AbortTask(ctx, id))
		done.Wait(ctx)
		if !errors.Is(lateErr, core.ErrTaskCancelled) || probe.ran {
			t.Fatalf("scratch after the mark = %v, builder ran %v; want ErrTaskCancelled before the builder", lateErr, probe.ran)
		}
		if !slices.Equal(seenByAbort, []string{"f1", "f2"}) {
			t.Fatalf("abort saw scratch %v; want [f1 f2]", seenByAbort)
		}
		if got := storedFrames(t, ctx, h.Store(), id); len(got) != 0 || simtest.Status(t, ctx, h, id) != "aborted" {
			t.Fatalf("after abort: scratch %v, status %s; want none, aborted", got, simtest.Status(t, ctx, h, id))
		}
		must(0, h.Close(ctx))
	})
}

// Settle retires the scratch in the same commit; a write after it, by the
// same invocation, rejects and recreates nothing.
func TestSettleRetiresScratchAndLaterWritesReject(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		probe := &builderProbe{}
		var lateErr error
		var before []string
		var id storage.ID
		var h *core.Harness
		finished := s.Runtime().NewEvent("finished")
		kind := simtest.StepKind("settler", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if err := patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			if err := appendFrames(ctx, rt, "f1"); err != nil {
				return err
			}
			before = storedFrames(t, ctx, h.Store(), id)
			if err := settleTask(ctx, rt, task.ID, "done", nil); err != nil {
				return err
			}
			lateErr = probe.scratch(ctx, rt)
			finished.Set()
			return nil
		}
		h = open(t, ctx, s, nil, kind)
		id = simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		if _, err := h.Root().Drive(ctx); err != nil {
			t.Fatalf("drive = %v; a rejected late write is not a fault", err)
		}
		finished.Wait(ctx) // the drive is idle at the settle, before the late write
		if !slices.Equal(before, []string{"f1"}) {
			t.Fatalf("scratch before settle = %v; want [f1]", before)
		}
		if lateErr == nil || !errors.Is(lateErr, core.ErrStaleInvocation) || probe.ran {
			t.Fatalf("scratch after settle = %v, builder ran %v; want a rejection before the builder", lateErr, probe.ran)
		}
		if got := storedFrames(t, ctx, h.Store(), id); len(got) != 0 {
			t.Fatalf("scratch after settle = %v; want none", got)
		}
		must(0, h.Close(ctx))
	})
}

// A runtime or ctx kept after its invocation returned carries no authority:
// not after the task finished, and not while a newer attempt runs.
func TestStaleRuntimeOrContextRejects(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		type held struct {
			ctx context.Context
			rt  *core.TaskRuntime
		}
		var first held
		var crossed []error
		probe := &builderProbe{}
		kind := simtest.StepKind("attempts", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if attemptOf(task) == 0 {
				first = held{ctx, rt}
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(task.ID, core.TaskPatch{Status: "running"})
					tx.Patch(task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
					return nil
				})
				return err
			}
			// The second attempt holds the slot; the first's identity is stale.
			crossed = append(crossed,
				probe.scratch(first.ctx, first.rt), // old runtime, old ctx
				probe.scratch(ctx, first.rt),       // old runtime, current ctx
				probe.scratch(first.ctx, rt),       // current runtime, old ctx
			)
			_, err := first.rt.Commit(first.ctx, func(tx *core.ConversationTx) error { probe.ran = true; return nil })
			crossed = append(crossed, err)
			return settleTask(ctx, rt, task.ID, "done", nil)
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		if simtest.Status(t, ctx, h, id) != "done" {
			t.Fatalf("status = %s; want done", simtest.Status(t, ctx, h, id))
		}
		after := []error{probe.scratch(first.ctx, first.rt)}
		_, err := first.rt.Commit(first.ctx, func(*core.ConversationTx) error { probe.ran = true; return nil })
		after = append(after, err)
		_, err = h.Commit(first.ctx, func(*core.Tx) error { probe.ran = true; return nil })
		after = append(after, err)
		for i, err := range append(crossed, after...) {
			if !errors.Is(err, core.ErrStaleInvocation) {
				t.Fatalf("stale call %d = %v; want ErrStaleInvocation", i, err)
			}
		}
		if len(crossed) != 4 || probe.ran {
			t.Fatalf("%d stale calls during the second attempt, a builder ran: %v; want 4 and none", len(crossed), probe.ran)
		}
		must(0, h.Close(ctx))
	})
}

// A new attempt of the same task finds the previous attempt's scratch,
// clears it itself, and from then on sees only its own.
func TestNewAttemptClearsItsScratch(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		var inherited, own []string
		kind := simtest.StepKind("retrier", nil)
		kind.ExecuteFunc = func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
			if err := patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "running"}); err != nil {
				return err
			}
			if attemptOf(task) == 0 {
				if err := appendFrames(ctx, rt, "a1", "a2"); err != nil {
					return err
				}
				return patchTask(ctx, rt, task.ID, core.TaskPatch{Status: "planned", State: map[string]int{"attempt": 1}})
			}
			var err error
			if inherited, err = readFrames(ctx, rt); err != nil {
				return err
			}
			if _, err := rt.Scratch(ctx, func(sc core.ScratchTx) error { sc.Clear(frames.Address); return nil }); err != nil {
				return err
			}
			if err := appendFrames(ctx, rt, "b1"); err != nil {
				return err
			}
			if own, err = readFrames(ctx, rt); err != nil {
				return err
			}
			return settleTask(ctx, rt, task.ID, "done", nil)
		}
		h := open(t, ctx, s, nil, kind)
		id := simtest.CreateTask(t, ctx, h.Root(), kind, core.TaskSpec{})
		must(h.Root().Drive(ctx))
		if !slices.Equal(inherited, []string{"a1", "a2"}) || !slices.Equal(own, []string{"b1"}) {
			t.Fatalf("second attempt found %v and then saw %v; want [a1 a2], then only [b1]", inherited, own)
		}
		if got := storedFrames(t, ctx, h.Store(), id); len(got) != 0 {
			t.Fatalf("scratch after settle = %v; want none", got)
		}
		must(0, h.Close(ctx))
	})
}

// A crash before settle keeps the scratch: the next process's recover reads
// it, and its settlement retires it.
func TestCrashBeforeSettleKeepsScratchForRecover(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		up := rt.NewEvent("streaming")
		var recovered []string
		var checkpointSeen string
		kind := func() core.KindFuncs {
			k := simtest.StepKind("streamer", func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				if err := appendFrames(ctx, trt, "f1", "f2"); err != nil {
					return err
				}
				if _, err := trt.Scratch(ctx, func(sc core.ScratchTx) error { sc.SetValue(checkpoint.Address, "cp"); return nil }); err != nil {
					return err
				}
				up.Set()
				return rt.NewEvent("never").Wait(ctx)
			})
			k.RecoverFunc = func(ctx context.Context, task *storage.Task, trt *core.TaskRuntime) error {
				var err error
				if recovered, err = readFrames(ctx, trt); err != nil {
					return err
				}
				if _, err := trt.Scratch(ctx, func(sc core.ScratchTx) error {
					v, ok, err := sc.GetValue(checkpoint.Address)
					if ok {
						err = json.Unmarshal(v.Value, &checkpointSeen)
					}
					return err
				}); err != nil {
					return err
				}
				return settleTask(ctx, trt, task.ID, "failed", map[string]int{"frames": len(recovered)})
			}
			return k
		}
		store := crashableStore(s)
		h1 := open(t, ctx, s, store, kind())
		id := simtest.CreateTask(t, ctx, h1.Root(), kind(), core.TaskSpec{})
		driving := simtest.DriveInActor(ctx, s, h1.Root(), nil)
		up.Wait(ctx)

		h2 := open(t, ctx, s, store.Reopen(fault.Plan{}), kind())
		if got := storedFrames(t, ctx, h2.Store(), id); !slices.Equal(got, []string{"f1", "f2"}) {
			t.Fatalf("scratch after the crash = %v; want [f1 f2]", got)
		}
		must(h2.Drive(ctx))
		if !slices.Equal(recovered, []string{"f1", "f2"}) || checkpointSeen != "cp" {
			t.Fatalf("recover saw frames %v, checkpoint %q; want [f1 f2], cp", recovered, checkpointSeen)
		}
		if got := storedFrames(t, ctx, h2.Store(), id); len(got) != 0 || simtest.Status(t, ctx, h2, id) != "failed" {
			t.Fatalf("after recover: scratch %v, status %s; want none, failed", got, simtest.Status(t, ctx, h2, id))
		}
		must(0, h2.Close(ctx))
		simtest.CloseCrashed(ctx, h1)
		driving.Wait(ctx)
	})
}
