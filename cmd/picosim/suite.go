package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// suiteSeeds is how many seeds the default run gives each scenario.
const suiteSeeds = 50

// suiteBackend is the default run's backend: the embedded durable one.
const suiteBackend = "jsonl"

// suiteSpec is the run the suite makes of a scenario's seed: odd seeds
// explore schedules alone, even seeds also inject a fault plan drawn from
// the seed for a run of about batches commits.
func suiteSpec(sc scenario, seed uint64, backend string, batches int) runSpec {
	spec := runSpec{sc: sc, seed: seed, backend: backend, strategy: "random"}
	if seed%2 == 0 {
		spec.plan = drawPlan(sc, seed, batches, backend)
	}
	return spec
}

// runSuite runs every scenario over seeds 1..seeds, each seed twice (the
// second run must write the same trace), and prints a line per scenario and
// a closing DONE line. progress draws a progress line on a terminal. It
// returns the number of failures.
func runSuite(w io.Writer, seeds int, backend string, progress bool) int {
	start := time.Now()
	var failures []runResult
	runs := 0
	for si, sc := range scenarios {
		began := time.Now()
		schedules := map[string]bool{}
		var commits int64
		failed, fired, restarts, batches := 0, 0, 0, 0
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			if progress {
				fmt.Fprintf(w, "\r[%d/%d] %s seed %d/%d ", si+1, len(scenarios), sc.name, seed, seeds)
			}
			spec := suiteSpec(sc, seed, backend, batches)
			res, err := runScenario(spec, nil)
			runs++
			if err == nil && res.OK {
				again, _ := runScenario(spec, nil)
				if again.Digest != res.Digest {
					res.OK, res.Error = false, fmt.Sprintf("the replay's trace %s differs from the run's %s", again.Digest[:12], res.Digest[:12])
				}
			}
			if err != nil {
				res.Error, res.Command = err.Error(), spec.command()
			}
			if batches == 0 {
				batches = res.Batches // seed 1 has no faults: the scenario's length
			}
			fired += res.Fired
			if res.Recovered {
				restarts++
			}
			if !res.OK {
				failed++
				failures = append(failures, res)
				continue
			}
			schedules[res.Digest] = true
			commits += res.Commits
		}
		if progress {
			fmt.Fprint(w, "\r\033[K")
		}
		mark := "✓"
		if failed > 0 {
			mark = "✗"
		}
		fmt.Fprintf(w, "%s %-20s %d seeds, %d schedules, %d commits, %d faults injected (%d restarts), %d failures, %.1fs\n",
			mark, sc.name, seeds, len(schedules), commits, fired, restarts, failed, time.Since(began).Seconds())
	}
	for _, f := range failures {
		fmt.Fprintf(w, "FAIL %s seed %d on %s: %s\n  reproduce: %s\n", f.Scenario, f.Seed, f.Backend, f.Error, f.Command)
	}
	fmt.Fprintf(w, "DONE %d scenarios, %d runs (each replayed), %d failures in %.1fs\n", len(scenarios), runs, len(failures), time.Since(start).Seconds())
	return len(failures)
}

// isTerminal reports whether f is a character device, where a progress line
// can redraw itself.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
