package races

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The rows of this file are about the progress guard of §6.1: a returning
// execute must have advanced its task's status epoch, the epoch counts
// every committed status change, and only the task's own invocation can
// change its status or state, so nobody else can advance (or mask) it.

// cycleState is what the cycling task keeps in its state.
type cycleState struct {
	Cycles int `json:"cycles"`
}

// statusCycle is the row "Status cycle returns to initial status". Task 2's
// first execute leaves its task where it found it, planned, after an
// intermediate committed change to running, and returns; that is progress,
// not a fault, so the driver executes it again (it is startable) and the
// second execute settles done. The order is the order of the intermediate
// change and the return relative to batch boundaries:
//
// forward: planned → running and running → planned are two batches, and an
// unrelated host batch lands between them. reverse: one batch holds both
// changes, so the intermediate status exists only inside it and the batch
// leaves the status it found.
//
// Both cells end with a control on a second session: an execute that
// commits only a state patch, a same-status patch and a rejected commit
// before returning has made no status change, and faults its session. That
// shows the guard the cycle passes is real.
func statusCycle(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {label(exec, "out"), "host:write", "host:written", label(exec, "back")},
		reverse: {label(exec, "cycle"), "host:write", "host:written"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		var (
			seen          []string // the status each execute received
			drive         core.DriveResult
			driveErr      error
			final         string
			control       error
			ctrlFinal     string
			stuckReturned bool
		)
		kind := raceKind("cycle", func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			var st cycleState
			if len(t.State) > 0 {
				check(json.Unmarshal(t.State, &st))
			}
			seen = append(seen, t.Status)
			if st.Cycles > 0 {
				return settle(ctx, rt, t.ID, "done")
			}
			if o == reverse {
				sim.Yield(ctx, "cycle")
				_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
					tx.Patch(t.ID, core.TaskPatch{Status: "running"})
					tx.Patch(t.ID, core.TaskPatch{Status: "planned", State: cycleState{Cycles: 1}})
					return nil
				})
				return err
			}
			if err := transition(ctx, rt, t.ID, "running"); err != nil {
				return err
			}
			sim.Yield(ctx, "out")
			sim.Yield(ctx, "back")
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(t.ID, core.TaskPatch{Status: "planned", State: cycleState{Cycles: 1}})
				return nil
			})
			return err
		})
		kind = inv.wrapped(kind)
		// stuck changes everything but its status, and returns.
		stuck := raceKind("stuck", func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(t.ID, core.TaskPatch{State: map[string]int{"tries": 1}})
				return nil
			}); err != nil {
				return err
			}
			if err := transition(ctx, rt, t.ID, "planned"); err != nil { // same status: no change
				return err
			}
			if err := settle(ctx, rt, t.ID, "planned"); core.RuleOf(err) != core.RuleSettleNotTerminal {
				return fmt.Errorf("settle to a start status = %v; want rule %s", err, core.RuleSettleNotTerminal)
			}
			stuckReturned = true
			return nil
		})
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, kind)
			expectID("task", createTasks(ctx, h, rootID, kind)[0], task)
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) {
				drive, driveErr = h.Root().Drive(ctx)
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				sim.Yield(ctx, "write")
				must(h.Commit(ctx, func(tx *core.Tx) error {
					core.TxValue(tx, modeValue.In(rootID)).Set("host")
					return nil
				}))
				sim.Yield(ctx, "written")
			})
			g.Wait(ctx)
			final = taskStatus(ctx, h.Store(), task)
			check(h.Close(ctx))

			// The fault closes the session's storage handle; the memory
			// store beneath it stays readable.
			durable := memory.New()
			hc := openSession(ctx, s, fault.Wrap(s.Runtime(), durable, fault.Plan{}, nil), stuck)
			id := createTasks(ctx, hc, rootID, stuck)[0]
			_, control = hc.Root().Drive(ctx)
			check(hc.Close(ctx))
			ctrlFinal = taskStatus(ctx, durable, id)
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case driveErr != nil:
				return fmt.Errorf("a status cycle back to the initial status faulted the session: %v", driveErr)
			case drive != core.Idle:
				return fmt.Errorf("drive = %q; want idle", drive)
			case final != "done":
				return fmt.Errorf("final status %q; want done", final)
			case len(seen) != 2 || seen[0] != "planned" || seen[1] != "planned":
				return fmt.Errorf("executes received statuses %v; want two, both planned (the second after the cycle)", seen)
			}
			var fe *core.FaultError
			switch {
			case !stuckReturned:
				return fmt.Errorf("control: the stuck execute did not get through its commits: %v", control)
			case !errors.As(control, &fe) || fe.Method != string(core.MethodExecute) || fe.Kind != "stuck":
				return fmt.Errorf("control: an execute without a status change returned %v; want a fault naming stuck execute", control)
			case ctrlFinal != "planned":
				return fmt.Errorf("control: the faulted task is %q; a fault manufactures no outcome", ctrlFinal)
			}
			return j.inOrder("task 2 execute start", "task 2 execute return", "task 2 execute start", "task 2 execute return")
		}
		return main, verify
	}}
}

// hostPatchesOwnedTask is the row "Host patches an owned task". Task 2's
// execute invocation owns the task. The host tries, each in its own commit,
// to change its status, its state, both with an abort mark, and to settle
// it; each rejects (RuleNotOwner) and writes nothing. Then the host marks
// it, which is allowed: the mark revokes the invocation, whose next commit
// rejects, and the abort handler settles aborted.
//
// forward: the host acts while the invocation has committed nothing yet
// (the task is planned). reverse: the host acts after the invocation
// committed running, between that and its settlement.
func hostPatchesOwnedTask(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {label(exec, "started"), "host:patch", "host:patched", label(exec, "commit")},
		reverse: {label(exec, "running"), "host:patch", "host:patched", label(exec, "settle")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		var (
			attempts   = map[string]error{}
			written    = map[string]storage.ID{} // attempt → how far lastSeq moved
			statusThen string                    // the stored status after the host's attempts
			markErr    error
			execErr    error
			final      string
		)
		kind := raceKind("owned", func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			sim.Yield(ctx, "started")
			sim.Yield(ctx, "commit")
			if execErr = transition(ctx, rt, t.ID, "running"); execErr != nil {
				return execErr
			}
			sim.Yield(ctx, "running")
			sim.Yield(ctx, "settle")
			execErr = settle(ctx, rt, t.ID, "done")
			return execErr
		})
		kind = inv.wrapped(kind)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, kind)
			expectID("task", createTasks(ctx, h, rootID, kind)[0], task)
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) {
				j.add("drive %s", must(h.Root().Drive(ctx)))
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				sim.Yield(ctx, "patch")
				other := map[order]string{forward: "running", reverse: "planned"}[o] // a real change either way
				try := func(name string, plan func(tx *core.Tx)) {
					before := h.Store().LastSeq()
					_, attempts[name] = h.Commit(ctx, func(tx *core.Tx) error { plan(tx); return nil })
					written[name] = h.Store().LastSeq() - before
				}
				try("status", func(tx *core.Tx) { tx.Patch(task, core.TaskPatch{Status: other}) })
				try("state", func(tx *core.Tx) { tx.Patch(task, core.TaskPatch{State: map[string]bool{"host": true}}) })
				try("status with mark", func(tx *core.Tx) { tx.Patch(task, core.TaskPatch{Status: other, Abort: true}) })
				try("settle", func(tx *core.Tx) { tx.Settle(task, "done", nil) })
				statusThen = taskStatus(ctx, h.Store(), task)
				markErr = h.AbortTask(ctx, task)
				sim.Yield(ctx, "patched")
			})
			g.Wait(ctx)
			final = taskStatus(ctx, h.Store(), task)
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			for _, name := range []string{"status", "state", "status with mark", "settle"} {
				if core.RuleOf(attempts[name]) != core.RuleNotOwner || written[name] != 0 {
					return fmt.Errorf("host %s write to an owned task = %v, %d writes; want rule %s and nothing written",
						name, attempts[name], written[name], core.RuleNotOwner)
				}
			}
			want := map[order]string{forward: "planned", reverse: "running"}[o]
			switch {
			case statusThen != want:
				return fmt.Errorf("after the host's attempts the task is %q; want %q, as its invocation left it", statusThen, want)
			case markErr != nil:
				return fmt.Errorf("the host's abort mark of an owned task = %v; marks remain allowed", markErr)
			case !errors.Is(execErr, core.ErrTaskCancelled):
				return fmt.Errorf("the invocation's commit after the mark = %v; want ErrTaskCancelled", execErr)
			case final != "aborted":
				return fmt.Errorf("final status %q; want aborted", final)
			}
			return j.inOrder("task 2 execute start", "task 2 execute return", "task 2 abort start", "task 2 abort return", "drive idle")
		}
		return main, verify
	}}
}
