package races

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The rows of this file end a session while invocations run (§6.4): Close
// stops admission in one line operation and joins every invocation before
// it closes storage; a contract fault does the same on its own and rejects
// every waiter with the fault. Each row keeps its durable bytes in a memory
// store beneath a fault.Storage handle: closing the session closes only the
// handle, so the row can read what became durable and reopen.

// closeWatch journals the moment the session closes its storage.
type closeWatch struct {
	storage.Storage
	j *journal
}

func (c closeWatch) Close(ctx context.Context) error {
	c.j.add("storage closed")
	return c.Storage.Close(ctx)
}

// closeVsTaskCommit is the row "Close vs task commit". Task 2's execute
// commits running and then its settlement; the host closes the session
// meanwhile and, once Close returned, tries one more mutation.
//
// forward: the settlement gets the line before Close's line operation, and
// is still held in persistence (a storage barrier) when the host calls
// Close; the barrier is released only then. Close waits for it: the
// settlement completes and is durable, and the drive resolves idle.
// reverse: Close's line operation comes first: the settlement then rejects
// with ErrClosed and writes nothing, yet the invocation's completion is
// still admitted — Close returns after execute returned, without a fault —
// and the drive resolves closed. Either way the later mutation rejects with
// ErrClosed and the storage handle is closed.
func closeVsTaskCommit(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {"host:close", "releaser:release"},
		reverse: {"host:close", "host:lock:line", label(exec, "commit")},
	}[o]
	// settleHold holds task 2's settlement, the fourth commit (after the
	// root, the task and its running status), before persistence.
	const settleHold = "settle"
	plan := fault.Plan{}
	if o == forward {
		plan.Faults = []fault.Fault{{Name: settleHold, Kind: fault.Hold, Commit: 4}}
	}
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		rt := s.Runtime()
		running := rt.NewEvent("running")
		var (
			settleErr, closeErr, laterErr, readErr error
			drive                                  core.DriveResult
			driveErr                               error
			durable                                string
			reported                               []error
		)
		kind := inv.wrapped(raceKind("closing", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			if err := transition(ctx, trt, t.ID, "running"); err != nil {
				return err
			}
			running.Set()
			sim.Yield(ctx, "commit")
			if settleErr = settle(ctx, trt, t.ID, "done"); settleErr != nil {
				return settleErr
			}
			j.add("settlement committed")
			return nil
		}))
		main := func(ctx context.Context) {
			mem := memory.New()
			barrier := fault.Wrap(rt, mem, plan, s)
			handle := closeWatch{barrier, j}
			h := must(core.Open(ctx, handle, core.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{kind},
				Report: func(err error) { reported = append(reported, err) }}))
			expectID("task", createTasks(ctx, h, rootID, kind)[0], task)
			g := newGroup(rt)
			g.Go(ctx, "driver", func(ctx context.Context) {
				drive, driveErr = h.Root().Drive(ctx)
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				check(running.Wait(ctx))
				if o == forward {
					check(barrier.WaitHeld(ctx, settleHold)) // the settlement holds the line
				}
				sim.Yield(ctx, "close")
				j.add("close called")
				closeErr = h.Close(ctx)
				j.add("close returned")
				_, laterErr = h.Commit(ctx, func(tx *core.Tx) error {
					core.TxValue(tx, modeValue.In(rootID)).Set("after close")
					return nil
				})
			})
			if o == forward {
				g.Go(ctx, "releaser", func(ctx context.Context) {
					check(barrier.WaitHeld(ctx, settleHold))
					sim.Yield(ctx, "release")
					barrier.Release(settleHold)
				})
			}
			g.Wait(ctx)
			_, readErr = handle.GetTasks(ctx, []storage.ID{task})
			durable = taskStatus(ctx, mem, task)
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case closeErr != nil:
				return fmt.Errorf("close = %v", closeErr)
			case !errors.Is(laterErr, core.ErrClosed):
				return fmt.Errorf("a mutation after close = %v; want ErrClosed", laterErr)
			case !errors.Is(readErr, storage.ErrClosed):
				return fmt.Errorf("a read through the closed session's storage = %v; want storage.ErrClosed", readErr)
			case len(reported) > 0:
				return fmt.Errorf("closing reported %v; an invocation unwinding from close is no fault", reported)
			}
			if err := j.inOrder("task 2 execute return", "storage closed", "close returned"); err != nil {
				return err
			}
			if o == forward {
				switch {
				case settleErr != nil:
					return fmt.Errorf("the settlement that got the line first = %v; want it to complete", settleErr)
				case durable != "done":
					return fmt.Errorf("durable status %q; want the earlier settlement, done", durable)
				case driveErr != nil || drive != core.Idle:
					return fmt.Errorf("drive = %q, %v; want idle", drive, driveErr)
				}
				return j.inOrder("close called", "settlement committed", "close returned")
			}
			switch {
			case !errors.Is(settleErr, core.ErrClosed):
				return fmt.Errorf("the settlement after close's line operation = %v; want ErrClosed", settleErr)
			case durable != "running":
				return fmt.Errorf("durable status %q; want running: the rejected settlement writes nothing", durable)
			case driveErr != nil || drive != core.Closed:
				return fmt.Errorf("drive = %q, %v; want closed", drive, driveErr)
			}
			return nil
		}
		return main, verify
	}}
}

// brokenAbortHandler is the row "Broken abort handler". Task 2 (kind
// brittle) and task 3 (kind steady) execute, each waiting on its effect
// until signalled. Task 2's abort handler is broken; its failure faults the
// session: the pending drive rejects with a FaultError naming task 2,
// brittle, abort; task 3's invocation is signalled and joined before the
// storage closes; task 2 keeps its durable state (no outcome is
// manufactured). The same store then reopens: without a kind for task 2 it
// rejects; with a replacement registered under the name brittle it starts
// nothing until driven, and the drive lets the replacement settle task 2.
//
// forward: shutdown is pending when the handler breaks (it returns an
// error): shutdown rejects with the fault rather than drain forever.
// reverse: a single abort mark starts the handler, which returns without
// settling; a drive, shutdown and close called after the fault reject with
// the fault (close returns once joined).
func brokenAbortHandler(o order) cell {
	const brittle, steady storage.ID = 2, 3
	brittleAbort, steadyExec := actor(brittle, core.MethodAbort), actor(steady, core.MethodExecute)
	points := map[order][]string{
		forward: {"host:shutdown", label(brittleAbort, "break"), "driver:rejected", label(steadyExec, "unwinding")},
		reverse: {"host:mark", label(brittleAbort, "break"), "driver:rejected", label(steadyExec, "unwinding"), "host:lifecycle"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		rt := s.Runtime()
		started := map[storage.ID]core.Event{brittle: rt.NewEvent("brittle-running"), steady: rt.NewEvent("steady-running")}
		var (
			driveErr, shutdownErr, againErr, closeErr, readErr error
			unknownErr                                         error
			reported                                           []error
			durable                                            *storage.Task
			reopened                                           = map[storage.ID]string{}
			startedOnReopen                                    bool
		)
		// untilSignalled commits running and waits for its signal.
		untilSignalled := func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			if err := transition(ctx, trt, t.ID, "running"); err != nil {
				return err
			}
			started[t.ID].Set()
			_ = rt.NewEvent("never").Wait(ctx)
			j.add("task %d signalled", t.ID)
			return ctx.Err()
		}
		broken := raceKind("brittle", untilSignalled)
		broken.AbortFunc = func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			sim.Yield(ctx, "break")
			if o == forward {
				return errors.New("the abort handler broke")
			}
			return nil // without settling
		}
		steadyKind := raceKind("steady", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			err := untilSignalled(ctx, t, trt)
			sim.Yield(ctx, "unwinding")
			return err
		})
		// fixed understands brittle's statuses and settles what it finds.
		fixed := raceKind("brittle", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			return settle(ctx, trt, t.ID, "done")
		})
		main := func(ctx context.Context) {
			mem := memory.New()
			handle := fault.Wrap(rt, mem, fault.Plan{}, nil)
			h := must(core.Open(ctx, closeWatch{handle, j}, core.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{inv.wrapped(broken), inv.wrapped(steadyKind)},
				Report: func(err error) { reported = append(reported, err) }}))
			ids := createTasks(ctx, h, rootID, broken, steadyKind)
			expectID("brittle task", ids[0], brittle)
			expectID("steady task", ids[1], steady)
			g := newGroup(rt)
			g.Go(ctx, "driver", func(ctx context.Context) {
				_, driveErr = h.Root().Drive(ctx)
				j.add("drive rejected")
				sim.Yield(ctx, "rejected")
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				check(started[brittle].Wait(ctx))
				check(started[steady].Wait(ctx))
				if o == forward {
					sim.Yield(ctx, "shutdown")
					shutdownErr = h.Shutdown(ctx)
					j.add("shutdown returned")
				} else {
					sim.Yield(ctx, "mark")
					check(h.AbortTask(ctx, brittle))
					sim.Yield(ctx, "lifecycle")
					_, againErr = h.Root().Drive(ctx)
					shutdownErr = h.Shutdown(ctx)
				}
				closeErr = h.Close(ctx)
				j.add("close returned")
			})
			g.Wait(ctx)
			_, readErr = h.Store().GetTasks(ctx, []storage.ID{brittle})
			durable = must(mem.GetTasks(ctx, []storage.ID{brittle}))[brittle]

			// Reopen the durable state as a restarted process would.
			next := handle.Reopen(fault.Plan{})
			_, unknownErr = core.Open(ctx, next, core.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{steadyKind}})
			again := newInvocations(&journal{}) // the reopened process's invocations
			h2 := must(core.Open(ctx, next, core.Options{Runtime: rt, CheckInvariants: true,
				TaskKinds: []core.TaskKind{broken, again.wrapped(steadyKind)}, Replace: []core.TaskKind{again.wrapped(fixed)}}))
			check(rt.Sleep(ctx, time.Second)) // everything runnable runs: nothing may start undriven
			startedOnReopen = len(again.runtimes) > 0
			if r := must(h2.Root().Drive(ctx)); r != core.Idle {
				panic(fmt.Sprintf("drive after reopen = %s; want idle", r))
			}
			for id, t := range must(h2.GetTasks(ctx, []storage.ID{brittle, steady})) {
				reopened[id] = t.Status
			}
			check(h2.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			isFault := func(err error) bool {
				var fe *core.FaultError
				return errors.As(err, &fe) && fe.Task == brittle && fe.Kind == "brittle" && fe.Method == string(core.MethodAbort)
			}
			switch {
			case !isFault(driveErr):
				return fmt.Errorf("the pending drive = %v; want the FaultError naming task 2, brittle, abort", driveErr)
			case !isFault(shutdownErr):
				return fmt.Errorf("shutdown = %v; want the fault", shutdownErr)
			case o == reverse && !isFault(againErr):
				return fmt.Errorf("a drive after the fault = %v; want the fault", againErr)
			case closeErr != nil:
				return fmt.Errorf("close after the fault = %v; want it to return once joined", closeErr)
			case len(reported) != 1 || !isFault(reported[0]):
				return fmt.Errorf("reported %v; want the fault, once", reported)
			case !errors.Is(readErr, storage.ErrClosed):
				return fmt.Errorf("a read through the faulted session's storage = %v; want storage.ErrClosed", readErr)
			case durable.Status != "running" || !durable.Abort:
				return fmt.Errorf("task 2 is durably %q (marked %v); want running and marked, no manufactured outcome", durable.Status, durable.Abort)
			case j.has("task 3 abort start"):
				return fmt.Errorf("a faulted session started an abort: %s", j)
			case j.count("task 2 abort start") != 1:
				return fmt.Errorf("the broken handler ran %d times; want once: %s", j.count("task 2 abort start"), j)
			}
			// The fault rejects the pending drive at once; task 3's
			// invocation, still running at the fault, is joined after that
			// and before storage closes. Shutdown's mark signalled it
			// already (forward); otherwise the fault does.
			if err := j.inOrder("task 2 abort return", "drive rejected", "task 3 execute return", "storage closed", "close returned"); err != nil {
				return err
			}
			if o == forward {
				// The fault rejects the pending shutdown (§6.1: at once; it
				// does not wait for the join, though the scheduler may still
				// run the join before the shutdown caller resumes).
				if err := j.inOrder("task 2 abort return", "shutdown returned"); err != nil {
					return err
				}
			} else if err := j.inOrder("task 2 abort return", "task 3 signalled"); err != nil {
				return err
			}
			var uk *core.UnknownKindError
			steadyWant := map[order]string{forward: "aborted", reverse: "failed"}[o] // marked by shutdown, or recovered
			switch {
			case !errors.As(unknownErr, &uk) || uk.Task != brittle:
				return fmt.Errorf("reopening without a kind for task 2 = %v; want an UnknownKindError naming it", unknownErr)
			case startedOnReopen:
				return errors.New("reopening started an invocation before any drive")
			case reopened[brittle] != "aborted":
				return fmt.Errorf("after reopen task 2 is %q; want the replacement's abort to settle it aborted", reopened[brittle])
			case reopened[steady] != steadyWant:
				return fmt.Errorf("after reopen task 3 is %q; want %q", reopened[steady], steadyWant)
			}
			return nil
		}
		return main, verify
	}}
}
