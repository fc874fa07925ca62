package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strconv"
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
// strategy and a fault plan drawn from the seed (a quarter of them empty),
// untraced (a failing one runs again for its trace).
func fuzzSpec(sc scenario, seed uint64, backend string, batches int) runSpec {
	return runSpec{sc: sc, seed: seed, backend: backend, strategy: fuzzStrategy(seed), plan: drawPlan(sc, seed, batches, backend), untraced: true}
}

// shrink looks for the smallest case that still fails the same way (the
// same signature) as a failed run: it drops faults one at a time while the
// failure stays, then lowers the schedule's preemptions (the same seed
// under PCT with as few priority changes as still fail), then leaves out
// host actions, in halves, quarters and so on, then one at a time. It returns the smallest spec and its failure,
// and what stopped it early: an interruption or the machine failing a run.
func shrink(ctx context.Context, spec runSpec, failure string) (runSpec, string, error) {
	want := signature(failure)
	var actions int
	var stopped error
	fails := func(c runSpec) bool {
		if stopped != nil {
			return false
		}
		res, err := runScenario(ctx, c, nil)
		var fe *fieldError
		switch {
		case errors.As(err, &fe):
			return false // a drop of an action this candidate no longer reaches
		case err != nil:
			stopped = err
			return false
		case res.OK || signature(res.Error) != want:
			return false
		}
		spec, failure, actions = c, res.Error, res.Actions
		return true
	}
	for i := 0; i < len(spec.plan.Faults) && stopped == nil; {
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
	// Delta debugging: leave out halves, then quarters, … of the actions
	// still in, keeping every cut that still fails the same way; then one
	// action at a time.
	for chunk := actions / 2; chunk >= 2 && stopped == nil; chunk /= 2 {
		for from := 0; from < actions && stopped == nil; from += chunk {
			c := spec
			c.drop = slices.Clone(spec.drop)
			for i := from; i < min(from+chunk, actions); i++ {
				if !slices.Contains(c.drop, i) {
					c.drop = append(c.drop, i)
				}
			}
			if len(c.drop) == len(spec.drop) {
				continue
			}
			slices.Sort(c.drop)
			fails(c)
		}
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
	return spec, failure, stopped
}

const (
	// fuzzSeedsDefault is how many seeds fuzz gives each scenario unless
	// told.
	fuzzSeedsDefault = 200
	// fuzzWorkersMax bounds --workers: each worker holds a whole simulated
	// session, and runs beyond the cores only share them.
	fuzzWorkersMax = 1024
)

// fuzzConfig is what picosim fuzz was asked to explore.
type fuzzConfig struct {
	chosen   []scenario
	seeds    int
	first    uint64
	budget   time.Duration
	workers  int
	out      string
	failFast bool
	backend  string
	// shard and shards split the seed space for a CI matrix: this fuzz
	// runs the seeds whose offset from first is shard-1 modulo shards.
	shard, shards int
	json          bool
}

// parseFuzz reads picosim fuzz's arguments, scenario names and flags in any
// order.
func parseFuzz(args []string) (fuzzConfig, error) {
	var c fuzzConfig
	fl := flag.NewFlagSet("fuzz", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.IntVar(&c.seeds, "seeds", fuzzSeedsDefault, "seeds per scenario")
	fl.Uint64Var(&c.first, "start", 1, "the first seed (a CI job passes a new one each run to explore new seeds)")
	fl.DurationVar(&c.budget, "time", 0, "keep drawing seeds until this much time has passed (instead of --seeds)")
	fl.IntVar(&c.workers, "workers", runtime.GOMAXPROCS(0), "runs in parallel")
	fl.StringVar(&c.out, "out", "picosim-failures", "directory for the traces of failing runs")
	fl.BoolVar(&c.failFast, "fail-fast", false, "stop at the first failure")
	fl.StringVar(&c.backend, "backend", "", "memory, jsonl or sqlite (default: memory, JSONL every fourth seed, SQLite every sixteenth)")
	shard := fl.String("shard", "1/1", "K/N: run the Kth of N disjoint shares of the seeds")
	fl.BoolVar(&c.json, "json", false, "print the summary as one JSON object")
	names, err := parseAnywhere(fl, args)
	if err != nil {
		return c, err
	}
	if c.shard, c.shards, err = parseShard(*shard); err != nil {
		return c, usagef("--shard %s: %v", *shard, err)
	}
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["seeds"] && set["time"]:
		return c, usagef("--seeds and --time exclude each other: give a number of seeds or a duration")
	case set["time"] && c.budget <= 0:
		return c, usagef("--time %s: want a positive duration", c.budget)
	case c.seeds < 1:
		return c, usagef("--seeds %d: want at least 1", c.seeds)
	case c.workers < 1 || c.workers > fuzzWorkersMax:
		return c, usagef("--workers %d: want 1 to %d", c.workers, fuzzWorkersMax)
	case c.backend != "" && !slices.Contains(backends, c.backend):
		return c, usagef("--backend %q: want memory, jsonl or sqlite", c.backend)
	}
	if c.backend != "" {
		if err := backendAvailable(c.backend); err != nil {
			return c, err
		}
	}
	c.chosen, err = chooseScenarios(names)
	return c, err
}

// parseShard reads K/N, 1 ≤ K ≤ N.
func parseShard(arg string) (k, n int, err error) {
	ks, ns, ok := strings.Cut(arg, "/")
	if k, err = strconv.Atoi(ks); ok && err == nil {
		n, err = strconv.Atoi(ns)
	}
	switch {
	case !ok || err != nil:
		return 0, 0, errors.New("want K/N, as 2/8")
	case n < 1 || k < 1 || k > n:
		return 0, 0, errors.New("want 1 ≤ K ≤ N")
	}
	return k, n, nil
}

// chooseScenarios are the scenarios names names, or all of them.
func chooseScenarios(names []string) ([]scenario, error) {
	if len(names) == 0 {
		return scenarios, nil
	}
	var chosen []scenario
	for _, n := range names {
		sc, ok := findScenario(n)
		if !ok {
			return nil, usagef("unknown scenario %q (picosim list shows them)", n)
		}
		chosen = append(chosen, sc)
	}
	return chosen, nil
}

// describe says what fuzz explores, for its start line.
func (c fuzzConfig) describe() string {
	how := fmt.Sprintf("%d seeds each", c.seeds)
	if c.budget > 0 {
		how = "for " + c.budget.String()
	}
	if c.shards > 1 {
		how += fmt.Sprintf(", shard %d/%d", c.shard, c.shards)
	}
	on := c.backend
	if on == "" {
		on = "memory (JSONL every fourth seed, SQLite every sixteenth)"
	}
	return fmt.Sprintf("%d scenarios on %s from seed %d, %s, %d workers", len(c.chosen), on, c.first, how, c.workers)
}

// finding is a failing run and the smallest case it shrank to.
type finding struct {
	res      runResult
	smallest runSpec
	failure  string // the smallest case's
	// trace and smallestTrace are where the failing run's and the
	// smallest case's traces went ("" when an interruption stopped
	// fuzz before the smallest case ran again), page and smallestPage
	// their pages (picosim show --html).
	trace, smallestTrace string
	page, smallestPage   string
	// timeline is the smallest case's trace as picosim show prints it.
	timeline string
	// program, for a generated run, is where the smallest case's program
	// went, programText is it, and programCmd runs it.
	program, programText string
	programCmd           runSpec
}

// fuzzer is one picosim fuzz: its workers' shared tallies and findings.
type fuzzer struct {
	cfg     fuzzConfig
	batches map[string]int // a fault-free run's commits, by scenario

	mu                    sync.Mutex
	findings              []finding
	runs, fired, restarts int
	// fatal is what stopped fuzz before it was done: the machine failing
	// a run, or a trace that could not be written.
	fatal    error
	stop     chan struct{}
	stopOnce sync.Once
}

// measure runs each scenario once without faults: its length, over which
// fault plans place their commits.
func (f *fuzzer) measure(ctx context.Context) error {
	f.batches = map[string]int{}
	for _, sc := range f.cfg.chosen {
		res, err := runScenario(ctx, runSpec{sc: sc, seed: 1, backend: f.backendOf(1), strategy: "random"}, nil)
		if err != nil {
			return err
		}
		f.batches[sc.name] = res.Batches
	}
	return nil
}

// progress reports the fuzzer's runs and failures on stderr while it
// works (progress.go: redrawn on a terminal, plain lines elsewhere); the
// returned function stops it.
func (f *fuzzer) progress(w io.Writer) func() {
	return startProgress(w, "fuzz", func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return fmt.Sprintf("%d runs, %d failures", f.runs, len(f.findings))
	})
}

// backendOf is the backend a seed runs on: --backend's, or by default
// memory, JSONL (with its torn lines and replays) every fourth seed, and
// SQLite every sixteenth, from 8, instead. A disk backend's run is held
// read by read to the memory backend given the same batches (mirror.go).
func (f *fuzzer) backendOf(seed uint64) string {
	switch {
	case f.cfg.backend != "":
		return f.cfg.backend
	case seed%16 == 8:
		return "sqlite"
	case seed%4 == 0:
		return "jsonl"
	}
	return "memory"
}

// halt stops feeding seeds, for err's sake unless it is nil (fail-fast).
func (f *fuzzer) halt(err error) {
	f.mu.Lock()
	if err != nil && f.fatal == nil {
		f.fatal = err
	}
	f.mu.Unlock()
	f.stopOnce.Do(func() { close(f.stop) })
}

// feed hands out seeds until they or the time budget run out, or fuzz is
// halted or interrupted.
func (f *fuzzer) feed(ctx context.Context, jobs chan<- runSpec, start time.Time) {
	defer close(jobs)
	for seed := f.cfg.first; f.more(seed, start); seed++ {
		if int((seed-f.cfg.first)%uint64(f.cfg.shards)) != f.cfg.shard-1 {
			continue
		}
		for _, sc := range f.cfg.chosen {
			select {
			case jobs <- fuzzSpec(sc, seed, f.backendOf(seed), f.batches[sc.name]):
			case <-f.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}
}

func (f *fuzzer) more(seed uint64, start time.Time) bool {
	if f.cfg.budget > 0 {
		return time.Since(start) <= f.cfg.budget
	}
	return seed-f.cfg.first < uint64(f.cfg.seeds)
}

// NondeterminismError is a fuzzed seed that failed, and run again for its
// trace did not fail the same way (the same signature, as shrink compares:
// the failure with its numbers left out, since each run has a directory of
// its own): the run is not fixed by its seed, which
// is a bug of the harness or the simulator itself. Fuzz stops on it
// (exit 1): without determinism no finding could be shrunk or replayed.
type NondeterminismError struct {
	Command      string
	First, Again string // the two runs' failures; "" passed
}

func (e *NondeterminismError) Error() string {
	again := "passed"
	if e.Again != "" {
		again = "failed with: " + e.Again
	}
	return fmt.Sprintf("%s is not deterministic: it failed with: %s; run again for its trace it %s", e.Command, e.First, again)
}

// try runs one spec (untraced, as fuzzSpec makes it) and, if it fails,
// runs it again for its trace, shrinks it and writes both traces.
func (f *fuzzer) try(ctx context.Context, spec runSpec) {
	res, err := runScenario(ctx, spec, nil)
	var ie *interrupted
	switch {
	case errors.As(err, &ie):
		return // not run: fuzz is stopping
	case err != nil:
		f.halt(err)
		return
	}
	f.count(res)
	if res.OK {
		return
	}
	var trace bytes.Buffer
	traced := spec
	traced.untraced = false
	again, err := runScenario(ctx, traced, &trace)
	switch {
	case errors.As(err, &ie):
		return
	case err != nil:
		f.halt(err)
		return
	case again.OK || signature(again.Error) != signature(res.Error): // as shrink compares: each run has its own directory
		f.halt(&NondeterminismError{Command: spec.command(), First: res.Error, Again: again.Error})
		return
	}
	fd := finding{res: again}
	if stalledRun(res.Error) {
		// Every candidate would take stallLimit to judge: the case is kept
		// as found.
		fd.smallest, fd.failure, err = spec, res.Error, nil
	} else {
		fd.smallest, fd.failure, err = shrink(ctx, spec, res.Error)
	}
	if err != nil && !errors.As(err, &ie) {
		f.halt(err)
		return
	}
	if err := f.writeTraces(ctx, &fd, trace.Bytes()); err != nil {
		f.halt(err)
		return
	}
	f.mu.Lock()
	f.findings = append(f.findings, fd)
	f.mu.Unlock()
	if f.cfg.failFast {
		f.halt(nil)
	}
}

func (f *fuzzer) count(res runResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	f.fired += res.Fired
	if res.Recovered {
		f.restarts++
	}
}

// writeTraces writes a finding's failing trace and its smallest case's
// (run again for its trace) into --out.
func (f *fuzzer) writeTraces(ctx context.Context, fd *finding, trace []byte) error {
	spec := fd.res
	name := fmt.Sprintf("%s-seed%d-%s", spec.Scenario, spec.Seed, strings.ReplaceAll(spec.Strategy, ":", "_"))
	var err error
	if fd.trace, err = writeArtifact(f.cfg.out, name+".jsonl", trace); err != nil {
		return &fieldError{"--out", err}
	}
	if fd.page, err = f.writePage(name+".html", trace); err != nil {
		return err
	}
	var smallest bytes.Buffer
	if stalledRun(fd.failure) {
		smallest.Write(trace) // kept as found: the same run, not judged again
	} else {
		var ie *interrupted
		traced := fd.smallest
		traced.untraced = false
		switch _, err := runScenario(ctx, traced, &smallest); {
		case errors.As(err, &ie):
			return nil
		case err != nil:
			return err
		}
	}
	if fd.smallestTrace, err = writeArtifact(f.cfg.out, name+"-smallest.jsonl", smallest.Bytes()); err != nil {
		return &fieldError{"--out", err}
	}
	if fd.smallestPage, err = f.writePage(name+"-smallest.html", smallest.Bytes()); err != nil {
		return err
	}
	// The smallest case's timeline, for a person to read (picosim show).
	if lines, err := traceLines(smallest.Bytes()); err == nil {
		var timeline bytes.Buffer
		if showTrace(&timeline, lines, showOptions{}) == nil {
			if fd.timeline, err = writeArtifact(f.cfg.out, name+"-smallest.timeline.txt", timeline.Bytes()); err != nil {
				return &fieldError{"--out", err}
			}
		}
	}
	if fd.smallest.sc.generated {
		// The smallest case as a program of its own: the drawn (or given)
		// program without the dropped lines, runnable with --program.
		p := fd.smallest.program
		if p == nil {
			p = drawProgram(fd.smallest.seed)
		}
		p = p.without(fd.smallest.drop)
		if fd.program, err = writeArtifact(f.cfg.out, name+"-smallest.program", []byte(p.String())); err != nil {
			return &fieldError{"--out", err}
		}
		fd.programText = p.String()
		fd.programCmd = fd.smallest
		fd.programCmd.program, fd.programCmd.programFile, fd.programCmd.drop = p, fd.program, nil
	}
	return nil
}

// writePage writes a trace's page (picosim show --html) into --out and
// returns its path. A trace beyond what show reads (a record over
// traceLineBytesMax) gets none, as it gets no timeline: "" and no error,
// so that the finding is still reported.
func (f *fuzzer) writePage(name string, trace []byte) (string, error) {
	lines, err := traceLines(trace)
	if err != nil {
		return "", nil
	}
	page, err := showPage(lines, showOptions{})
	if err != nil {
		return "", nil
	}
	path, err := writeArtifact(f.cfg.out, name, page)
	if err != nil {
		return "", &fieldError{"--out", err}
	}
	return path, nil
}

// report prints the findings and the DONE line, which says so when an
// interruption cut fuzz short.
func (f *fuzzer) report(w io.Writer, start time.Time, stopped error) {
	sort.Slice(f.findings, func(a, b int) bool {
		x, y := f.findings[a].res, f.findings[b].res
		return x.Scenario < y.Scenario || x.Scenario == y.Scenario && x.Seed < y.Seed
	})
	for _, fd := range f.findings {
		fmt.Fprintf(w, "FAIL %s seed %d (%s): %s\n", fd.res.Scenario, fd.res.Seed, fd.res.Strategy, fd.res.Error)
		fmt.Fprintf(w, "  run: %s\n", fd.res.Command)
		fmt.Fprintf(w, "  smallest: %s\n    fails with: %s\n", fd.smallest.command(), fd.failure)
		fmt.Fprintf(w, "  trace: %s\n", fd.trace)
		if fd.page != "" {
			fmt.Fprintf(w, "  its page: %s\n", fd.page)
		}
		if fd.smallestTrace != "" {
			fmt.Fprintf(w, "  smallest trace: %s\n", fd.smallestTrace)
		}
		if fd.smallestPage != "" {
			fmt.Fprintf(w, "  its page: %s\n", fd.smallestPage)
		}
		if fd.timeline != "" {
			fmt.Fprintf(w, "  its timeline: %s\n", fd.timeline)
		}
		if fd.program != "" {
			fmt.Fprintf(w, "  smallest program: %s\n    %s\n  runs with: %s\n", fd.program,
				strings.ReplaceAll(strings.TrimSuffix(fd.programText, "\n"), "\n", "\n    "), fd.programCmd.command())
		}
	}
	elapsed := max(time.Since(start).Seconds(), 1e-9)
	fmt.Fprintf(w, "DONE %d runs over %d scenarios, %d faults injected (%d restarts), %d failures in %.1fs: %.0f schedules/s%s\n",
		f.runs, len(f.cfg.chosen), f.fired, f.restarts, len(f.findings), elapsed, float64(f.runs)/elapsed, interruptedNote(stopped))
}

// fuzzSummary is what fuzz --json prints: one object.
type fuzzSummary struct {
	Runs        int            `json:"runs"`
	Scenarios   int            `json:"scenarios"`
	Fired       int            `json:"faultsInjected"`
	Restarts    int            `json:"restarts"`
	Seconds     float64        `json:"seconds"`
	RunsPerSec  float64        `json:"runsPerSecond"`
	Shard       string         `json:"shard"`
	Interrupted bool           `json:"interrupted"`
	Failures    []fuzzFailJSON `json:"failures"`
}

type fuzzFailJSON struct {
	Scenario        string `json:"scenario"`
	Seed            uint64 `json:"seed"`
	Error           string `json:"error"`
	Command         string `json:"command"`
	Smallest        string `json:"smallest"`
	SmallestFailure string `json:"smallestFailure"`
	Trace           string `json:"trace"`
	Page            string `json:"page,omitempty"`
	SmallestTrace   string `json:"smallestTrace,omitempty"`
	SmallestPage    string `json:"smallestPage,omitempty"`
	Program         string `json:"program,omitempty"`
	ProgramCommand  string `json:"programCommand,omitempty"`
}

// reportJSON prints the summary and findings as one JSON object.
func (f *fuzzer) reportJSON(w io.Writer, start time.Time, stopped error) {
	elapsed := max(time.Since(start).Seconds(), 1e-9)
	sum := fuzzSummary{Runs: f.runs, Scenarios: len(f.cfg.chosen), Fired: f.fired, Restarts: f.restarts, Seconds: elapsed,
		RunsPerSec: float64(f.runs) / elapsed, Shard: fmt.Sprintf("%d/%d", f.cfg.shard, f.cfg.shards), Interrupted: stopped != nil,
		Failures: []fuzzFailJSON{}}
	sort.Slice(f.findings, func(a, b int) bool {
		x, y := f.findings[a].res, f.findings[b].res
		return x.Scenario < y.Scenario || x.Scenario == y.Scenario && x.Seed < y.Seed
	})
	for _, fd := range f.findings {
		j := fuzzFailJSON{Scenario: fd.res.Scenario, Seed: fd.res.Seed, Error: fd.res.Error, Command: fd.res.Command,
			Smallest: fd.smallest.command(), SmallestFailure: fd.failure, Trace: fd.trace, Page: fd.page, SmallestTrace: fd.smallestTrace, SmallestPage: fd.smallestPage, Program: fd.program}
		if fd.program != "" {
			j.ProgramCommand = fd.programCmd.command()
		}
		sum.Failures = append(sum.Failures, j)
	}
	enc := json.NewEncoder(w)
	_ = enc.Encode(sum)
}

func fuzzMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFuzz(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, fuzzHelp)
		return 0
	}
	if err != nil {
		return fail(stderr, "fuzz", err)
	}
	f := &fuzzer{cfg: cfg, stop: make(chan struct{})}
	start := time.Now()
	var ie *interrupted
	if err := f.measure(ctx); errors.As(err, &ie) {
		f.report(stdout, start, err)
		return exitCode(err)
	} else if err != nil {
		return fail(stderr, "fuzz", err)
	}
	fmt.Fprintf(stderr, "picosim: fuzz: started: %s\n", cfg.describe())
	if cfg.workers < runtime.GOMAXPROCS(0) {
		// A simulated run is one goroutine at a time, handing off to the
		// next: with a processor to spare, every hand-off also wakes an
		// idle thread that finds nothing to run (a tenth of a run's CPU).
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.workers))
	}
	jobs := make(chan runSpec)
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Go(func() {
			for spec := range jobs {
				f.try(ctx, spec)
			}
		})
	}
	stopProgress := f.progress(stderr)
	f.feed(ctx, jobs, start)
	wg.Wait()
	stopProgress()
	if f.fatal != nil {
		return fail(stderr, "fuzz", f.fatal)
	}
	stopped := interruption(ctx)
	if cfg.json {
		f.reportJSON(stdout, start, stopped)
	} else {
		f.report(stdout, start, stopped)
	}
	switch {
	case stopped != nil:
		return exitCode(stopped)
	case len(f.findings) > 0:
		return exitFailed
	}
	return 0
}

const fuzzHelp = `usage: picosim fuzz [SCENARIO...] [--seeds N | --time DURATION] [--start SEED] [--workers K] [--out DIR]
                    [--fail-fast] [--backend B] [--shard K/N] [--json]

Explores schedules and storage faults: every scenario (or the ones named) over N seeds from SEED
(200 seeds from 1 unless given), or until DURATION (more than 0) has passed, alternating random
and PCT schedules, each seed with a fault plan drawn from it, in K parallel workers (one per CPU
unless given; fewer workers than CPUs also run on only K of them), on backend B (unless given: memory, JSONL, which adds torn lines and replays
of its files, every fourth seed, and SQLite every sixteenth from 8 instead). A run on JSONL or
SQLite is held read by read to the memory backend given the same batches (backends-agree), and
its closed files, opened cold, whole. Flags may come before or after the scenarios.

A failing run's trace goes to DIR (picosim-failures unless given; made 0700, traces 0600), and the
failure is shrunk while it still fails the same way: faults dropped, then the same seed under PCT
with as few preemptions as still fail, then host actions left out. The commands of the failing run
and of the smallest case are printed, and both traces go to DIR, each with its page beside it
(picosim show --html: the same name, ending .html) and the smallest its timeline. The summary
counts runs, faults that fired, restarts, failures and schedules per second; SIGINT or SIGTERM ends
fuzz with the summary of what ran, saying it was interrupted. A CI job passes a new --start each
run (its build number, say) to explore new seeds; a CI matrix of N jobs passes --shard 1/N … N/N,
which split the seeds into disjoint shares (seed offsets from SEED modulo N), and --json makes the
summary one JSON object (runs, faults, restarts, seconds, runs per second, the failures with their
commands, traces, pages and smallest programs). While it runs, stderr shows the runs and failures
so far: a line redrawn every second on a terminal, a plain line every 10 s elsewhere.

Exit status: 0 when nothing failed, 1 when something did, 2 for a mistake of use, 3 when the
machine fails picosim (TMPDIR, disk, no cgo for sqlite, a trace that cannot be written), 128+N
after signal N.
`
