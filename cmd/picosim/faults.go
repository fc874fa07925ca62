package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim/fault"
)

// readPlan reads --faults: a plan's JSON when it starts with '{', otherwise
// a file holding it. Empty is the empty plan.
func readPlan(arg string) (fault.Plan, error) {
	data := []byte(arg)
	switch {
	case strings.TrimSpace(arg) == "":
		return fault.Plan{}, nil
	case !strings.HasPrefix(strings.TrimSpace(arg), "{"):
		var err error
		if data, err = os.ReadFile(arg); err != nil {
			return fault.Plan{}, err
		}
	}
	p, err := fault.ParsePlan(data)
	if err != nil {
		return fault.Plan{}, errors.New(strings.TrimPrefix(err.Error(), "fault: plan: "))
	}
	return p, nil
}

// checkPlanFits refuses a plan the backend cannot carry out: only JSONL
// writes lines that a crash can tear, and memory has no disk to fill.
func checkPlanFits(p fault.Plan, backend string) error {
	for i, f := range p.Faults {
		switch {
		case f.Tear != 0 && f.Kind == fault.Fail && backend == "memory":
			return fmt.Errorf("faults[%d] (%s) fills the disk, which the memory backend has none of; this run is on memory", i, f.Name)
		case f.Tear != 0 && f.Kind != fault.Fail && backend != "jsonl":
			return fmt.Errorf("faults[%d] (%s) tears a line, which only the jsonl backend writes; this run is on %s", i, f.Name, backend)
		}
	}
	return nil
}

// parseDrop reads --drop: host action indexes, comma-separated, each once,
// in any order; it returns them ascending.
func parseDrop(arg string) ([]int, error) {
	if arg == "" {
		return nil, nil
	}
	var out []int
	for _, part := range strings.Split(arg, ",") {
		i, err := strconv.Atoi(part)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("%q is not a host action index (want 0 or more)", part)
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return out, checkDrop(out)
}

// checkDrop holds a drop list, from --drop or a trace's header, to what
// parseDrop reads: indexes of 0 or more, each once.
func checkDrop(drop []int) error {
	for i, d := range drop {
		if d < 0 {
			return fmt.Errorf("%d is not a host action index (want 0 or more)", d)
		}
		if slices.Contains(drop[:i], d) {
			return fmt.Errorf("action %d is named twice", d)
		}
	}
	return nil
}

func formatDrop(drop []int) string {
	parts := make([]string, len(drop))
	for i, d := range drop {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, ",")
}

// Shapes of the plans drawPlan draws.
const (
	// holdChance is one in how many plans gets a hold.
	holdChance = 4
	// holdDelayMax bounds how long a hold keeps its commit, in virtual
	// milliseconds.
	holdDelayMax = 100
)

// seededRNG is the generator of one stream of draws from seed: the
// stream's name keeps the draws of one (a fault plan, a program, the
// lines one of its generators inserts) apart from the others'.
func seededRNG(seed uint64, stream string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(stream))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// drawPlan draws the fault plan of a fuzzed or suite run from the scenario
// and the seed alone, for a run of about batches commits: the faults
// fault.RandomPlan draws, a crash that does not persist torn mid-line and
// a fail that fills the disk mid-line each half the time on JSONL, a fail
// that fills the disk at its COMMIT half the time on SQLite, and sometimes
// a hold.
func drawPlan(sc scenario, seed uint64, batches int, backend string) fault.Plan {
	rng := seededRNG(seed, sc.name)
	p := fault.RandomPlan(rng, max(batches, 1))
	for i, f := range p.Faults {
		if backend == "jsonl" && (f.Kind == fault.Crash && !f.Persist || f.Kind == fault.Fail) && rng.IntN(2) == 0 ||
			backend == "sqlite" && f.Kind == fault.Fail && rng.IntN(2) == 0 {
			p.Faults[i].Tear = 1 + rng.Uint32N(1<<16)
		}
	}
	if rng.IntN(holdChance) == 0 {
		p.Faults = append(p.Faults, fault.Fault{Name: "hold", Kind: fault.Hold, Commit: 1 + rng.IntN(max(batches, 1))})
	}
	if seed%settleFaultSeeds == 2 {
		// The settle fault has the process's life to itself: no other
		// crash or uncertain commit ends it first.
		p.Faults = slices.DeleteFunc(p.Faults, func(f fault.Fault) bool { return f.Kind == fault.Crash || f.Kind == fault.Uncertain })
		p.Faults = append(p.Faults, drawSettleFault(seed))
	}
	return p
}

// settleFaultSeeds is how often a drawn plan also has a fault that lands on
// the commit ending a task of one of the agent's kinds (every fifth seed
// from 2, not the golden traces' seed 1): a commit's ordinal among all
// commits rarely falls on the one settling a collapse, whose recover then
// has a candidate to publish, or on a job's end.
const settleFaultSeeds = 5

// settleKinds are the kinds a settle fault names.
var settleKinds = []string{agent.GenerationKindName, agent.ToolKindName, agent.PostToolsKindName, agent.CollapseKindName, agent.JobKindName}

// settleFaultKind is the kind of task whose settling commit the settle
// fault of seed's plan hits: a stream of its own, so that a program can
// give it a task of that kind to settle (drawSettledCollapse).
func settleFaultKind(seed uint64) string {
	return settleKinds[seededRNG(seed, "settle fault kind").IntN(len(settleKinds))]
}

// drawSettleFault draws seed's settle fault, on the first, second or
// third commit that settles a task of its kind (the first for a collapse,
// which a program makes few of): a crash (persisted or not) half the
// time, else a failed or an uncertain commit.
func drawSettleFault(seed uint64) fault.Fault {
	rng := seededRNG(seed, "settle fault")
	f := fault.Fault{Name: "settle", Kind: fault.Crash, Commit: 1 + rng.IntN(3), Settles: settleFaultKind(seed)}
	if f.Settles == agent.CollapseKindName {
		f.Commit = 1
	}
	switch rng.IntN(4) {
	case 0:
		f.Kind = fault.Fail
	case 1:
		f.Kind = fault.Uncertain
	default:
		f.Persist = rng.IntN(2) == 0
	}
	return f
}

// numbers are the digit runs a failure's signature leaves out.
var numbers = regexp.MustCompile(`[0-9]+`)

// signature is what two failures share when they are the same failure: the
// message without its ids, ordinals and durations, which shrinking changes.
func signature(failure string) string {
	return numbers.ReplaceAllString(failure, "N")
}

// drawSettledCollapse has the program of a seed whose settle fault hits a
// collapse's settling commit begin, from a generator of its own, with two
// turns of the root and a collapse of it that its model summarizes: the
// fault then ends the process as the summary is published, or fails that
// commit, and the reopened session recovers a collapse whose candidate
// waits in its scratch (a-recovered-collapse-publishes-its-candidate),
// which a crash at a commit counted among all of them hardly ever does.
func drawSettledCollapse(p *program, seed uint64) {
	if seed%settleFaultSeeds != 2 || settleFaultKind(seed) != agent.CollapseKindName {
		return
	}
	keep := seededRNG(seed, "settled collapse").IntN(20)
	p.lines = append(collapseAfterTwoTurns(keep, progLine{op: "respond", args: []string{"text", "the summary"}}), p.lines...)
}
