package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
)

// traceFormat is the version of the trace format (README "Traces").
// Format 2 added the fault plan and the dropped host actions to the header
// and the host records.
const traceFormat = 2

// runIdentity names a run in a trace's header and in a run's result: the
// fields of its runSpec.
type runIdentity struct {
	Scenario string     `json:"scenario"`
	Seed     uint64     `json:"seed"`
	Backend  string     `json:"backend"`
	Strategy string     `json:"strategy"`
	Faults   fault.Plan `json:"faults"`
	Drop     []int      `json:"drop,omitempty"`
}

// traceHeader is a trace's first record: what the run was.
type traceHeader struct {
	Format int `json:"format"`
	runIdentity
}

// runSpec is everything a run is a function of: the same spec gives the
// same trace, byte for byte.
type runSpec struct {
	sc       scenario
	seed     uint64
	backend  string
	strategy string
	// plan is the faults injected into the session's first process.
	plan fault.Plan
	// drop are the host actions left out, by index, ascending.
	drop []int
}

// command is the picosim command line that repeats the run.
func (r runSpec) command() string {
	var b strings.Builder
	fmt.Fprintf(&b, "picosim run %s --seed %d --backend %s --strategy %s", r.sc.name, r.seed, r.backend, r.strategy)
	if len(r.plan.Faults) > 0 {
		// A plan's JSON has no single quote: names are letters, digits
		// and '-', '_', '.'.
		fmt.Fprintf(&b, " --faults '%s'", r.plan)
	}
	if len(r.drop) > 0 {
		fmt.Fprintf(&b, " --drop %s", formatDrop(r.drop))
	}
	return b.String()
}

func (r runSpec) identity() runIdentity {
	return runIdentity{Scenario: r.sc.name, Seed: r.seed, Backend: r.backend, Strategy: r.strategy, Faults: r.plan, Drop: r.drop}
}

// runResult is what `picosim run --json` prints.
type runResult struct {
	runIdentity
	OK bool `json:"ok"`
	// Commits is the session's last sequence number at the end.
	Commits int64 `json:"commits"`
	// Batches counts the commits that reached the first process's storage
	// handle, whatever their outcome: the ordinals a fault plan selects.
	Batches int `json:"batches"`
	// Fired counts the faults that fired.
	Fired int `json:"fired"`
	// Recovered says a fault stopped the first process and the run was
	// judged by the restarted one.
	Recovered bool `json:"recovered"`
	// Actions counts the host actions the scenario reached, dropped ones
	// included: the indexes --drop takes are below it.
	Actions   int    `json:"actions"`
	Decisions int    `json:"decisions"`
	Digest    string `json:"digest"`
	Error     string `json:"error,omitempty"`
	// Command repeats the run.
	Command string `json:"command"`
}

// runScenario runs one scenario deterministically: the spec fixes every
// interleaving, so the trace (written to trace if not nil) is a pure
// function of it.
func runScenario(spec runSpec, trace io.Writer) (runResult, error) {
	dir, err := os.MkdirTemp("", "picosim-run-")
	if err != nil {
		return runResult{}, err
	}
	defer os.RemoveAll(dir)
	return runScenarioIn(dir, spec, trace)
}

// runScenarioIn is runScenario with the session's files kept in dir.
func runScenarioIn(dir string, spec runSpec, trace io.Writer) (runResult, error) {
	res := runResult{runIdentity: spec.identity(), Command: spec.command()}
	strat, err := sim.ParseStrategy(spec.strategy)
	if err != nil {
		return res, &usageError{fmt.Sprintf("run: --strategy: %v", err)}
	}
	if !slices.Contains(backends, spec.backend) {
		return res, &usageError{fmt.Sprintf("run: backend %q: want memory, jsonl or sqlite", spec.backend)}
	}
	if err := checkPlanFits(spec.plan, spec.backend); err != nil {
		return res, &usageError{"run: --faults: " + err.Error()}
	}
	tr := sim.NewTrace(trace, false)
	s := sim.New(sim.Options{Seed: spec.seed, Strategy: strat, Trace: tr})
	var verdict error
	runErr := s.Run(context.Background(), func(ctx context.Context) {
		s.Record("header", traceHeader{Format: traceFormat, runIdentity: spec.identity()})
		e := newEnv(s, spec, dir)
		verdict = e.play(ctx)
		if e.h != nil {
			res.Commits = int64(e.h.Store().LastSeq())
			if e.watch != nil {
				s.Record("view", e.watch.View())
			}
			if err := e.h.Close(ctx); err != nil && verdict == nil {
				verdict = err
			}
		}
		e.endHolds()
		res.Batches, res.Fired, res.Recovered, res.Actions = e.batches, e.firedCount(), e.recovered, e.actions
		check := map[string]any{"ok": verdict == nil}
		if verdict != nil {
			check["error"] = verdict.Error()
		}
		s.Record("check", check)
	})
	res.Decisions, res.Digest = tr.Len(), tr.Digest()
	switch {
	case runErr != nil:
		res.Error = runErr.Error()
	case verdict != nil:
		res.Error = verdict.Error()
	default:
		res.OK = true
	}
	return res, nil
}

func runMain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	seed := fl.Uint64("seed", 1, "the seed that fixes every interleaving")
	backend := fl.String("backend", "memory", "memory, jsonl or sqlite")
	strategy := fl.String("strategy", "random", "random or pct[:depth:steps]")
	faults := fl.String("faults", "", "a fault plan: its JSON, or a file holding it")
	drop := fl.String("drop", "", "host actions to leave out, by index: 0,3")
	tracePath := fl.String("trace", "", "write the trace to this file")
	keep := fl.String("keep", "", "keep the session's files in this new or empty directory")
	asJSON := fl.Bool("json", false, "print a machine-readable result")
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, runHelp)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	if err := fl.Parse(args[1:]); err != nil {
		fmt.Fprintln(stderr, "picosim: run:", err)
		return 2
	}
	sc, ok := findScenario(name)
	switch {
	case !ok:
		fmt.Fprintf(stderr, "picosim: run: unknown scenario %q (picosim list shows them)\n", name)
		return 2
	case fl.NArg() > 0:
		fmt.Fprintf(stderr, "picosim: run: unexpected argument %q\n", fl.Arg(0))
		return 2
	case !slices.Contains(backends, *backend):
		fmt.Fprintf(stderr, "picosim: run: --backend %q: want memory, jsonl or sqlite\n", *backend)
		return 2
	}
	spec := runSpec{sc: sc, seed: *seed, backend: *backend, strategy: *strategy}
	var err error
	if spec.plan, err = readPlan(*faults); err != nil {
		fmt.Fprintln(stderr, "picosim: run: --faults:", err)
		return 2
	}
	if spec.drop, err = parseDrop(*drop); err != nil {
		fmt.Fprintln(stderr, "picosim: run: --drop:", err)
		return 2
	}
	var trace io.Writer
	if *tracePath != "" {
		f, err := os.Create(*tracePath)
		if err != nil {
			fmt.Fprintln(stderr, "picosim: run:", err)
			return 2
		}
		defer f.Close()
		trace = f
	}
	var res runResult
	if *keep != "" {
		if err := emptyDir(*keep); err != nil {
			fmt.Fprintln(stderr, "picosim: run: --keep:", err)
			return 2
		}
		res, err = runScenarioIn(*keep, spec, trace)
	} else {
		res, err = runScenario(spec, trace)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "picosim:", err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "picosim: run:", err)
		return 1
	}
	switch {
	case *asJSON:
		_ = json.NewEncoder(stdout).Encode(res)
	case res.OK:
		fmt.Fprintf(stdout, "✓ %s seed %d on %s: %d commits, %d decisions%s, trace %s\n",
			res.Scenario, res.Seed, res.Backend, res.Commits, res.Decisions, faultSummary(res), res.Digest[:12])
	default:
		fmt.Fprintf(stdout, "✗ %s seed %d on %s: %s\n  reproduce: %s\n", res.Scenario, res.Seed, res.Backend, res.Error, res.Command)
	}
	if !res.OK {
		return 1
	}
	return 0
}

// emptyDir makes sure dir exists and holds nothing, so that a run starts a
// new session there.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty; a run starts a new session", dir)
	}
	return nil
}

// backends are the storage backends a run can use.
var backends = []string{"memory", "jsonl", "sqlite"}

// faultSummary says what the plan did, for a run's one-line result.
func faultSummary(res runResult) string {
	switch {
	case len(res.Faults.Faults) == 0:
		return ""
	case res.Recovered:
		return fmt.Sprintf(", %d of %d faults fired, recovered after a restart", res.Fired, len(res.Faults.Faults))
	}
	return fmt.Sprintf(", %d of %d faults fired", res.Fired, len(res.Faults.Faults))
}

func listMain(stdout io.Writer) int {
	for _, sc := range scenarios {
		fmt.Fprintf(stdout, "%-20s %s\n", sc.name, sc.summary)
	}
	return 0
}

const runHelp = `usage: picosim run SCENARIO [--seed N] [--backend memory|jsonl|sqlite] [--strategy random|pct[:D:K]]
                    [--faults PLAN] [--drop I,J] [--trace FILE] [--keep DIR] [--json]

Runs one scenario deterministically: the same arguments give the same trace, byte for byte.
picosim list shows the scenarios.

  --faults PLAN  storage faults for the session's first process: the plan's JSON, or a file holding
                 it, e.g. '{"faults":[{"name":"c1","kind":"crash","commit":7,"persist":true}]}'.
                 Kinds: hold (the commit waits a few virtual milliseconds), fail, uncertain, crash
                 (persist, or tear: a seed for where a JSONL line is cut), unlinkFail. commit
                 counts the commits that reach the process's storage, of "batch" main or scratch
                 if given. A fail, uncertain or crash stops the session; the run then restarts it,
                 drives it to the end and checks what must survive.
  --drop I,J     leave out host actions by index (fuzz prints this when it shrinks a failure)
  --keep DIR     keep the session's files (session.jsonl or sessions.db) in DIR, new or empty, for
                 picosim check or a closer look
`
