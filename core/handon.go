package core

import (
	"context"

	"github.com/pico-go/pico/storage"
)

// Handing on: under the real runtime, an invocation that settles its task
// holds back the invocations its settlement made runnable, and once it has
// completed its goroutine runs the first of them itself (the others start
// as before). A turn then passes from generation to tool to post_tools to
// the next generation on one goroutine instead of readying a goroutine for
// each task, which wakes a thread on an idle processor: those wakes and the
// sleeps after them were about an eighth of a turn's CPU.
//
// A held start only moves later, to a moment the concurrent schedule
// could have chosen too (the new goroutine not yet scheduled), so nothing
// a task may observe changes. It does not wait for long: the settling
// invocation has finished its work (TaskKind's contract), and if it calls
// on its runtime again before returning (a hook, a wait) the held starts
// go first. The simulated runtime does not hand on: its actors, and so
// every trace, stay as they were.
//
// Whether a start is held is decided on the line, where the driver
// reserves the invocation: the settling commit's Tx, or the completion,
// lends the driver its collector for that one decision (driver.held).

// handingOn is the capability of a runtime whose invocations hand on
// (RealRuntime): a goroutine it starts for one invocation may run more.
type handingOn interface{ handsOn() }

func (realRuntime) handsOn() {}

// heldStarts collects the invocations one commit or completion reserved
// while their start is held back. It belongs to that call: the driver
// fills it in the call's after-line actions, on the calling goroutine.
type heldStarts struct{ invs []*invocation }

// newHeld returns a collector, or nil when the runtime does not hand on.
func (d *driver) newHeld() *heldStarts {
	if !d.handsOn {
		return nil
	}
	return &heldStarts{}
}

// start is the action that starts a reserved invocation after the line,
// or holds it back when the decision that reserved it lent a collector.
func (d *driver) start(inv *invocation) func() {
	if held := d.held; held != nil {
		return func() { held.invs = append(held.invs, inv) }
	}
	return func() { d.goRun(inv) }
}

func (d *driver) goRun(inv *invocation) {
	d.h.rt.Go(inv.origin, inv.name, func(context.Context) { d.run(inv) })
}

// run is an invocation's goroutine: the invocation, then each one it handed
// on.
func (d *driver) run(inv *invocation) {
	for inv != nil {
		d.invoke(inv)
		inv = d.handOn(inv)
	}
}

// hold keeps what held collected until the invocation has completed.
func (inv *invocation) hold(held *heldStarts) {
	if held != nil {
		inv.held = append(inv.held, held.invs...)
	}
}

// startHeld starts every invocation inv holds back, now.
func (d *driver) startHeld(inv *invocation) {
	held := inv.held
	inv.held = nil
	for _, n := range held {
		d.goRun(n)
	}
}

// handOn, once inv has completed, starts all but the first invocation it
// held back and returns that one, for its goroutine to run next.
func (d *driver) handOn(inv *invocation) *invocation {
	if len(inv.held) == 0 {
		return nil
	}
	next := inv.held[0]
	inv.held = inv.held[1:]
	d.startHeld(inv)
	return next
}

// settles reports whether the transaction settles task.
func (tx *Tx) settles(task storage.ID) bool {
	for i := range tx.writes {
		if w := &tx.writes[i]; w.Type == storage.WriteSettle && w.ID == task {
			return true
		}
	}
	return false
}
