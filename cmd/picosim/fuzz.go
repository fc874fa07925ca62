package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// fuzzPCTSteps is the step horizon of the PCT schedules fuzz draws.
const fuzzPCTSteps = 2000

// fuzzDepthMax is the most priority changes a PCT schedule fuzz draws;
// shrinking walks the depth down from there.
const fuzzDepthMax = 3

// fuzzStrategy alternates the seed's schedule between random and PCT.
func fuzzStrategy(seed uint64) string {
	if seed%2 == 0 {
		return pctStrategy(fuzzDepthMax)
	}
	return "random"
}

func pctStrategy(depth int) string { return fmt.Sprintf("pct:%d:%d", depth, fuzzPCTSteps) }

// fuzzSpec is the run fuzz makes of a scenario's seed: its schedule
// strategy and a fault plan drawn from the seed (a quarter of them empty).
func fuzzSpec(sc scenario, seed uint64, backend string, batches int) runSpec {
	return runSpec{sc: sc, seed: seed, backend: backend, strategy: fuzzStrategy(seed), plan: drawPlan(sc, seed, batches, backend)}
}

// shrink looks for the smallest case that still fails the same way (the
// same signature) as a failed run: it drops faults one at a time while the
// failure stays, then lowers the schedule's preemptions (the same seed
// under PCT with as few priority changes as still fail), then leaves out
// host actions one at a time. It returns the smallest spec and its failure.
func shrink(spec runSpec, failure string) (runSpec, string) {
	want := signature(failure)
	var actions int
	fails := func(c runSpec) bool {
		res, err := runScenario(c, nil)
		if err != nil || res.OK || signature(res.Error) != want {
			return false
		}
		spec, failure, actions = c, res.Error, res.Actions
		return true
	}
	for i := 0; i < len(spec.plan.Faults); {
		c := spec
		c.plan.Faults = slices.Delete(slices.Clone(spec.plan.Faults), i, i+1)
		if !fails(c) {
			i++
		}
	}
	for d := 1; d <= fuzzDepthMax; d++ {
		c := spec
		if c.strategy = pctStrategy(d); c.strategy == spec.strategy || fails(c) {
			break
		}
	}
	if actions == 0 {
		fails(spec) // learn how many host actions the run reaches
	}
	for i := range actions {
		if slices.Contains(spec.drop, i) {
			continue
		}
		c := spec
		c.drop = append(slices.Clone(spec.drop), i)
		slices.Sort(c.drop)
		fails(c)
	}
	return spec, failure
}

func fuzzMain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("fuzz", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	seeds := fl.Int("seeds", 200, "seeds per scenario")
	first := fl.Uint64("start", 1, "the first seed (a CI job passes a new one each run to explore new seeds)")
	budget := fl.Duration("time", 0, "keep drawing seeds until this much time has passed (instead of --seeds)")
	workers := fl.Int("workers", runtime.GOMAXPROCS(0), "runs in parallel")
	out := fl.String("out", "picosim-failures", "directory for the traces of failing runs")
	failFast := fl.Bool("fail-fast", false, "stop at the first failure")
	backend := fl.String("backend", "memory", "memory, jsonl or sqlite")
	var names []string
	rest := args
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		names, rest = append(names, rest[0]), rest[1:]
	}
	if slices.Contains(rest, "--help") || slices.Contains(rest, "-h") {
		fmt.Fprint(stdout, fuzzHelp)
		return 0
	}
	if err := fl.Parse(rest); err != nil || fl.NArg() > 0 {
		if err == nil {
			err = fmt.Errorf("unexpected argument %q", fl.Arg(0))
		}
		fmt.Fprintln(stderr, "picosim: fuzz:", err)
		return 2
	}
	var chosen []scenario
	for _, n := range names {
		sc, ok := findScenario(n)
		if !ok {
			fmt.Fprintf(stderr, "picosim: fuzz: unknown scenario %q (picosim list shows them)\n", n)
			return 2
		}
		chosen = append(chosen, sc)
	}
	if len(chosen) == 0 {
		chosen = scenarios
	}
	switch {
	case *seeds < 1 && *budget == 0:
		fmt.Fprintf(stderr, "picosim: fuzz: --seeds %d: want at least 1\n", *seeds)
		return 2
	case *workers < 1:
		fmt.Fprintf(stderr, "picosim: fuzz: --workers %d: want at least 1\n", *workers)
		return 2
	case !slices.Contains([]string{"memory", "jsonl", "sqlite"}, *backend):
		fmt.Fprintf(stderr, "picosim: fuzz: --backend %q: want memory, jsonl or sqlite\n", *backend)
		return 2
	}
	start := time.Now()
	// A run of each scenario without faults gives its length, over which
	// fault plans place their commits.
	batches := map[string]int{}
	for _, sc := range chosen {
		res, err := runScenario(runSpec{sc: sc, seed: 1, backend: *backend, strategy: "random"}, nil)
		if err != nil {
			fmt.Fprintln(stderr, "picosim: fuzz:", err)
			return 2
		}
		batches[sc.name] = res.Batches
	}
	type finding struct {
		res      runResult
		smallest runSpec
		failure  string // the smallest case's
		// traces are the files the failing run's and the smallest case's
		// traces went to, or why they could not be written.
		trace, smallestTrace string
	}
	var (
		mu       sync.Mutex
		findings []finding
		runs     int
		fired    int
		restarts int
		stop     = make(chan struct{})
		stopOnce sync.Once
		wg       sync.WaitGroup
		jobs     = make(chan runSpec)
	)
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for spec := range jobs {
				var trace bytes.Buffer
				res, err := runScenario(spec, &trace)
				if err != nil {
					res.Error = err.Error()
				}
				mu.Lock()
				runs++
				fired += res.Fired
				if res.Recovered {
					restarts++
				}
				mu.Unlock()
				if err == nil && res.OK {
					continue
				}
				f := finding{res: res}
				f.smallest, f.failure = shrink(spec, res.Error)
				name := fmt.Sprintf("%s-seed%d-%s", spec.sc.name, spec.seed, strings.ReplaceAll(spec.strategy, ":", "_"))
				f.trace = writeTrace(*out, name+".jsonl", trace.Bytes())
				trace.Reset()
				if _, err := runScenario(f.smallest, &trace); err == nil {
					f.smallestTrace = writeTrace(*out, name+"-smallest.jsonl", trace.Bytes())
				}
				mu.Lock()
				findings = append(findings, f)
				mu.Unlock()
				if *failFast {
					stopOnce.Do(func() { close(stop) })
				}
			}
		}()
	}
feed:
	for seed := *first; ; seed++ {
		if *budget > 0 {
			if time.Since(start) > *budget {
				break
			}
		} else if seed-*first >= uint64(*seeds) {
			break
		}
		for _, sc := range chosen {
			select {
			case jobs <- fuzzSpec(sc, seed, *backend, batches[sc.name]):
			case <-stop:
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	sort.Slice(findings, func(a, b int) bool {
		x, y := findings[a].res, findings[b].res
		return x.Scenario < y.Scenario || x.Scenario == y.Scenario && x.Seed < y.Seed
	})
	for _, f := range findings {
		fmt.Fprintf(stdout, "FAIL %s seed %d (%s): %s\n", f.res.Scenario, f.res.Seed, f.res.Strategy, f.res.Error)
		fmt.Fprintf(stdout, "  run: %s\n", f.res.Command)
		fmt.Fprintf(stdout, "  smallest: %s\n    fails with: %s\n", f.smallest.command(), f.failure)
		fmt.Fprintf(stdout, "  trace: %s\n", f.trace)
		if f.smallestTrace != "" {
			fmt.Fprintf(stdout, "  smallest trace: %s\n", f.smallestTrace)
		}
	}
	elapsed := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "DONE %d runs over %d scenarios, %d faults injected (%d restarts), %d failures in %.1fs: %.0f schedules/s\n",
		runs, len(chosen), fired, restarts, len(findings), elapsed, float64(runs)/elapsed)
	if len(findings) > 0 {
		return 1
	}
	return 0
}

// writeTrace writes a failure's trace into dir and returns its path, or
// says why it could not.
func writeTrace(dir, name string, data []byte) string {
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "not written: " + err.Error()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "not written: " + err.Error()
	}
	return path
}

const fuzzHelp = `usage: picosim fuzz [SCENARIO...] [--seeds N | --time DURATION] [--start SEED] [--workers K] [--out DIR]
                    [--fail-fast] [--backend B]

Explores schedules and storage faults: every scenario (or the ones named) over N seeds from SEED
(1 unless given), or until DURATION has passed, alternating random and PCT schedules, each seed
with a fault plan drawn from it, in K parallel workers. A failing run's trace goes to DIR, and the
failure is shrunk while it still fails the same way: faults dropped, then the same seed under PCT
with as few preemptions as still fail, then host actions left out. The commands of the failing
run and of the smallest case are printed, and both traces go to DIR. The summary counts runs,
faults that fired, restarts, failures and schedules per second. Exit status 1 when anything
failed. A CI job passes a new --start each run (its build number, say) to explore new seeds.
`
