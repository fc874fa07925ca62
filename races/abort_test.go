package races

import (
	"context"
	"errors"
	"fmt"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/storage"
)

// The rows of this file race a durable abort mark against a running execute
// invocation (§6.3): the mark revokes the invocation's authority on the line
// at once, its signal only asks, and the fresh abort invocation starts only
// once the execute method has returned.

// effectReturnsAsAbortStarts is the row "Effect returns as abort starts".
// Task 2's execute commits running, then performs an effect that ignores
// its signal (an effect may: cancellation asks, it never rolls back), and
// settles done when the effect returns. The host marks the task.
//
// forward: the mark commits while the effect is in flight; the effect then
// returns, its settlement rejects with ErrTaskCancelled, execute returns,
// and only then does a fresh abort invocation start and settle aborted.
// reverse: the effect returns and execute settles done before the mark; the
// mark rejects (the task is terminal) and no abort invocation ever starts.
func effectReturnsAsAbortStarts(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {label(exec, "effect"), "host:mark", "host:marked", label(exec, "effect-returned")},
		reverse: {label(exec, "effect-returned"), label(exec, "settled"), "host:mark", "host:marked"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		var (
			markErr, settleErr error
			execRT             *core.TaskRuntime
			abortSignalled     bool
			final              string
		)
		kind := raceKind("effect", func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			execRT = rt
			if err := transition(ctx, rt, t.ID, "running"); err != nil {
				return err
			}
			sim.Yield(ctx, "effect") // the effect is in flight from here…
			sim.Yield(ctx, "effect-returned")
			j.add("effect returned") // …to here, whatever the signal said
			if settleErr = settle(ctx, rt, t.ID, "done"); settleErr != nil {
				return settleErr
			}
			sim.Yield(ctx, "settled")
			return nil
		})
		kind.AbortFunc = func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			if rt == execRT {
				panic("the abort invocation got the execute invocation's runtime")
			}
			abortSignalled = ctx.Err() != nil
			return settle(ctx, rt, t.ID, "aborted")
		}
		kind = inv.wrapped(kind)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, kind)
			expectID("task", createTasks(ctx, h, rootID, kind)[0], task)
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) {
				j.add("drive %s", must(h.Root().Drive(ctx)))
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				sim.Yield(ctx, "mark")
				markErr = h.AbortTask(ctx, task)
				sim.Yield(ctx, "marked")
			})
			g.Wait(ctx)
			final = taskStatus(ctx, h.Store(), task)
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			if n := j.count("task 2 execute start"); n != 1 {
				return fmt.Errorf("execute started %d times; want once: %s", n, j)
			}
			if o == reverse {
				switch {
				case settleErr != nil:
					return fmt.Errorf("the settlement that won the line failed: %v", settleErr)
				case core.RuleOf(markErr) != core.RuleTaskTerminal:
					return fmt.Errorf("the mark after the settlement = %v; want rule %s", markErr, core.RuleTaskTerminal)
				case j.has("task 2 abort start"):
					return fmt.Errorf("an abort invocation ran for a task that settled first: %s", j)
				case final != "done":
					return fmt.Errorf("final status %q; want done", final)
				}
				return j.inOrder("effect returned", "task 2 execute return", "drive idle")
			}
			switch {
			case markErr != nil:
				return fmt.Errorf("the mark during the effect failed: %v", markErr)
			case !errors.Is(settleErr, core.ErrTaskCancelled):
				return fmt.Errorf("the post-mark settlement = %v; want ErrTaskCancelled", settleErr)
			case j.count("task 2 abort start") != 1:
				return fmt.Errorf("abort started %d times; want once: %s", j.count("task 2 abort start"), j)
			case abortSignalled:
				return errors.New("the abort invocation started with a done ctx; it must get a fresh, active one")
			case final != "aborted":
				return fmt.Errorf("final status %q; want aborted", final)
			}
			return j.inOrder("effect returned", "task 2 execute return", "task 2 abort start", "task 2 abort return", "drive idle")
		}
		return main, verify
	}}
}

// frames is the scratch list the post-mark row's sink writes.
var frames = storage.ScratchList[string]("race.frames")

// postMarkWrite is the row "Post-mark main/scratch write". Task 2's execute
// commits running, then hands a frame to its sink (which commits it to
// scratch from an actor of its own) and commits a main write (an entry and
// a value); it drains its sink before it returns. The host marks the task;
// the abort handler reads the committed frames and settles aborted.
//
// forward: the mark commits first. The main write and the sink's scratch
// write both reject with ErrTaskCancelled before their builders run and
// write nothing; the sink takes the rejection, drops the frame and delivers
// its callback, and execute returns only after the drain; the abort handler
// finds no frame. reverse: both writes commit before the mark (the builders
// ran, the entry is durable); the settlement after the mark rejects, and
// the abort handler reads the frame committed before the mark.
func postMarkWrite(o order) cell {
	const task storage.ID = 2
	exec := actor(task, core.MethodExecute)
	points := map[order][]string{
		forward: {label(exec, "ready"), "host:mark", "host:marked", label(exec, "write")},
		reverse: {label(exec, "written"), "sink:delivered", "host:mark", "host:marked"},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		j := &journal{}
		inv := newInvocations(j)
		var (
			mainErr, settleErr, markErr error
			mainBuilt                   bool
			sink                        *frameSink
			abortFrames                 = -1
			entries                     = -1
			final                       string
		)
		kind := raceKind("writer", func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			if err := transition(ctx, rt, t.ID, "running"); err != nil {
				return err
			}
			sink = newFrameSink(s.Runtime(), rt, j)
			sim.Yield(ctx, "ready")
			sim.Yield(ctx, "write")
			sink.Write(ctx, "frame")
			_, mainErr = rt.Commit(ctx, func(tx *core.ConversationTx) error {
				mainBuilt = true
				core.TxValue(tx.Tx, modeValue.In(tx.ID)).Set("written")
				core.AppendNotice(tx.Tx, tx.ID, map[string]string{"output": "partial"}, nil)
				return nil
			})
			sim.Yield(ctx, "written")
			err := mainErr
			if err == nil {
				// The writes landed before the mark: work on until the
				// signal asks this invocation to stop, then try to settle.
				_ = s.Runtime().NewEvent("never").Wait(ctx)
				settleErr = settle(ctx, rt, t.ID, "done")
				err = settleErr
			}
			sink.Drain(ctx)
			j.add("sink drained")
			return err
		})
		kind.AbortFunc = func(ctx context.Context, t *storage.Task, rt *core.TaskRuntime) error {
			_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
				p, err := sc.ReadList(frames.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}})
				abortFrames = len(p.Items)
				return err
			})
			if err != nil {
				return err
			}
			return settle(ctx, rt, t.ID, "aborted")
		}
		kind = inv.wrapped(kind)
		main := func(ctx context.Context) {
			h := openSession(ctx, s, nil, kind)
			expectID("task", createTasks(ctx, h, rootID, kind)[0], task)
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) {
				j.add("drive %s", must(h.Root().Drive(ctx)))
			})
			g.Go(ctx, "host", func(ctx context.Context) {
				sim.Yield(ctx, "mark")
				markErr = h.AbortTask(ctx, task)
				sim.Yield(ctx, "marked")
			})
			g.Wait(ctx)
			final = taskStatus(ctx, h.Store(), task)
			p := must(h.Entries(ctx, rootID, storage.Cursor{Limit: 10}))
			entries = len(p.Items)
			check(h.Close(ctx))
		}
		verify := func() error {
			if err := inv.check(); err != nil {
				return err
			}
			switch {
			case markErr != nil:
				return fmt.Errorf("mark: %v", markErr)
			case sink == nil:
				return errors.New("execute never made its sink")
			case sink.err != nil:
				return fmt.Errorf("the sink got an error it must not swallow: %v", sink.err)
			case sink.builtAfterMark:
				return errors.New("a post-mark scratch builder ran; the rejection must come before the builder")
			case final != "aborted":
				return fmt.Errorf("final status %q; want aborted", final)
			}
			if err := j.inOrder("sink drained", "task 2 execute return", "task 2 abort start", "drive idle"); err != nil {
				return err
			}
			if o == forward {
				switch {
				case !errors.Is(mainErr, core.ErrTaskCancelled):
					return fmt.Errorf("the post-mark main write = %v; want ErrTaskCancelled", mainErr)
				case mainBuilt:
					return errors.New("the post-mark main builder ran; the rejection must come before the builder")
				case !j.has("frame dropped") || j.has("frame committed"):
					return fmt.Errorf("the post-mark frame was not dropped by the sink: %s", j)
				case entries != 0:
					return fmt.Errorf("the transcript holds %d entries; the rejected write must leave none", entries)
				case abortFrames != 0:
					return fmt.Errorf("abort read %d frames; nothing reached scratch before the mark", abortFrames)
				}
				return j.inOrder("frame dropped", "sink drained")
			}
			switch {
			case mainErr != nil || !mainBuilt:
				return fmt.Errorf("the pre-mark main write = %v (built %v); want it committed", mainErr, mainBuilt)
			case !errors.Is(settleErr, core.ErrTaskCancelled):
				return fmt.Errorf("the post-mark settlement = %v; want ErrTaskCancelled", settleErr)
			case !j.has("frame committed"):
				return fmt.Errorf("the pre-mark frame did not commit: %s", j)
			case entries != 1:
				return fmt.Errorf("the transcript holds %d entries; want the pre-mark one", entries)
			case abortFrames != 1:
				return fmt.Errorf("abort read %d frames; want the one committed before the mark", abortFrames)
			}
			return j.inOrder("frame committed", "sink drained")
		}
		return main, verify
	}}
}

// frameSink is the smallest sink of the reference's shape (§6.3): it owns
// the scratch writes its task hands it and commits each from an actor of
// its own ("sink"); it takes a post-mark rejection (ErrTaskCancelled) as the
// end of its output and drops the frame; any other error it keeps for the
// task to report; and Drain returns only when every write has delivered its
// callback. The harness's own sinks (tool output) are not built yet: this
// one stands in for them, so the row checks what they rely on — a post-mark
// scratch write rejects, recognisably and before its builder runs, and the
// invocation's completion waits for the task's own drain.
type frameSink struct {
	rt             core.Runtime
	trt            *core.TaskRuntime
	j              *journal
	pending        []core.Event
	err            error
	builtAfterMark bool
}

func newFrameSink(rt core.Runtime, trt *core.TaskRuntime, j *journal) *frameSink {
	return &frameSink{rt: rt, trt: trt, j: j}
}

// Write hands one frame to the sink; it returns at once.
func (f *frameSink) Write(ctx context.Context, text string) {
	delivered := f.rt.NewEvent("frame")
	f.pending = append(f.pending, delivered)
	f.rt.Go(ctx, "sink", func(ctx context.Context) {
		built := false
		_, err := f.trt.Scratch(ctx, func(sc core.ScratchTx) error {
			built = true
			sc.Append(frames.Address, text)
			return nil
		})
		switch {
		case err == nil:
			f.j.add("frame committed")
		case errors.Is(err, core.ErrTaskCancelled):
			f.builtAfterMark = f.builtAfterMark || built
			f.j.add("frame dropped")
		default:
			f.err = err
		}
		delivered.Set()
		sim.Yield(ctx, "delivered")
	})
}

// Drain waits for every frame's callback. It ignores cancellation: a
// signalled task still drains before it returns.
func (f *frameSink) Drain(ctx context.Context) {
	for _, e := range f.pending {
		check(e.Wait(context.WithoutCancel(ctx)))
	}
}
