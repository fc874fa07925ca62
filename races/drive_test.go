package races

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// The rows of this file race drive callers (§6.2): a drive attaches a scope
// once and registers a temporary waiter; cancelling the caller removes only
// that waiter, never the attachment or the work it serves.

// stepKind commits running, passes the named points in order, settles done
// and passes the point "settled"; it journals its settlement and whether its
// ctx was done by then.
func stepKind(name string, j *journal, points ...string) core.KindFuncs {
	return raceKind(name, func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
		if err := transition(ctx, rt, t.ID, "running"); err != nil {
			return err
		}
		for _, p := range points {
			sim.Yield(ctx, p)
		}
		if ctx.Err() != nil {
			j.add("task %d signalled", t.ID)
		}
		if err := settle(ctx, rt, t.ID, "done"); err != nil {
			return err
		}
		j.add("task %d settled", t.ID)
		sim.Yield(ctx, "settled")
		return nil
	})
}

// callerKey tags a drive caller's ctx with its name, so that the tapped
// runtime can tell whose waiter event is whose.
type callerKey struct{}

func asCaller(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, callerKey{}, name)
}

// tapRuntime is the simulated runtime with the events of drive waiters
// ("drive:<conversation>") tapped: every Set and Wait is counted, and the
// event is attributed to the caller whose ctx waits on it. A waiter is
// resolved by setting its event, so its Set count is how often it was
// resolved — after a cancelled caller removed it, never again.
type tapRuntime struct {
	core.Runtime
	events []*tapEvent
}

func (r *tapRuntime) NewEvent(name string) core.Event {
	e := r.Runtime.NewEvent(name)
	if !strings.HasPrefix(name, "drive:") {
		return e
	}
	te := &tapEvent{Event: e}
	r.events = append(r.events, te)
	return te
}

// of returns the waiter events the caller waited on.
func (r *tapRuntime) of(caller string) []*tapEvent {
	var out []*tapEvent
	for _, e := range r.events {
		if e.caller == caller {
			out = append(out, e)
		}
	}
	return out
}

type tapEvent struct {
	core.Event
	caller      string
	sets, waits int
}

func (e *tapEvent) Set() { e.sets++; e.Event.Set() }

func (e *tapEvent) Wait(ctx context.Context) error {
	e.caller, _ = ctx.Value(callerKey{}).(string)
	e.waits++
	return e.Event.Wait(ctx)
}

// repeatedDrive is the row "Repeated drive and cancelled waiter". Two
// callers drive the root conversation while its task 2 runs; caller-b's ctx
// is cancelled. Afterwards a new task in the root runs with no waiter left
// (the attachment stayed), and the host drives the root a third time. The
// attachment itself is the driver's private state; what a caller sees of
// "one attachment" is that repeating the drive starts nothing twice (task 2
// executes once) and that the attachment outlives every waiter. Each
// waiter's event is tapped (tapRuntime): it is waited on once and resolved
// at most once, and never after its caller removed it — Close, which
// resolves every registered waiter, would resolve a leaked one.
//
// forward: caller-b is cancelled and leaves — its waiter removed on the line
// — before the task settles: its drive returns the cancellation and its
// waiter is never resolved, not by the settlement and not by Close.
// reverse: caller-b is cancelled, but the task's settlement resolves its
// waiter after the cancellation woke it and before its removal reached the
// line: the drive reports that resolution (idle), the waiter was resolved
// exactly once, and the late removal finds nothing to remove.
func repeatedDrive(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	head := []string{"caller-a:drive", label(exec, "in-flight"), "caller-b:drive", "caller-b:lock:line", "canceller:cancel"}
	tail := map[order][]string{
		forward: {"caller-b:lock:line", "caller-b:returned", label(exec, "settle")},
		reverse: {"caller-b:wait:drive:1", label(exec, "settle"), label(exec, "settled"), "caller-b:lock:line", "caller-b:returned"},
	}[o]
	points := append(head, tail...)
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		rt := &tapRuntime{Runtime: s.Runtime()}
		var (
			aResult, bResult, again core.DriveResult
			aErr, bErr, againErr    error
		)
		kind := inv.wrapped(stepKind("step", j, "in-flight", "settle"))
		lateRan := rt.NewEvent("late-ran")
		late := raceKind("late", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			lateRan.Set()
			return settle(ctx, trt, t.ID, "done")
		})
		main := func(ctx context.Context) {
			h := must(core.Open(ctx, memory.New(), core.Options{Runtime: rt, CheckInvariants: true, TaskKinds: []core.TaskKind{kind, late}}))
			expectID("task", createTasks(ctx, h, rootID, kind)[0], task)
			bctx, cancelB := context.WithCancel(asCaller(ctx, "caller-b"))
			defer cancelB()
			g := newGroup(rt)
			g.Go(asCaller(ctx, "caller-a"), "caller-a", func(ctx context.Context) {
				sim.Yield(ctx, "drive")
				aResult, aErr = h.Root().Drive(ctx)
			})
			g.Go(bctx, "caller-b", func(ctx context.Context) {
				sim.Yield(ctx, "drive")
				bResult, bErr = h.Root().Drive(ctx)
				j.add("caller-b returned")
				sim.Yield(ctx, "returned")
			})
			g.Go(ctx, "canceller", func(ctx context.Context) {
				sim.Yield(ctx, "cancel")
				cancelB()
			})
			g.Wait(ctx)
			// No waiter is left; the attachment alone serves new work.
			createTasks(ctx, h, rootID, late)
			check(lateRan.Wait(ctx))
			again, againErr = h.Root().Drive(asCaller(ctx, "host"))
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			a, b := rt.of("caller-a"), rt.of("caller-b")
			switch {
			case aErr != nil || aResult != core.Idle:
				return fmt.Errorf("caller-a's drive = %q, %v; want idle", aResult, aErr)
			case againErr != nil || again != core.Idle:
				return fmt.Errorf("the host's later drive = %q, %v; want idle", again, againErr)
			case len(a) != 1 || a[0].sets != 1 || a[0].waits != 1:
				return fmt.Errorf("caller-a's waiter: %d events; want one, waited on and resolved once", len(a))
			case len(b) != 1 || b[0].waits != 1:
				return fmt.Errorf("caller-b's waiter: %d events; want one, waited on once", len(b))
			case j.count("task 2 execute start") != 1:
				return fmt.Errorf("task 2 executed %d times; want once: %s", j.count("task 2 execute start"), j)
			}
			if o == forward {
				switch {
				case !errors.Is(bErr, context.Canceled):
					return fmt.Errorf("caller-b's cancelled drive = %q, %v; want context.Canceled", bResult, bErr)
				case b[0].sets != 0:
					return fmt.Errorf("caller-b's removed waiter was resolved %d times afterwards; a removed waiter is never resolved", b[0].sets)
				}
				return j.inOrder("caller-b returned", "task 2 settled")
			}
			switch {
			case bErr != nil || bResult != core.Idle:
				return fmt.Errorf("caller-b's drive, resolved while it left = %q, %v; want the resolution, idle", bResult, bErr)
			case b[0].sets != 1:
				return fmt.Errorf("caller-b's waiter was resolved %d times; want exactly once", b[0].sets)
			}
			return j.inOrder("task 2 settled", "caller-b returned")
		}
		return main, verify
	}}
}

// knownDependencySelfDrive is the row "Known dependency self-drive". Task 2
// is background work in the root; its execute creates conversation 4, which
// it owns, with a gated foreground task 6 in it, then drives conversation 4.
// The host creates a task in conversation 4 with after: [2] — a foreground
// task of the scope task 2 drives that waits for task 2. A gate actor opens
// task 6's gate last.
//
// forward: the host's task is created first; task 2's drive then rejects
// with a SelfWaitError before it registers anything — it returns without
// waiting for task 6 — and the host's task starts once task 2 has settled.
// reverse: task 2's drive registers first; the host's creation would close
// the wait cycle, so it rejects (RuleSelfWait) and writes nothing, and task
// 2's drive resolves idle once task 6 settles.
//
// In reverse, task 6's invocation (a live foreground task of the driven
// scope) then tries the same through a conversation it owns: once with the
// conversation committed first and the waiting task in a later batch, once
// with both in one batch. A task in a conversation owned by a live
// foreground task of the scope is in the scope's foreground set, so both
// would close the cycle and both must reject.
//
// Prompt acceptance (the inbox) is not built yet; when it is, its check
// belongs in this row too: a self-waiting prompt rejects before acceptance.
func knownDependencySelfDrive(o order) cell {
	const (
		task  storage.ID = 2
		child storage.ID = 4
		gated storage.ID = 6
	)
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {"host:create", "host:created", label(exec, "drive"), label(exec, "drove"), "gate:open"},
		// The first lock is task 2's own commit; the second is its drive's
		// registration.
		reverse: {label(exec, "lock:line"), label(exec, "drive"), label(exec, "lock:line"), "host:create", "host:created", "gate:open"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		rt := s.Runtime()
		childMade, gate, finished := rt.NewEvent("child-made"), rt.NewEvent("gate"), rt.NewEvent("task2-finished")
		hostTried := rt.NewEvent("host-tried")
		var (
			driveResult core.DriveResult
			driveErr    error
			createErr   error
			// task 6's attempts (reverse): the waiting task in a later batch
			// than its conversation, and in the same batch.
			laterBatchErr, sameBatchErr error
			newcomer                    storage.ID // the host's task with after: [2], when admitted
			status                      = map[storage.ID]string{}
			inChild                     []storage.ID // the tasks conversation 4 holds at the end
		)
		dependent := stepKind("dependent", j)
		gateKind := raceKind("gated", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			if err := transition(ctx, trt, t.ID, "running"); err != nil {
				return err
			}
			if o == reverse {
				check(hostTried.Wait(ctx)) // task 2's drive is registered by now
				waitsForTask2 := core.TaskSpec{After: []storage.ID{task}}
				var owned storage.ID
				must(trt.Commit(ctx, func(tx *core.ConversationTx) error {
					owned = tx.CreateConversation(core.ConversationSpec{Owner: t.ID})
					return nil
				}))
				_, laterBatchErr = trt.Commit(ctx, func(tx *core.ConversationTx) error {
					spec := waitsForTask2
					spec.ConversationID = owned
					tx.Tx.Task(dependent, spec)
					return nil
				})
				_, sameBatchErr = trt.Commit(ctx, func(tx *core.ConversationTx) error {
					spec := waitsForTask2
					spec.ConversationID = tx.CreateConversation(core.ConversationSpec{Owner: t.ID})
					tx.Tx.Task(dependent, spec)
					return nil
				})
			}
			check(gate.Wait(ctx))
			if err := settle(ctx, trt, t.ID, "done"); err != nil {
				return err
			}
			j.add("task %d settled", t.ID)
			return nil
		})
		sub := raceKind("sub", func(ctx context.Context, t *storage.Task, trt *core.TaskRuntime) error {
			defer finished.Set()
			var conv, g storage.ID
			if _, err := trt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(t.ID, core.TaskPatch{Status: "running"})
				conv = tx.CreateConversation(core.ConversationSpec{Owner: t.ID})
				g = tx.Tx.Task(gateKind, core.TaskSpec{ConversationID: conv})
				return nil
			}); err != nil {
				return err
			}
			expectID("child conversation", conv, child)
			expectID("gated task", g, gated)
			childMade.Set()
			sim.Yield(ctx, "drive")
			c := must(trt.Conversation(ctx, child))
			driveResult, driveErr = c.Drive(ctx)
			j.add("task 2 drive returned")
			sim.Yield(ctx, "drove")
			if err := settle(ctx, trt, t.ID, "done"); err != nil {
				return err
			}
			j.add("task 2 settled")
			return nil
		})
		sub, gateKind, dependent = inv.wrapped(sub), inv.wrapped(gateKind), inv.wrapped(dependent)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, sub, gateKind, dependent)
			var id storage.ID
			must(h.Commit(ctx, func(tx *core.Tx) error {
				id = tx.Task(sub, core.TaskSpec{ConversationID: rootID, Background: true})
				return nil
			}))
			expectID("task", id, task)
			g := newGroup(rt)
			g.Go(ctx, "host", func(ctx context.Context) {
				check(childMade.Wait(ctx))
				sim.Yield(ctx, "create")
				_, createErr = h.Commit(ctx, func(tx *core.Tx) error {
					newcomer = tx.Task(dependent, core.TaskSpec{ConversationID: child, After: []storage.ID{task}})
					return nil
				})
				hostTried.Set()
				sim.Yield(ctx, "created")
			})
			g.Go(ctx, "gate", func(ctx context.Context) {
				sim.Yield(ctx, "open")
				j.add("gate open")
				gate.Set()
			})
			// The root has no foreground work: this drive resolves at once
			// and leaves the root attached, which serves task 2 and, through
			// ownership, conversation 4.
			must(h.Root().Drive(ctx))
			check(finished.Wait(ctx))
			must(h.Drive(ctx))
			g.Wait(ctx)
			ids := []storage.ID{task, gated}
			if newcomer != 0 {
				ids = append(ids, newcomer)
			}
			tasks := must(h.GetTasks(ctx, ids))
			for id, t := range tasks {
				status[id] = t.Status
			}
			q := storage.TaskQuery{Cursor: storage.Cursor{Limit: 10}, ConversationIDs: []storage.ID{child}}
			for _, t := range must(h.Store().ScanTasks(ctx, q)).Items {
				inChild = append(inChild, t.ID)
			}
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			if status[task] != "done" || status[gated] != "done" {
				return fmt.Errorf("statuses %v; want tasks 2 and 6 done", status)
			}
			if o == forward {
				var se *core.SelfWaitError
				switch {
				case createErr != nil:
					return fmt.Errorf("creating the dependent task before the drive = %v; want it admitted", createErr)
				case !errors.As(driveErr, &se) || se.Task != task:
					return fmt.Errorf("task 2's drive of a scope whose task waits for it = %q, %v; want a SelfWaitError naming task 2", driveResult, driveErr)
				case status[newcomer] != "done":
					return fmt.Errorf("task %d is %q; want done once task 2 settled", newcomer, status[newcomer])
				}
				// The drive returned before task 6 could settle: it never waited.
				if err := j.inOrder("task 2 drive returned", "gate open", "task 6 settled"); err != nil {
					return err
				}
				return j.inOrder("task 2 settled", fmt.Sprintf("task %d execute start", newcomer))
			}
			switch {
			case core.RuleOf(createErr) != core.RuleSelfWait:
				return fmt.Errorf("creating a task with after: [2] while task 2 drives its scope = %v; want rule %s", createErr, core.RuleSelfWait)
			case len(inChild) != 1 || inChild[0] != gated:
				return fmt.Errorf("conversation 4 holds tasks %v; the rejected creation must add none to task 6", inChild)
			case driveErr != nil || driveResult != core.Idle:
				return fmt.Errorf("task 2's drive = %q, %v; want idle", driveResult, driveErr)
			case core.RuleOf(laterBatchErr) != core.RuleSelfWait:
				return fmt.Errorf("task 6 creating a task with after: [2] in a conversation it owns = %v; want rule %s", laterBatchErr, core.RuleSelfWait)
			}
			if err := j.inOrder("gate open", "task 6 settled", "task 2 drive returned", "task 2 settled"); err != nil {
				return err
			}
			if core.RuleOf(sameBatchErr) != core.RuleSelfWait {
				return fmt.Errorf("an owned conversation plus a task with after: [2] created in one batch = %v; want rule %s", sameBatchErr, core.RuleSelfWait)
			}
			return nil
		}
		return main, verify
	}}
}

// overlappingDrives is the row "Two overlapping drives". Drive-a drives the
// session and drive-b the root conversation; the root holds task 2, which
// cycles (its first execute returns it to planned, its second settles
// done), and task 3, which settles in one execute. The second drive's
// attachment reconsiders every live task while task 2's first execute still
// runs; a task is executed by one invocation at a time, and exactly as
// often as its statuses call for: task 2 twice, task 3 once.
//
// forward: drive-a attaches first, and drive-b attaches while task 2's
// first execute is in flight with the task running (inflight: recover
// would be its method if the slot were free). reverse: drive-b attaches
// first, and drive-a attaches after task 2's first execute has committed
// the return to planned and before its method returns: the task is live
// and startable, and only its held slot keeps a second execute from
// starting beside the first.
func overlappingDrives(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {"drive-a:drive", label(exec, "in-flight"), "drive-b:drive", "drive-b:lock:line", label(exec, "effect")},
		reverse: {"drive-b:drive", label(exec, "back"), "drive-a:drive", "drive-a:lock:line", label(exec, "returning")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		var (
			aResult, bResult core.DriveResult
			aErr, bErr       error
			status           = map[storage.ID]string{}
		)
		cycle := inv.wrapped(raceKind("cycle", func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			if len(t.State) > 0 {
				return settle(ctx, rt, t.ID, "done")
			}
			if err := transition(ctx, rt, t.ID, "running"); err != nil {
				return err
			}
			sim.Yield(ctx, "in-flight")
			sim.Yield(ctx, "effect")
			if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				tx.Patch(t.ID, core.TaskPatch{Status: "planned", State: cycleState{Cycles: 1}})
				return nil
			}); err != nil {
				return err
			}
			sim.Yield(ctx, "back")
			sim.Yield(ctx, "returning")
			return nil
		}))
		plain := inv.wrapped(stepKind("plain", j))
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, cycle, plain)
			ids := createTasks(ctx, h, rootID, cycle, plain)
			expectID("task", ids[0], task)
			g := newGroup(s.Runtime())
			g.Go(ctx, "drive-a", func(ctx context.Context) {
				sim.Yield(ctx, "drive")
				aResult, aErr = h.Drive(ctx)
			})
			g.Go(ctx, "drive-b", func(ctx context.Context) {
				sim.Yield(ctx, "drive")
				bResult, bErr = h.Root().Drive(ctx)
			})
			g.Wait(ctx)
			for id, t := range must(h.GetTasks(ctx, ids)) {
				status[id] = t.Status
			}
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case aErr != nil || aResult != core.Idle || bErr != nil || bResult != core.Idle:
				return fmt.Errorf("drives = (%q, %v), (%q, %v); want both idle", aResult, aErr, bResult, bErr)
			case status[2] != "done" || status[3] != "done":
				return fmt.Errorf("statuses %v; want both done", status)
			case j.count("task 2 execute start") != 2:
				return fmt.Errorf("task 2 executed %d times; want twice (one per cycle): %s", j.count("task 2 execute start"), j)
			case j.count("task 3 execute start") != 1:
				return fmt.Errorf("task 3 executed %d times; want once: %s", j.count("task 3 execute start"), j)
			}
			return nil
		}
		return main, verify
	}}
}

// driveCallerCancels is the row "A drive caller cancels its wait".
// Caller-a's drive attaches the root, which reserves the root's tasks 2 and
// 3; caller-b drives the root too; then caller-a's ctx is cancelled. The
// invocations caller-a's drive started do not inherit its cancellation:
// their ctx is never done, both tasks settle done (no abort), and caller-b
// gets idle.
//
// forward: the cancellation lands while task 2's execute is in flight.
// reverse: it lands after caller-a's drive reserved the invocations but
// before either has started to run.
func driveCallerCancels(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {"caller-a:drive", label(exec, "in-flight"), "caller-b:drive", "caller-b:lock:line",
			"canceller:cancel", "caller-a:returned", label(exec, "settle")},
		reverse: {"caller-a:drive", "caller-a:lock:line", "caller-b:drive", "caller-b:lock:line",
			"canceller:cancel", "caller-a:returned", label(exec, "start"), label(actor(3, core.MethodExecute), "start")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		var (
			aResult, bResult core.DriveResult
			aErr, bErr       error
			status           = map[storage.ID]string{}
		)
		kind := inv.wrapped(stepKind("step", j, "in-flight", "settle"))
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, kind)
			ids := createTasks(ctx, h, rootID, kind, kind)
			expectID("task", ids[0], task)
			actx, cancelA := context.WithCancel(ctx)
			defer cancelA()
			g := newGroup(s.Runtime())
			g.Go(actx, "caller-a", func(ctx context.Context) {
				sim.Yield(ctx, "drive")
				aResult, aErr = h.Root().Drive(ctx)
				j.add("caller-a returned")
				sim.Yield(ctx, "returned")
			})
			g.Go(ctx, "caller-b", func(ctx context.Context) {
				sim.Yield(ctx, "drive")
				bResult, bErr = h.Root().Drive(ctx)
			})
			g.Go(ctx, "canceller", func(ctx context.Context) {
				sim.Yield(ctx, "cancel")
				cancelA()
			})
			g.Wait(ctx)
			for id, t := range must(h.GetTasks(ctx, ids)) {
				status[id] = t.Status
			}
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case !errors.Is(aErr, context.Canceled):
				return fmt.Errorf("caller-a's cancelled drive = %q, %v; want context.Canceled", aResult, aErr)
			case bErr != nil || bResult != core.Idle:
				return fmt.Errorf("caller-b's drive = %q, %v; want idle, unaffected", bResult, bErr)
			case status[2] != "done" || status[3] != "done":
				return fmt.Errorf("statuses %v; want both done, unaffected", status)
			case j.has("task 2 signalled") || j.has("task 3 signalled"):
				return fmt.Errorf("an invocation saw the drive caller's cancellation: %s", j)
			case j.has("task 2 abort start") || j.has("task 3 abort start"):
				return fmt.Errorf("an abort ran; a drive caller's cancellation is not a mark: %s", j)
			case j.count("task 2 execute start") != 1 || j.count("task 3 execute start") != 1:
				return fmt.Errorf("want one execute per task: %s", j)
			}
			if o == forward {
				return j.inOrder("task 2 execute start", "caller-a returned", "task 2 settled")
			}
			return j.inOrder("caller-a returned", "task 2 execute start", "task 2 settled")
		}
		return main, verify
	}}
}
