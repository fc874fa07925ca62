package sim

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/sim/clock"
)

// stepsMaxDefault bounds a run's scheduling decisions unless Options.StepsMax
// says otherwise, so that a livelock ends in a reported failure instead of a
// hung test.
const stepsMaxDefault = 5_000_000

// Options configures a simulation.
type Options struct {
	// Seed fixes every choice of the run.
	Seed uint64
	// Strategy picks the next actor; nil means Random. Strategies are
	// stateful: give each Sim its own.
	Strategy Strategy
	// Trace, when set, receives every scheduling decision, time jump and
	// recorded event.
	Trace *Trace
	// StepsMax bounds the number of scheduling decisions (0 = default).
	StepsMax int
	// OnStep, when set, is called after each scheduling decision with its
	// step, before the chosen actor runs: a place to look at the run as it
	// stands. It must not block or call the runtime.
	OnStep func(step int)
}

// Sim is one simulated run. Create it with New, then call Run once.
type Sim struct {
	rng      *rand.Rand
	clock    *clock.Clock
	strategy Strategy
	trace    *Trace
	stepsMax int
	onStep   func(step int)

	actors  []*actor // the actors not yet done, in spawn order
	all     []*actor // every actor, by id, for the final unwind
	cur     *actor   // the actor holding the baton; nil before the first hand-off
	step    int
	killing bool
	failure error

	cands []*actor // scratch buffers of schedule, reused every step
	views []Candidate
}

// New returns a simulation seeded by opts.Seed.
func New(opts Options) *Sim {
	s := &Sim{
		rng:      rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		clock:    clock.New(),
		strategy: opts.Strategy,
		trace:    opts.Trace,
		stepsMax: opts.StepsMax,
		onStep:   opts.OnStep,
	}
	if s.strategy == nil {
		s.strategy = Random()
	}
	if s.stepsMax == 0 {
		s.stepsMax = stepsMaxDefault
	}
	s.strategy.Init(s.rng)
	return s
}

// Rand is the run's seeded generator, for scenario code that needs choices
// of its own. Use it only from actors.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Now is the current virtual time.
func (s *Sim) Now() time.Time { return s.clock.Now() }

// Steps is the number of scheduling decisions made so far.
func (s *Sim) Steps() int { return s.step }

// Runtime returns the simulated core.Runtime of this run.
func (s *Sim) Runtime() core.Runtime { return runtimeOf{s} }

type actorState uint8

const (
	runnable actorState = iota
	blocked
	done
)

// waitCond is what a blocked actor waits for. ready is evaluated by the
// scheduler; take completes the wait when the actor is chosen (granting a
// lock, say) and must succeed whenever ready returned true.
type waitCond interface {
	ready() bool
	take(a *actor)
	describe() string
}

// actor is one simulated thread of control: a coroutine (iter.Pull) that
// Run's scheduler resumes and that hands control back when it parks, so
// that exactly one actor runs at a time and every hand-off is a direct
// switch between two goroutines. A baton passed over channels went
// through the Go scheduler instead, which woke a spare P's thread at every
// step: a sixth of a run went to futex calls.
type actor struct {
	id     int
	name   string
	s      *Sim
	ctx    context.Context
	resume func() (struct{}, bool) // runs the actor until it parks or ends
	yield  func(struct{}) bool     // hands control back to the scheduler
	die    bool                    // set by unwind: the resumed actor unwinds
	state  actorState
	point  string   // where it is parked
	cond   waitCond // nil: runnable at a yield point
	err    error    // outcome of the last wait
	prio   int      // PCT priority
}

type actorKey struct{}

func actorOf(ctx context.Context) *actor {
	a, _ := ctx.Value(actorKey{}).(*actor)
	return a
}

// Run runs main as the first actor and returns when every actor has
// finished (nil), when the run deadlocks (*DeadlockError), when an actor
// panics (*PanicError) or when the step bound is exceeded (*StepLimitError).
// Actors still blocked at the end are unwound before Run returns. The
// scheduler runs on Run's goroutine: it resumes the chosen actor and picks
// the next one when that actor parks or ends. An actor that calls
// runtime.Goexit (a test's t.FailNow) ends Run's goroutine with it.
func (s *Sim) Run(ctx context.Context, main func(ctx context.Context)) error {
	if s.cur != nil || len(s.all) > 0 {
		panic("sim: Run called twice on one Sim")
	}
	s.spawn(ctx, "main", main)
	for next := s.schedule(); next != nil; next = s.schedule() {
		s.cur = next
		next.resume()
	}
	s.unwind()
	return s.failure
}

// spawn creates an actor that waits for its first turn.
func (s *Sim) spawn(parent context.Context, name string, fn func(ctx context.Context)) *actor {
	a := &actor{id: len(s.all), name: name, s: s, point: "start"}
	a.ctx = context.WithValue(parent, actorKey{}, a)
	a.resume, _ = iter.Pull(func(yield func(struct{}) bool) {
		a.yield = yield
		a.run(fn)
	})
	s.actors = append(s.actors, a)
	s.all = append(s.all, a)
	s.strategy.Spawned(a.view())
	s.trace.record(event{Kind: "spawn", Actor: name, ID: a.id})
	return a
}

func (a *actor) run(fn func(ctx context.Context)) {
	if a.die {
		return // unwound before its first turn
	}
	s := a.s
	defer func() {
		r := recover()
		a.state = done
		switch {
		case r == nil:
			s.trace.record(event{Kind: "exit", Actor: a.name})
		case r == errKilled:
		default:
			s.fail(&PanicError{Actor: a.name, Value: r, Stack: stableStack(debug.Stack())})
		}
	}()
	fn(a.ctx)
}

// errKilled unwinds an actor that is still blocked when the run ends.
var errKilled = fmt.Errorf("sim: actor killed at the end of the run")

// park blocks the running actor at a named point until cond holds (or, for a
// nil cond, until the scheduler picks it again), or until its ctx is done.
// It returns nil when the condition was met and ctx's error otherwise.
func (a *actor) park(ctx context.Context, point string, cond waitCond) error {
	s := a.s
	if s.killing {
		panic(errKilled)
	}
	a.point, a.cond, a.ctx, a.err = point, cond, ctx, nil
	a.state = blocked
	if cond == nil {
		a.state = runnable
	}
	a.yield(struct{}{})
	if a.die {
		panic(errKilled)
	}
	return a.err
}

// eligible reports whether a parked actor can be chosen now.
func (a *actor) eligible() bool {
	switch a.state {
	case runnable:
		return true
	case blocked:
		return a.cond.ready() || a.ctx.Err() != nil
	}
	return false
}

// schedule picks the next actor to run and readies it, or returns nil when
// the run is over: every actor has ended, or the run failed (s.failure says
// how: a panic, a deadlock, the step bound).
func (s *Sim) schedule() *actor {
	for {
		if s.failure != nil {
			return nil
		}
		// One pass drops the finished actors (keeping the others' order,
		// which is what a strategy sees) and collects the eligible ones.
		cands, live := s.cands[:0], s.actors[:0]
		for _, a := range s.actors {
			if a.state == done {
				continue
			}
			live = append(live, a)
			if a.eligible() {
				cands = append(cands, a)
			}
		}
		clear(s.actors[len(live):])
		s.cands, s.actors = cands, live
		if len(cands) > 0 {
			s.step++
			if s.step > s.stepsMax {
				s.fail(&StepLimitError{Steps: s.stepsMax})
				return nil
			}
			views := s.views[:0]
			for _, a := range cands {
				views = append(views, a.view())
			}
			s.views = views
			next := cands[s.strategy.Choose(s.step, views)]
			if next.state == blocked {
				if next.cond.ready() {
					next.cond.take(next)
				} else {
					next.err = next.ctx.Err()
				}
			}
			next.state, next.cond = runnable, nil
			if s.trace != nil {
				s.trace.record(event{Kind: "run", Step: s.step, Actor: next.name, Point: next.point, Of: len(cands)})
			}
			if s.onStep != nil {
				s.onStep(s.step)
			}
			return next
		}
		if s.clock.Pending() {
			s.clock.Advance() // fired timers make their sleepers eligible
			s.trace.record(event{Kind: "time", At: s.clock.Now().Sub(clock.Epoch).Milliseconds()})
			continue
		}
		if !s.allDone() {
			s.fail(s.deadlock())
		}
		return nil
	}
}

func (s *Sim) allDone() bool {
	for _, a := range s.actors {
		if a.state != done {
			return false
		}
	}
	return true
}

func (s *Sim) fail(err error) {
	if s.failure != nil {
		return
	}
	s.failure = err
	s.trace.record(event{Kind: "failure", Error: err.Error()})
}

// unwind kills every actor that has not finished, one at a time so that
// their deferred code never runs concurrently: each is resumed to panic
// out of its park (or, never started, to return at once).
func (s *Sim) unwind() {
	s.killing = true
	for _, a := range s.all {
		if a.state != done {
			a.state, a.die = done, true
			s.cur = a
			a.resume()
		}
	}
}

func (s *Sim) deadlock() *DeadlockError {
	d := &DeadlockError{At: s.clock.Now()}
	for _, a := range s.actors {
		if a.state == blocked {
			d.Actors = append(d.Actors, BlockedActor{Name: a.name, Point: a.point, Waiting: a.cond.describe()})
		}
	}
	return d
}

// Candidate is what a strategy sees of a runnable actor.
type Candidate struct {
	ID    int
	Name  string
	Point string
	Prio  *int // the actor's PCT priority slot
}

// Label is "name:point", the form forced orders use.
func (c Candidate) Label() string { return c.Name + ":" + c.Point }

func (a *actor) view() Candidate {
	return Candidate{ID: a.id, Name: a.name, Point: a.point, Prio: &a.prio}
}

// BlockedActor is one actor of a deadlock report.
type BlockedActor struct {
	Name    string
	Point   string
	Waiting string
}

// DeadlockError reports a run in which nothing is runnable and no timer is
// pending while actors are still blocked.
type DeadlockError struct {
	At     time.Time
	Actors []BlockedActor
}

func (e *DeadlockError) Error() string {
	parts := make([]string, len(e.Actors))
	for i, a := range e.Actors {
		parts[i] = fmt.Sprintf("%s at %s waits for %s", a.Name, a.Point, a.Waiting)
	}
	sort.Strings(parts)
	return "sim: deadlock: " + strings.Join(parts, "; ")
}

// stackNoise are the parts of a goroutine stack that differ between two
// runs of the same seed: goroutine numbers, argument words and pc offsets.
var stackNoise = regexp.MustCompile(`goroutine \d+|\(0x[0-9a-f?, .{}]*\)|\{0x[0-9a-f?, .]*\}| \+0x[0-9a-f]+|0x[0-9a-f]+`)

// stableStack is a stack trace without its run-to-run noise, so that a
// run that panics records the same trace every time (functions and
// lines stay: they are the binary's, not the run's).
func stableStack(stack []byte) string {
	return stackNoise.ReplaceAllString(string(stack), "…")
}

// PanicError reports an actor that panicked.
type PanicError struct {
	Actor string
	Value any
	Stack string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("sim: actor %s panicked: %v\n%s", e.Actor, e.Value, e.Stack)
}

// StepLimitError reports a run that made more scheduling decisions than its
// bound: a livelock, or a bound set too low.
type StepLimitError struct{ Steps int }

func (e *StepLimitError) Error() string {
	return fmt.Sprintf("sim: more than %d scheduling decisions (livelock?)", e.Steps)
}
