package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"go.opentelemetry.io/otel/trace"
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
	// Program is the printed program a generated run was given (a drawn
	// one is a function of the seed and is not repeated here).
	Program string `json:"program,omitempty"`
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
	// program is the generated scenario's program when one was given;
	// nil draws it from the seed.
	program *program
	// programFile is where --program read it, for the command line.
	programFile string
	// inspect, when set, is called after every scheduling decision with
	// the run's env (replay --until); it is no part of what the run is.
	inspect func(e *env, step int)
	// tracer, when set, is the harness's tracer provider (run --otel); it
	// is no part of what the run is either.
	tracer trace.TracerProvider
	// untraced runs without a trace: nothing is recorded or hashed, so the
	// result has no digest and no decision count. Fuzz and shrink run so
	// (encoding every commit and event took a third of a basic-turn run)
	// and run a failing case again with its trace; a seed fixes the run,
	// so the second run is the first one. No part of what the run is.
	untraced bool
}

// command is the picosim command line that repeats the run, each argument
// quoted for a POSIX shell where it needs it (a fault plan's JSON does), so
// that the line runs as printed.
func (r runSpec) command() string {
	args := []string{"picosim", "run", r.sc.name, "--seed", strconv.FormatUint(r.seed, 10), "--backend", r.backend, "--strategy", r.strategy}
	if r.programFile != "" {
		args = append(args, "--program", r.programFile)
	}
	if len(r.plan.Faults) > 0 {
		args = append(args, "--faults", r.plan.String())
	}
	if len(r.drop) > 0 {
		args = append(args, "--drop", formatDrop(r.drop))
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellPlain matches the arguments a POSIX shell reads as they are.
var shellPlain = regexp.MustCompile(`^[A-Za-z0-9_./:,=+-]+$`)

// shellQuote quotes an argument for a POSIX shell: inside single quotes
// nothing is special but the single quote, which closes, escapes and
// reopens.
func shellQuote(arg string) string {
	if shellPlain.MatchString(arg) {
		return arg
	}
	return "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}

// check refuses a spec no run can carry out, naming the field (see
// fieldError), and returns its schedule strategy. A backend this build
// cannot run is an environment error.
func (r runSpec) check() (sim.Strategy, error) {
	strat, err := sim.ParseStrategy(r.strategy)
	switch {
	case err != nil:
		return nil, &fieldError{"strategy", err}
	case !slices.Contains(backends, r.backend):
		return nil, &fieldError{"backend", fmt.Errorf("%q: want memory, jsonl or sqlite", r.backend)}
	}
	if err := backendAvailable(r.backend); err != nil {
		return nil, err
	}
	if err := r.plan.Validate(); err != nil {
		return nil, &fieldError{"faults", errors.New(strings.TrimPrefix(err.Error(), "fault: plan: "))}
	}
	if err := checkPlanFits(r.plan, r.backend); err != nil {
		return nil, &fieldError{"faults", err}
	}
	if err := checkDrop(r.drop); err != nil {
		return nil, &fieldError{"drop", err}
	}
	return strat, nil
}

// checkReached refuses a drop of host actions the run never reached: the
// index names nothing, so the run is not the one asked for.
func (r runSpec) checkReached(actions int) error {
	if len(r.drop) == 0 || slices.Max(r.drop) < actions {
		return nil
	}
	reached := "no host action"
	switch {
	case actions == 1:
		reached = "1 host action (index 0)"
	case actions > 1:
		reached = fmt.Sprintf("%d host actions (indexes 0 to %d)", actions, actions-1)
	}
	return &fieldError{"drop", fmt.Errorf("action %d: %s reaches %s in this run", slices.Max(r.drop), r.sc.name, reached)}
}

func (r runSpec) identity() runIdentity {
	id := runIdentity{Scenario: r.sc.name, Seed: r.seed, Backend: r.backend, Strategy: r.strategy, Faults: r.plan, Drop: r.drop}
	if r.program != nil {
		id.Program = r.program.String()
	}
	return id
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
	// Kept is the session file a --keep run left, for picosim check.
	Kept string `json:"kept,omitempty"`
}

// runScenario runs one scenario deterministically: the spec fixes every
// interleaving, so the trace (written to trace if not nil) is a pure
// function of it. The session's files, if the backend has any, live in a
// temporary directory removed before it returns. ctx is looked at before
// the run only: a run is never cut short, since its outcome must be a
// function of its spec, and runs take milliseconds, so a signal is
// observed between them.
func runScenario(ctx context.Context, spec runSpec, trace io.Writer) (runResult, error) {
	if err := interruption(ctx); err != nil {
		return newResult(spec), err
	}
	if spec.backend == "memory" {
		return runScenarioIn("", spec, trace) // nothing on disk
	}
	dir, err := tempDir(ctx, "picosim-run-")
	if err != nil {
		return newResult(spec), err
	}
	defer os.RemoveAll(dir)
	if err := interruption(ctx); err != nil {
		return newResult(spec), err
	}
	return runScenarioIn(dir, spec, trace)
}

func newResult(spec runSpec) runResult {
	return runResult{runIdentity: spec.identity(), Command: spec.command()}
}

// runScenarioIn is runScenario with the session's files kept in dir. Its
// error is a spec no run can carry out (fieldError, also a drop of host
// actions the run never reached) or the machine failing the run
// (envError); a failing run is res.Error.
func runScenarioIn(dir string, spec runSpec, trace io.Writer) (runResult, error) {
	res := newResult(spec)
	strat, err := spec.check()
	if err != nil {
		return res, err
	}
	var tr *sim.Trace
	if !spec.untraced {
		tr = sim.NewTrace(trace, false)
	}
	var e *env
	var steps atomic.Int64 // the decisions made, for the stall watch
	opts := sim.Options{Seed: spec.seed, Strategy: strat, Trace: tr, StepsMax: runStepsMax}
	opts.OnStep = func(step int) {
		steps.Store(int64(step))
		if spec.inspect != nil && e != nil {
			spec.inspect(e, step)
		}
	}
	s := sim.New(opts)
	var runErr error
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		runErr = s.Run(context.Background(), func(ctx context.Context) {
			s.Record("header", traceHeader{Format: traceFormat, runIdentity: spec.identity()})
			e = newEnv(s, spec, dir)
			e.playAndJudge(ctx, &res)
		})
	}()
	if stalled := watchStall(ran, &steps); stalled != nil {
		// The actor that holds the baton runs on and on without yielding
		// (a loop that never reaches a scheduling point): nothing can stop
		// it, so the run is given up, its goroutines left behind.
		res := newResult(spec)
		res.Error = stalled.Error()
		return res, nil
	}
	if runErr != nil && e != nil {
		e.counts(&res) // the run stopped before playAndJudge could count
	}
	if tr != nil {
		res.Decisions, res.Digest = tr.Len(), tr.Digest()
	}
	switch {
	case e != nil && e.envErr != nil:
		return res, &envError{fmt.Errorf("the session's storage failed: %w", e.envErr)}
	case tr != nil && tr.Err() != nil:
		return res, &envError{fmt.Errorf("writing the trace: %w", tr.Err())}
	case runErr != nil:
		res.Error = runFailure(runErr)
	case e.verdict != nil:
		res.Error = e.verdict.Error()
	default:
		res.OK = true
	}
	return res, spec.checkReached(res.Actions)
}

// runStepsMax bounds a run's scheduling decisions: about a hundred times
// the most any scenario or generated program of the first 300 seeds makes
// (5,562), so that a run that cannot end, such as a job a bug leaves
// writing output while the liveness drive waits out its virtual hour, is
// reported as a livelock within seconds instead of holding a fuzz worker
// for many minutes.
const runStepsMax = 500_000

// stallLimit is how long, in real time, a run may go without a scheduling
// decision before it is given up as stalled. A simulated step is a few
// microseconds of work; only an actor that never yields takes this long.
var stallLimit = 2 * time.Minute

// stallPrefix begins a stalled run's failure.
const stallPrefix = "stalled: no scheduling decision for"

// stalledRun reports whether failure is a run given up as stalled.
func stalledRun(failure string) bool { return strings.HasPrefix(failure, stallPrefix) }

// watchStall waits for ran to close and returns nil, or returns the stall
// when the run makes no scheduling decision (steps stays put) for
// stallLimit of real time. It is the one place a run looks at the wall
// clock, and it never changes a run that yields: it only gives up on one
// that does not.
func watchStall(ran <-chan struct{}, steps *atomic.Int64) error {
	tick := time.NewTicker(stallLimit / 8)
	defer tick.Stop()
	last, since := steps.Load(), time.Now()
	for {
		select {
		case <-ran:
			return nil
		case now := <-tick.C:
			if n := steps.Load(); n != last {
				last, since = n, now
			} else if now.Sub(since) >= stallLimit {
				return fmt.Errorf("%s %s of real time after step %d (an actor looping without yielding?)", stallPrefix, stallLimit, n)
			}
		}
	}
}

// runFailure is how a run the simulator stopped failed, in one line when
// an actor broke one of the harness's invariants (Options.CheckInvariants
// panics with it, and core.SetCheckJSON with it or a
// *jsonvalue.FastPathError): the invariant says what is wrong, and the stack of the
// check, which is where it was found and not where it broke, stays in the
// trace's failure record. Any other panic keeps its stack.
func runFailure(err error) string {
	var pe *sim.PanicError
	if ie, fe := (*core.DriverInvariantError)(nil), (*jsonvalue.FastPathError)(nil); errors.As(err, &pe) {
		if v, ok := pe.Value.(error); ok && errors.As(v, &ie) {
			return fmt.Sprintf("sim: actor %s broke an invariant: %v", pe.Actor, ie)
		} else if ok && errors.As(v, &fe) {
			return fmt.Sprintf("sim: actor %s broke an invariant: %v", pe.Actor, fe)
		}
	}
	return err.Error()
}

// playAndJudge plays the scenario on the main actor, records the final
// view and the verdict, and fills in what res counts.
func (e *env) playAndJudge(ctx context.Context, res *runResult) {
	e.verdict = e.play(ctx)
	if e.h != nil {
		last := e.h.Store().LastSeq()
		res.Commits = int64(last)
		if e.watch != nil {
			e.s.Record("view", e.watch.View())
		}
		if err := e.h.Close(ctx); err != nil && e.verdict == nil {
			e.verdict = err
		}
		if e.verdict == nil {
			e.verdict = e.coldReopen(ctx, last)
		}
	}
	e.endHolds()
	e.noteEnv(e.verdict)
	e.counts(res)
	check := map[string]any{"ok": e.verdict == nil}
	if e.verdict != nil {
		check["error"] = e.verdict.Error()
	}
	e.s.Record("check", check)
}

// counts fills in what res counts of the run so far: commits admitted,
// faults fired, whether it restarted, host actions reached.
func (e *env) counts(res *runResult) {
	res.Batches, res.Fired, res.Recovered, res.Actions = e.batches, e.firedCount(), e.recovered, e.actions
}

// runOptions are picosim run's arguments.
type runOptions struct {
	spec              runSpec
	trace, keep, otel string
	json              bool
}

// parseRun reads picosim run's arguments, flags before or after the
// scenario, and refuses what no run can carry out before anything runs.
func parseRun(args []string) (runOptions, error) {
	var o runOptions
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	fl.Uint64Var(&o.spec.seed, "seed", 1, "the seed that fixes every interleaving")
	fl.StringVar(&o.spec.backend, "backend", "memory", "memory, jsonl or sqlite")
	fl.StringVar(&o.spec.strategy, "strategy", "random", "random or pct[:depth:steps]")
	faults := fl.String("faults", "", "a fault plan: its JSON, or a file holding it")
	drop := fl.String("drop", "", "host actions to leave out, by index: 0,3")
	prog := fl.String("program", "", "run this printed program (scenario generated)")
	fl.StringVar(&o.trace, "trace", "", "write the trace to this file")
	fl.StringVar(&o.keep, "keep", "", "keep the session's files in this new or empty directory")
	fl.BoolVar(&o.json, "json", false, "print a machine-readable result")
	fl.StringVar(&o.otel, "otel", "", "write the run's telemetry spans to this file")
	pos, err := parseAnywhere(fl, args)
	if err != nil {
		return o, err
	}
	if *prog != "" && len(pos) == 0 {
		pos = []string{"generated"}
	}
	if o.spec.sc, err = oneScenario(pos); err != nil {
		return o, err
	}
	if *prog != "" {
		if !o.spec.sc.generated {
			return o, usagef("--program runs the generated scenario, not %s", o.spec.sc.name)
		}
		data, err := os.ReadFile(*prog)
		if err != nil {
			return o, &fieldError{"--program", err}
		}
		if o.spec.program, err = parseProgram(string(data)); err != nil {
			return o, &fieldError{"--program", err}
		}
		o.spec.programFile = *prog
	}
	if o.spec.plan, err = readPlan(*faults); err != nil {
		return o, &fieldError{"--faults", err}
	}
	if o.spec.drop, err = parseDrop(*drop); err != nil {
		return o, &fieldError{"--drop", err}
	}
	if o.keep != "" && o.spec.backend == "memory" {
		return o, usagef("--keep: the memory backend keeps no files; add --backend jsonl or --backend sqlite")
	}
	_, err = o.spec.check()
	return o, asFlag(err)
}

// oneScenario is the scenario run's one positional argument names.
func oneScenario(pos []string) (scenario, error) {
	switch {
	case len(pos) == 0:
		return scenario{}, usagef("missing SCENARIO; usage: picosim run SCENARIO [FLAGS] (picosim run --help lists the flags)")
	case len(pos) > 1:
		return scenario{}, usagef("unexpected argument %q", pos[1])
	}
	sc, ok := findScenario(pos[0])
	if !ok {
		return sc, usagef("unknown scenario %q (picosim list shows them)", pos[0])
	}
	return sc, nil
}

// asFlag names a spec's field as run's flag.
func asFlag(err error) error {
	var fe *fieldError
	if errors.As(err, &fe) && !strings.HasPrefix(fe.field, "--") {
		return &fieldError{"--" + fe.field, fe.err}
	}
	return err
}

// run runs the spec and writes the trace if asked: only after the run, so
// that a refused run leaves no file.
func (o runOptions) run(ctx context.Context) (runResult, error) {
	var trace bytes.Buffer
	var w io.Writer // nil records no trace
	if o.trace != "" {
		w = &trace
	}
	if o.otel != "" {
		tel, err := openTelemetry(o.otel, o.spec)
		if err != nil {
			return newResult(o.spec), &fieldError{"--otel", err}
		}
		o.spec.tracer = tel.tp
		res, err := o.runIn(ctx, w)
		if cerr := tel.close(); cerr != nil && err == nil {
			return res, &fieldError{"--otel", cerr}
		}
		return o.finish(res, err, trace.Bytes())
	}
	res, err := o.runIn(ctx, w)
	return o.finish(res, err, trace.Bytes())
}

// finish writes the trace of a finished run.
func (o runOptions) finish(res runResult, err error, trace []byte) (runResult, error) {
	if err != nil {
		return res, asFlag(err)
	}
	if o.trace != "" {
		if err := writePrivate(o.trace, trace); err != nil {
			return res, &fieldError{"--trace", err}
		}
	}
	return res, nil
}

// runIn runs the spec in the --keep directory if given, else in a
// temporary one.
func (o runOptions) runIn(ctx context.Context, trace io.Writer) (runResult, error) {
	if o.keep == "" {
		return runScenario(ctx, o.spec, trace)
	}
	if err := emptyDir(o.keep); err != nil {
		return newResult(o.spec), &fieldError{"--keep", err}
	}
	if err := interruption(ctx); err != nil {
		return newResult(o.spec), err
	}
	res, err := runScenarioIn(o.keep, o.spec, trace)
	res.Kept = sessionFile(o.spec.backend, o.keep)
	return res, err
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseRun(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, runHelp)
		return 0
	}
	if err != nil {
		return fail(stderr, "run", err)
	}
	res, err := o.run(ctx)
	if err != nil {
		return fail(stderr, "run", err)
	}
	printRun(stdout, o.json, res)
	if !res.OK {
		return exitFailed
	}
	return 0
}

// printRun prints a run's result: its JSON, or a line (and the command
// that repeats a failure, and how to check a kept session).
func printRun(w io.Writer, asJSON bool, res runResult) {
	switch {
	case asJSON:
		_ = json.NewEncoder(w).Encode(res)
		return
	case res.OK:
		fmt.Fprintf(w, "✓ %s seed %d on %s: %d commits, %d decisions%s, trace %s\n",
			res.Scenario, res.Seed, res.Backend, res.Commits, res.Decisions, faultSummary(res), res.Digest[:12])
	default:
		fmt.Fprintf(w, "✗ %s seed %d on %s: %s\n  reproduce: %s\n", res.Scenario, res.Seed, res.Backend, res.Error, res.Command)
	}
	if res.Kept != "" {
		fmt.Fprintf(w, "  kept: picosim check %s\n", shellQuote(res.Kept))
	}
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
                    [--faults PLAN] [--drop I,J] [--program FILE] [--trace FILE] [--keep DIR] [--otel FILE]
                    [--json]

Runs one scenario deterministically: the same arguments give the same trace, byte for byte.
picosim list shows the scenarios. Flags may come before or after SCENARIO.

  --seed N       the seed that fixes every interleaving (default 1)
  --backend B    the session's storage (default memory; jsonl and sqlite write files)
  --strategy S   random (the default) or pct:D:K, probabilistic concurrency testing with depth D
                 (up to 100) over K steps (up to 5000000); pct alone is pct:3:10000
  --faults PLAN  storage faults for the session's first process: the plan's JSON, or a file holding
                 it, e.g. '{"faults":[{"name":"c1","kind":"crash","commit":7,"persist":true}]}'.
                 Kinds: hold (the commit waits a few virtual milliseconds), fail, uncertain, crash
                 (persist, or tear: a seed for where a JSONL line is cut), unlinkFail. commit
                 counts the commits that reach the process's storage, of "batch" main or scratch
                 if given. A fail, uncertain or crash stops the session; the run then restarts it,
                 drives it to the end and checks what must survive.
  --drop I,J     leave out host actions by index, each below the number the run reaches (fuzz
                 prints this when it shrinks a failure)
  --program FILE run this printed host-action program (scenario generated, which is implied);
                 without it, generated draws its program from the seed. fuzz writes the smallest
                 failing program of a generated run as such a file
  --trace FILE   write the trace to FILE (created 0600)
  --keep DIR     keep the session's files in DIR, new or empty (made 0700), and print the file to
                 pass to picosim check (DIR/session.jsonl or DIR/sessions.db); jsonl and sqlite only
  --otel FILE    write the run's OpenTelemetry spans to FILE (created 0600), one JSON object per
                 span as the SDK's stdout exporter writes them: a trace per turn (pico.turn) with its
                 invocations, provider calls, tool handlers, hooks and commits under it, stamped in
                 virtual time, ids drawn from the seed
  --json         print the result as one JSON line

Exit status: 0 when the run passes, 1 when it fails (with the command that reproduces it), 2 for a
mistake of use, 3 when the machine fails picosim (TMPDIR, disk, no cgo for sqlite).
`
