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

// fuzzJob is one run fuzz tries.
type fuzzJob struct {
	sc       scenario
	seed     uint64
	strategy string
}

// fuzzStrategy alternates the seed's schedule between random and PCT.
func fuzzStrategy(seed uint64) string {
	if seed%2 == 0 {
		return fmt.Sprintf("pct:%d:%d", fuzzDepthMax, fuzzPCTSteps)
	}
	return "random"
}

// shrink looks for a smaller failing case of a failed run: the same seed
// under PCT with as few priority changes (preemptions) as still fail. It
// returns the smallest failing strategy and its error, or the original.
func shrink(j fuzzJob, backend string, failure string) (string, string) {
	for d := 1; d <= fuzzDepthMax; d++ {
		strategy := fmt.Sprintf("pct:%d:%d", d, fuzzPCTSteps)
		if strategy == j.strategy {
			break
		}
		res, err := runScenario(j.sc, j.seed, backend, strategy, nil)
		if err == nil && !res.OK {
			return strategy, res.Error
		}
	}
	return j.strategy, failure
}

func fuzzMain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("fuzz", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	seeds := fl.Int("seeds", 200, "seeds per scenario")
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
	jobs := make(chan fuzzJob)
	type finding struct {
		job      fuzzJob
		err      string
		shrunk   string
		shrunkTo string
		trace    string
	}
	var (
		mu       sync.Mutex
		findings []finding
		runs     int
		stop     = make(chan struct{})
		stopOnce sync.Once
	)
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				var trace bytes.Buffer
				res, err := runScenario(j.sc, j.seed, *backend, j.strategy, &trace)
				mu.Lock()
				runs++
				mu.Unlock()
				if err == nil && res.OK {
					continue
				}
				msg := res.Error
				if err != nil {
					msg = err.Error()
				}
				f := finding{job: j, err: msg}
				f.shrunk, f.shrunkTo = shrink(j, *backend, msg)
				if err := os.MkdirAll(*out, 0o755); err == nil {
					f.trace = filepath.Join(*out, fmt.Sprintf("%s-seed%d-%s.jsonl", j.sc.name, j.seed, strings.ReplaceAll(j.strategy, ":", "_")))
					if err := os.WriteFile(f.trace, trace.Bytes(), 0o644); err != nil {
						f.trace = ""
					}
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
	for seed := uint64(1); ; seed++ {
		if *budget > 0 {
			if time.Since(start) > *budget {
				break
			}
		} else if seed > uint64(*seeds) {
			break
		}
		for _, sc := range chosen {
			select {
			case jobs <- fuzzJob{sc: sc, seed: seed, strategy: fuzzStrategy(seed)}:
			case <-stop:
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	sort.Slice(findings, func(a, b int) bool {
		x, y := findings[a].job, findings[b].job
		return x.sc.name < y.sc.name || x.sc.name == y.sc.name && x.seed < y.seed
	})
	for _, f := range findings {
		fmt.Fprintf(stdout, "FAIL %s seed %d (%s): %s\n", f.job.sc.name, f.job.seed, f.job.strategy, f.err)
		fmt.Fprintf(stdout, "  smallest: picosim run %s --seed %d --strategy %s --backend %s  # %s\n", f.job.sc.name, f.job.seed, f.shrunk, *backend, f.shrunkTo)
		if f.trace != "" {
			fmt.Fprintf(stdout, "  trace: %s\n", f.trace)
		}
	}
	fmt.Fprintf(stdout, "DONE %d runs over %d scenarios, %d failures in %.1fs\n", runs, len(chosen), len(findings), time.Since(start).Seconds())
	if len(findings) > 0 {
		return 1
	}
	return 0
}

const fuzzHelp = `usage: picosim fuzz [SCENARIO...] [--seeds N | --time DURATION] [--workers K] [--out DIR] [--fail-fast] [--backend B]

Explores schedules: every scenario (or the ones named) over seeds 1..N, alternating random and PCT
schedules, in parallel workers. A failing run's trace goes to DIR; the failure is shrunk to the
same seed under PCT with as few preemptions as still fail, and the command that reproduces it is
printed. Exit status 1 when anything failed.
`
