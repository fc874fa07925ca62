package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim/clock"
)

// runtimeOf is the simulated core.Runtime.
type runtimeOf struct{ s *Sim }

var _ core.Runtime = runtimeOf{}

// current returns the running actor, and panics when a blocking call
// evidently comes from outside the simulation's actors: a ctx that no actor
// of this run derived, or no run in progress. Contexts may cross between
// actors (a shared cancellation scope is normal); the caller is then the
// actor holding the baton, since exactly one runs at a time.
func (r runtimeOf) current(ctx context.Context, call string) *actor {
	a := actorOf(ctx)
	switch {
	case a == nil || a.s != r.s:
		panic(fmt.Sprintf("sim: %s called outside an actor: blocking calls must come from an actor started by Sim.Run or Runtime.Go, with a ctx derived from its own (DESIGN §5)", call))
	case r.s.cur == nil || r.s.cur.state == done:
		panic(fmt.Sprintf("sim: %s called while no actor runs: the run has not started or is over", call))
	}
	return r.s.cur
}

func (r runtimeOf) Now() time.Time { return r.s.clock.Now() }

// Actor is the running actor (core.ActorRuntime): exactly one runs at a
// time, so it is the caller.
func (r runtimeOf) Actor() any { return r.s.cur }

var _ core.ActorRuntime = runtimeOf{}

// yielded is the condition of a pure scheduling point.
type yielded struct{}

func (yielded) ready() bool      { return true }
func (yielded) take(*actor)      {}
func (yielded) describe() string { return "its turn" }

// Yield is a scheduling point with no condition: the scheduler may run any
// other actor before this one continues. Scenario code uses it to mark a
// named point for forced orders.
func Yield(ctx context.Context, point string) {
	a := actorOf(ctx)
	if a == nil {
		panic("sim: Yield called outside an actor: blocking calls must come from an actor started by Sim.Run or Runtime.Go (DESIGN §5)")
	}
	runtimeOf{a.s}.current(ctx, "Yield").park(ctx, point, yielded{})
}

type sleeping struct {
	t *clock.Timer
	d time.Duration
}

func (c sleeping) ready() bool      { return c.t.Fired() }
func (c sleeping) take(*actor)      {}
func (c sleeping) describe() string { return fmt.Sprintf("a %v sleep", c.d) }

func (r runtimeOf) Sleep(ctx context.Context, d time.Duration) error {
	a := r.current(ctx, "Sleep")
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		// A zero sleep is a plain scheduling point, not a wait for the clock:
		// waiting for the next time advance would let every other runnable
		// actor run first and hide those interleavings.
		return a.park(ctx, "sleep", yielded{})
	}
	t := r.s.clock.After(d)
	err := a.park(ctx, "sleep", sleeping{t, d})
	r.s.clock.Stop(t)
	return err
}

func (r runtimeOf) Go(ctx context.Context, name string, fn func(ctx context.Context)) {
	r.current(ctx, "Go")
	r.s.spawn(ctx, name, fn)
}

// Lock is a simulated mutex: acquisition is a scheduling point even when the
// lock is free, so the scheduler explores who gets it first.
type Lock struct {
	s     *Sim
	name  string
	owner *actor
}

func (r runtimeOf) NewLock(name string) core.Lock { return &Lock{s: r.s, name: name} }

type locking struct{ l *Lock }

func (c locking) ready() bool      { return c.l.owner == nil }
func (c locking) take(a *actor)    { c.l.owner = a }
func (c locking) describe() string { return "lock " + c.l.name + c.l.heldBy() }

func (l *Lock) heldBy() string {
	if l.owner == nil {
		return ""
	}
	return " (held by " + l.owner.name + ")"
}

func (l *Lock) Lock(ctx context.Context) error {
	a := runtimeOf{l.s}.current(ctx, "Lock")
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.park(ctx, "lock:"+l.name, locking{l})
}

func (l *Lock) Unlock() {
	if l.owner == nil {
		panic("sim: unlock of lock " + l.name + " that is not held")
	}
	l.owner = nil
}

// Event is a simulated one-shot event.
type Event struct {
	s    *Sim
	name string
	set  bool
}

func (r runtimeOf) NewEvent(name string) core.Event { return &Event{s: r.s, name: name} }

type waiting struct{ e *Event }

func (c waiting) ready() bool      { return c.e.set }
func (c waiting) take(*actor)      {}
func (c waiting) describe() string { return "event " + c.e.name }

func (e *Event) Set()        { e.set = true }
func (e *Event) IsSet() bool { return e.set }

func (e *Event) Wait(ctx context.Context) error {
	a := runtimeOf{e.s}.current(ctx, "Wait")
	if err := ctx.Err(); err != nil {
		return err
	}
	return a.park(ctx, "wait:"+e.name, waiting{e})
}
