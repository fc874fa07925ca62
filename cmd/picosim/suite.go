package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"
)

// suiteSeeds is how many seeds the default run gives each scenario.
const suiteSeeds = 50

// suiteBackend is the backend the suite runs a seed on: the embedded
// durable one, JSONL, and SQLite every suiteSQLiteEvery-th seed. Either is
// held read by read to the memory backend given the same batches
// (mirror.go), so the suite checks the three against each other.
func suiteBackend(seed uint64) string {
	if seed%suiteSQLiteEvery == 0 {
		return "sqlite"
	}
	return "jsonl"
}

// suiteSQLiteEvery spaces the suite's SQLite seeds: 10 of each scenario's
// 50 (a SQLite run costs about five JSONL runs).
const suiteSQLiteEvery = 5

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

// suiteMain is picosim without arguments: the suite, exit 1 on a failure.
// An interrupted suite has said so in its DONE line.
func suiteMain(ctx context.Context, stdout, stderr io.Writer) int {
	failures, err := runSuite(ctx, stdout, suiteSeeds, suiteBackend, isTerminal(os.Stdout))
	var ie *interrupted
	switch {
	case errors.As(err, &ie):
		return exitCode(err)
	case err != nil:
		return fail(stderr, "suite", err)
	case failures > 0:
		return exitFailed
	}
	return 0
}

// suiteTally is what the suite's line says of a scenario.
type suiteTally struct {
	schedules               map[string]bool
	commits                 int64
	failed, fired, restarts int
	batches                 int
	failures                []runResult
}

// runSuite runs every scenario over seeds 1..seeds, each seed twice (the
// second run must write the same trace), and prints a line per scenario and
// a closing DONE line. progress draws a progress line on a terminal. It
// returns the number of failures. An error ends the suite: the machine
// failing it (said by the caller, instead of a failure per seed), or an
// interruption, which the DONE line reports with what finished before it.
func runSuite(ctx context.Context, w io.Writer, seeds int, backend func(seed uint64) string, progress bool) (int, error) {
	start := time.Now()
	var failures []runResult
	runs, done := 0, 0
	var err error
	for si, sc := range scenarios {
		began := time.Now()
		t := suiteTally{schedules: map[string]bool{}}
		// Seed 1 runs first: it has no faults, and its length places the
		// fault plans of the others, which then run on every core and are
		// tallied in seed order.
		if seeds < 1 {
			break
		}
		results := make([]runResult, seeds)
		errs := make([]error, seeds)
		if results[0], errs[0] = suiteSeed(ctx, suiteSpec(sc, 1, backend(1), 0)); errs[0] == nil {
			t.batches = results[0].Batches
			next := make(chan int)
			var wg sync.WaitGroup
			var mu sync.Mutex
			finished := 1
			for range runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					for i := range next {
						results[i], errs[i] = suiteSeed(ctx, suiteSpec(sc, uint64(i+1), backend(uint64(i+1)), t.batches))
						mu.Lock()
						finished++
						if progress {
							fmt.Fprintf(w, "\r[%d/%d] %s seed %d/%d ", si+1, len(scenarios), sc.name, finished, seeds)
						}
						mu.Unlock()
					}
				})
			}
			for i := 1; i < seeds; i++ {
				next <- i
			}
			close(next)
			wg.Wait()
		}
		t.batches = 0
		for i := range seeds {
			if err = errs[i]; err != nil {
				break
			}
			runs++
			t.add(results[i])
		}
		if progress {
			fmt.Fprint(w, "\r\033[K")
		}
		failures = append(failures, t.failures...)
		if err != nil {
			break
		}
		done++
		t.print(w, sc, seeds, time.Since(began))
	}
	var ie *interrupted
	if err != nil && !errors.As(err, &ie) {
		return len(failures), err
	}
	for _, f := range failures {
		fmt.Fprintf(w, "FAIL %s seed %d on %s: %s\n  reproduce: %s\n", f.Scenario, f.Seed, f.Backend, f.Error, f.Command)
	}
	fmt.Fprintf(w, "DONE %d scenarios, %d runs (each replayed), %d failures in %.1fs%s\n", done, runs, len(failures), time.Since(start).Seconds(), interruptedNote(err))
	return len(failures), err
}

// interruptedNote ends a DONE line that an interruption cut short.
func interruptedNote(err error) string {
	if err == nil {
		return ""
	}
	return ", " + err.Error()
}

// suiteSeed runs a seed's spec twice; a second trace that differs fails it.
func suiteSeed(ctx context.Context, spec runSpec) (runResult, error) {
	res, err := runScenario(ctx, spec, nil)
	if err != nil || !res.OK {
		return res, err
	}
	again, err := runScenario(ctx, spec, nil)
	if err == nil && again.Digest != res.Digest {
		res.OK, res.Error = false, fmt.Sprintf("the replay's trace %s differs from the run's %s", again.Digest[:12], res.Digest[:12])
	}
	return res, err
}

func (t *suiteTally) add(res runResult) {
	if t.batches == 0 {
		t.batches = res.Batches // seed 1 has no faults: the scenario's length
	}
	t.fired += res.Fired
	if res.Recovered {
		t.restarts++
	}
	if !res.OK {
		t.failed++
		t.failures = append(t.failures, res)
		return
	}
	t.schedules[res.Digest] = true
	t.commits += res.Commits
}

func (t *suiteTally) print(w io.Writer, sc scenario, seeds int, took time.Duration) {
	mark := "✓"
	if t.failed > 0 {
		mark = "✗"
	}
	fmt.Fprintf(w, "%s %-20s %d seeds, %d schedules, %d commits, %d faults injected (%d restarts), %d failures, %.1fs\n",
		mark, sc.name, seeds, len(t.schedules), t.commits, t.fired, t.restarts, t.failed, took.Seconds())
}

// isTerminal reports whether f is a character device, where a progress line
// can redraw itself.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
