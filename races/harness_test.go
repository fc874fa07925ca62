package races

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/pico-go/pico/sim"
)

var seedFlag = flag.Uint64("seed", 0, "run each selected cell at this seed only, logging its trace (0: the whole sweep)")

const (
	// seedsSweep is how many seeds (1..seedsSweep) every cell runs at,
	// unless its row sets fewer.
	seedsSweep = 200
	// traceTailLines bounds the trace lines a failure prints.
	traceTailLines = 40
)

// cell is one row in one order: the "actor:point" labels the scheduler must
// run in exactly this sequence, and the program. program sets up a run on s
// and returns its main actor and a check of what the actors observed, called
// after the run ends.
type cell struct {
	points  []string
	program func(s *sim.Sim) (main func(ctx context.Context), check func() error)
}

// explore runs the cell of row r in order o at every seed of the sweep (or at
// -seed), each twice: the run must pass, keep the forced order and replay to
// a byte-identical trace.
func explore(t *testing.T, r row, o order) {
	n := seedsSweep
	if r.seeds != 0 {
		n = r.seeds
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		first, err := runCell(r.cell(o), seed)
		if *seedFlag != 0 {
			t.Logf("trace of seed %d:\n%s", seed, strings.Join(first.Lines(), "\n"))
		}
		if err != nil {
			fail(t, r, o, seed, first, err)
		}
		again, err := runCell(r.cell(o), seed)
		if err != nil || again.Digest() != first.Digest() {
			fail(t, r, o, seed, again, fmt.Errorf("the replay differs from the first run (%v); first differing line: %s", err, firstDifference(first, again)))
		}
	}
}

func runCell(c cell, seed uint64) (*sim.Trace, error) {
	trace := sim.NewTrace(nil, true)
	forced := sim.Forced(c.points, nil)
	s := sim.New(sim.Options{Seed: seed, Strategy: forced, Trace: trace})
	main, check := c.program(s)
	if err := s.Run(context.Background(), main); err != nil {
		return trace, err
	}
	if v := forced.Violations(); len(v) > 0 {
		return trace, fmt.Errorf("the order %v could not be kept: %s", c.points, strings.Join(v, "; "))
	}
	if !forced.Done() {
		return trace, fmt.Errorf("the order %v was not completed: a point never ran", c.points)
	}
	return trace, check()
}

// fail reports a failing cell with the tail of its trace and the command
// that reruns exactly this cell at this seed.
func fail(t *testing.T, r row, o order, seed uint64, trace *sim.Trace, err error) {
	t.Helper()
	lines := trace.Lines()
	tail := lines[max(0, len(lines)-traceTailLines):]
	t.Fatalf("%s (%s), seed %d: %v\nrequired: %s\ntrace (last %d of %d lines):\n%s\nreproduce: %s",
		r.name, o, seed, err, r.required, len(tail), len(lines), strings.Join(tail, "\n"), reproduce(t, seed))
}

// reproduce is the command that runs only the current cell at seed.
func reproduce(t *testing.T, seed uint64) string {
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return fmt.Sprintf("go test ./races -run '%s' -seed %d -v", strings.Join(parts, "/"), seed)
}

func firstDifference(a, b *sim.Trace) string {
	la, lb := a.Lines(), b.Lines()
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d: %s ≠ %s", i+1, la[i], lb[i])
		}
	}
	if len(la) != len(lb) {
		return fmt.Sprintf("%d lines ≠ %d lines", len(la), len(lb))
	}
	return "none"
}
