package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Strategy decides which runnable actor runs next. It may draw only from the
// generator it is given, so that a seed fixes its choices.
type Strategy interface {
	// Init gives the strategy the run's generator, once, before any actor.
	Init(rng *rand.Rand)
	// Spawned tells the strategy about a new actor.
	Spawned(c Candidate)
	// Choose returns the index of the candidate to run at step. Candidates
	// are in actor creation order and never empty.
	Choose(step int, cands []Candidate) int
	// Name is the strategy's name with its parameters, as ParseStrategy reads it.
	Name() string
}

// Random picks uniformly among runnable actors.
func Random() Strategy { return &random{} }

type random struct{ rng *rand.Rand }

func (r *random) Init(rng *rand.Rand)                 { r.rng = rng }
func (r *random) Spawned(Candidate)                   {}
func (r *random) Choose(_ int, cands []Candidate) int { return r.rng.IntN(len(cands)) }
func (r *random) Name() string                        { return "random" }

// Bounds of a PCT strategy's parameters. A run draws depth-1 change points
// before its first step, and priorities start above the depth, so an
// unbounded depth exhausts memory (or overflows a priority) before anything
// runs; and the chance of meeting a bug of depth d falls as k^(d-1), so a
// depth beyond a handful searches nothing.
const (
	// pctDepthMax bounds the depth: at most pctDepthMax-1 priority changes
	// a run.
	pctDepthMax = 100
	// pctStepsMax bounds the steps change points are drawn from: a change
	// point after the last decision a run may make never fires.
	pctStepsMax = stepsMaxDefault
)

// PCT is probabilistic concurrency testing: every actor gets a random
// priority, the highest-priority runnable actor runs, and at depth-1 random
// change points (steps drawn from 1..stepsMax) the running actor drops below
// every other. A bug of depth d is found with probability at least
// 1/(n·k^(d-1)) per run for n actors and k steps.
func PCT(depth, stepsMax int) Strategy {
	if depth < 1 || depth > pctDepthMax || stepsMax < 1 || stepsMax > pctStepsMax {
		panic(fmt.Sprintf("sim: PCT needs depth 1 to %d and stepsMax 1 to %d", pctDepthMax, pctStepsMax))
	}
	return &pct{depth: depth, stepsMax: stepsMax}
}

type pct struct {
	depth, stepsMax int
	rng             *rand.Rand
	changes         []int // change-point steps, ascending
}

func (p *pct) Init(rng *rand.Rand) {
	p.rng = rng
	for range p.depth - 1 {
		p.changes = append(p.changes, 1+rng.IntN(p.stepsMax))
	}
	slices.Sort(p.changes)
}

func (p *pct) Spawned(c Candidate) { *c.Prio = p.depth + p.rng.IntN(1<<30) }

func (p *pct) Choose(step int, cands []Candidate) int {
	best := 0
	for i, c := range cands {
		if *c.Prio > *cands[best].Prio {
			best = i
		}
	}
	for i, at := range p.changes {
		if at == step {
			*cands[best].Prio = p.depth - 1 - i // below every initial priority
		}
	}
	return best
}

func (p *pct) Name() string { return fmt.Sprintf("pct:%d:%d", p.depth, p.stepsMax) }

// Forced runs the actors parked at the labelled points ("actor:point") in
// exactly the given order: an actor whose label appears later in the order
// is held back until every earlier label has run. Everything else is chosen
// by fallback (Random when nil). If only held actors can run, the earliest in
// the order runs and the order is reported as unsatisfiable via Violations.
func Forced(order []string, fallback Strategy) *ForcedStrategy {
	if fallback == nil {
		fallback = Random()
	}
	return &ForcedStrategy{order: slices.Clone(order), fallback: fallback}
}

// ForcedStrategy is the strategy Forced returns.
type ForcedStrategy struct {
	order      []string
	next       int
	fallback   Strategy
	violations []string
}

func (f *ForcedStrategy) Init(rng *rand.Rand) { f.fallback.Init(rng) }
func (f *ForcedStrategy) Spawned(c Candidate) { f.fallback.Spawned(c) }

func (f *ForcedStrategy) Choose(step int, cands []Candidate) int {
	var free []int
	held := -1
	for i, c := range cands {
		pos := slices.Index(f.order[f.next:], c.Label())
		switch {
		case pos == 0:
			f.next++
			return i
		case pos > 0:
			if held < 0 || pos < slices.Index(f.order[f.next:], cands[held].Label()) {
				held = i
			}
		default:
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		f.violations = append(f.violations, fmt.Sprintf("step %d: %s ran before %s", step, cands[held].Label(), f.order[f.next]))
		f.next += slices.Index(f.order[f.next:], cands[held].Label()) + 1
		return held
	}
	sub := make([]Candidate, len(free))
	for k, i := range free {
		sub[k] = cands[i]
	}
	return free[f.fallback.Choose(step, sub)]
}

func (f *ForcedStrategy) Name() string { return "forced:" + strings.Join(f.order, ",") }

// Done reports whether every labelled point ran.
func (f *ForcedStrategy) Done() bool { return f.next == len(f.order) }

// Violations lists the places where the order could not be kept.
func (f *ForcedStrategy) Violations() []string { return f.violations }

// ParseStrategy reads a strategy name: "random", "pct" (depth 3, 10,000
// steps), "pct:D:K" (D up to pctDepthMax, K up to pctStepsMax), or
// "forced:a:p,b:q".
func ParseStrategy(name string) (Strategy, error) {
	switch {
	case name == "random" || name == "":
		return Random(), nil
	case name == "pct":
		return PCT(3, 10_000), nil
	case strings.HasPrefix(name, "pct:"):
		parts := strings.Split(name, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("sim: strategy %q: want pct:DEPTH:STEPS", name)
		}
		d, err1 := strconv.Atoi(parts[1])
		k, err2 := strconv.Atoi(parts[2])
		switch {
		case err1 != nil || err2 != nil || d < 1 || k < 1:
			return nil, fmt.Errorf("sim: strategy %q: depth and steps must be positive integers", name)
		case d > pctDepthMax || k > pctStepsMax:
			return nil, fmt.Errorf("sim: strategy %q: depth must be at most %d and steps at most %d", name, pctDepthMax, pctStepsMax)
		}
		return PCT(d, k), nil
	case strings.HasPrefix(name, "forced:"):
		order := strings.Split(strings.TrimPrefix(name, "forced:"), ",")
		for _, l := range order {
			if !strings.Contains(l, ":") {
				return nil, fmt.Errorf("sim: strategy %q: label %q is not actor:point", name, l)
			}
		}
		return Forced(order, nil), nil
	}
	return nil, fmt.Errorf("sim: unknown strategy %q (want random, pct, pct:D:K or forced:a:p,…)", name)
}
