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

	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
)

// traceFormat is the version of the trace format (README "Traces").
const traceFormat = 1

// traceHeader is a trace's first record: what the run was.
type traceHeader struct {
	Format   int    `json:"format"`
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	Backend  string `json:"backend"`
	Strategy string `json:"strategy"`
}

// runResult is what `picosim run --json` prints.
type runResult struct {
	Scenario  string `json:"scenario"`
	Seed      uint64 `json:"seed"`
	Backend   string `json:"backend"`
	Strategy  string `json:"strategy"`
	OK        bool   `json:"ok"`
	Commits   int64  `json:"commits"`
	Decisions int    `json:"decisions"`
	Digest    string `json:"digest"`
	Error     string `json:"error,omitempty"`
}

// runScenario runs one scenario deterministically: the seed and the
// strategy fix every interleaving, so the trace (written to trace if not
// nil) is a pure function of the arguments.
func runScenario(sc scenario, seed uint64, backend, strategy string, trace io.Writer) (runResult, error) {
	dir, err := os.MkdirTemp("", "picosim-run-")
	if err != nil {
		return runResult{}, err
	}
	defer os.RemoveAll(dir)
	return runScenarioIn(dir, sc, seed, backend, strategy, trace)
}

// runScenarioIn is runScenario with the session's files kept in dir.
func runScenarioIn(dir string, sc scenario, seed uint64, backend, strategy string, trace io.Writer) (runResult, error) {
	res := runResult{Scenario: sc.name, Seed: seed, Backend: backend, Strategy: strategy}
	strat, err := sim.ParseStrategy(strategy)
	if err != nil {
		return res, &usageError{fmt.Sprintf("run: --strategy: %v", err)}
	}
	tr := sim.NewTrace(trace, false)
	s := sim.New(sim.Options{Seed: seed, Strategy: strat, Trace: tr})
	var scenarioErr error
	runErr := s.Run(context.Background(), func(ctx context.Context) {
		s.Record("header", traceHeader{Format: traceFormat, Scenario: sc.name, Seed: seed, Backend: backend, Strategy: strategy})
		e := &env{s: s, backend: backend, dir: dir, faux: faux.New(s.Runtime(), s.Rand(), faux.Options{Recorder: s})}
		if scenarioErr = e.open(ctx); scenarioErr != nil {
			return
		}
		scenarioErr = sc.run(ctx, e)
		if e.h != nil {
			res.Commits = int64(e.h.Store().LastSeq())
			if e.watch != nil {
				s.Record("view", e.watch.View())
			}
			if err := e.h.Close(ctx); err != nil && scenarioErr == nil {
				scenarioErr = err
			}
		}
		check := map[string]any{"ok": scenarioErr == nil}
		if scenarioErr != nil {
			check["error"] = scenarioErr.Error()
		}
		s.Record("check", check)
	})
	res.Decisions, res.Digest = tr.Len(), tr.Digest()
	switch {
	case runErr != nil:
		res.Error = runErr.Error()
	case scenarioErr != nil:
		res.Error = scenarioErr.Error()
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
	tracePath := fl.String("trace", "", "write the trace to this file")
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
	case !slices.Contains([]string{"memory", "jsonl", "sqlite"}, *backend):
		fmt.Fprintf(stderr, "picosim: run: --backend %q: want memory, jsonl or sqlite\n", *backend)
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
	res, err := runScenario(sc, *seed, *backend, *strategy, trace)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "picosim:", err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "picosim: run:", err)
		return 1
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(res)
	} else if res.OK {
		fmt.Fprintf(stdout, "✓ %s seed %d on %s: %d commits, %d decisions, trace %s\n", res.Scenario, res.Seed, res.Backend, res.Commits, res.Decisions, res.Digest[:12])
	} else {
		fmt.Fprintf(stdout, "✗ %s seed %d on %s: %s\n  reproduce: picosim run %s --seed %d --backend %s --strategy %s\n",
			res.Scenario, res.Seed, res.Backend, res.Error, res.Scenario, res.Seed, res.Backend, res.Strategy)
	}
	if !res.OK {
		return 1
	}
	return 0
}

func listMain(stdout io.Writer) int {
	for _, sc := range scenarios {
		fmt.Fprintf(stdout, "%-20s %s\n", sc.name, sc.summary)
	}
	return 0
}

const runHelp = `usage: picosim run SCENARIO [--seed N] [--backend memory|jsonl|sqlite] [--strategy random|pct] [--trace FILE] [--json]

Runs one scenario deterministically: the same arguments give the same trace, byte for byte.
picosim list shows the scenarios.
`
