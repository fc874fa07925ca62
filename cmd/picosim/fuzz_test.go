package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pico-go/pico/sim/fault"
)

// commandArgs splits a printed picosim command line into its arguments
// after "picosim run", honouring the single quotes around a fault plan.
func commandArgs(t *testing.T, line string) []string {
	t.Helper()
	rest, ok := strings.CutPrefix(line, "picosim run ")
	if !ok {
		t.Fatalf("%q is not a picosim run command", line)
	}
	var args []string
	for rest != "" {
		rest = strings.TrimLeft(rest, " ")
		if strings.HasPrefix(rest, "'") {
			end := strings.Index(rest[1:], "'")
			if end < 0 {
				t.Fatalf("unbalanced quote in %q", line)
			}
			args, rest = append(args, rest[1:end+1]), rest[end+2:]
			continue
		}
		word, after, _ := strings.Cut(rest, " ")
		args, rest = append(args, word), after
	}
	return args
}

// fuzzFinding runs fuzz with a planted bug and returns the smallest case's
// arguments and its failure, after checking that the failure's trace was
// written and replays identically.
func fuzzFinding(t *testing.T, bug string, args ...string) (smallest []string, failure string) {
	t.Helper()
	t.Setenv(plantedEnv, bug)
	out := filepath.Join(t.TempDir(), "failures")
	var stdout, stderr bytes.Buffer
	if code := fuzzMain(context.Background(), append(args, "--workers", "2", "--out", out, "--fail-fast"), &stdout, &stderr); code != 1 {
		t.Fatalf("fuzz: exit %d; want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	m := regexp.MustCompile(`(?m)^  smallest: (.*)\n    fails with: (.*)$`).FindStringSubmatch(stdout.String())
	if m == nil || !strings.Contains(stdout.String(), "  run: picosim run ") {
		t.Fatalf("no failing and smallest commands in:\n%s", stdout.String())
	}
	traces, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	smallestTraces, _ := filepath.Glob(filepath.Join(out, "*-smallest.jsonl"))
	// Two workers may each find a failure before fail-fast stops them.
	if len(smallestTraces) == 0 || len(traces) != 2*len(smallestTraces) {
		t.Fatalf("traces written to %s: %v; want each failing run's and its smallest case's", out, traces)
	}
	for _, trace := range traces {
		var replayed bytes.Buffer
		if code := replayMain(context.Background(), []string{trace}, &replayed, &stderr); code != 0 {
			t.Fatalf("replaying %s: %s%s", trace, replayed.String(), stderr.String())
		}
	}
	return commandArgs(t, m[1]), m[2]
}

// rerun runs a printed command and requires it to fail with failure.
func rerun(t *testing.T, args []string, failure string) runResult {
	t.Helper()
	var out, stderr bytes.Buffer
	code := runMain(context.Background(), append(args, "--json"), &out, &stderr)
	var res runResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || code != 1 || res.Error != failure {
		t.Fatalf("picosim run %s: exit %d, %q %s; want exit 1 failing with %q", strings.Join(args, " "), code, out.String(), stderr.String(), failure)
	}
	return res
}

// With a planted bug that only some schedules hit, fuzz finds it, writes
// the failing trace, shrinks it to a fault-free PCT schedule, and prints a
// command that fails the same way.
func TestFuzzFindsShrinksAndReproducesAPlantedScheduleBug(t *testing.T) {
	smallest, failure := fuzzFinding(t, "tool-order", "parallel-tools", "--seeds", "12")
	if failure != "planted bug: tool b ran before tool a" {
		t.Fatalf("smallest case fails with %q", failure)
	}
	res := rerun(t, smallest, failure)
	if len(res.Faults.Faults) != 0 || !strings.HasPrefix(res.Strategy, "pct:") {
		t.Fatalf("the smallest case keeps faults %s or a %s schedule; a fault-free PCT schedule fails too", res.Faults, res.Strategy)
	}
}

// A bug that shows only when a fault fires: fuzz finds it among the drawn
// plans and shrinks the plan to the one fault that matters. A failed commit
// acknowledged as done leaves the driver's record of a live task ahead of
// storage, which the invariant check after the next commit names.
func TestFuzzFindsAndShrinksAFaultBug(t *testing.T) {
	smallest, failure := fuzzFinding(t, "ack-failed", "basic-turn", "--seeds", "40")
	if !strings.Contains(failure, ` broke an invariant: core: driver invariant "live-records" broken: live task `) {
		t.Fatalf("smallest case fails with %q", failure)
	}
	res := rerun(t, smallest, failure)
	if len(res.Faults.Faults) != 1 || res.Faults.Faults[0].Kind != fault.Fail || res.Fired != 1 {
		t.Fatalf("the smallest plan is %s (%d fired); want the one fail fault", res.Faults, res.Fired)
	}
}

// A bug one host action triggers: shrinking leaves out every other host
// action the run reaches.
func TestFuzzLeavesOutHostActionsTheFailureDoesNotNeed(t *testing.T) {
	smallest, failure := fuzzFinding(t, "steer", "input-while-busy", "--seeds", "6")
	if !strings.HasPrefix(failure, "planted bug: steer ") {
		t.Fatalf("smallest case fails with %q", failure)
	}
	res := rerun(t, smallest, failure)
	if res.Actions < 2 || len(res.Drop) != res.Actions-1 || len(res.Faults.Faults) != 0 {
		t.Fatalf("the smallest case drops %v of %d actions with faults %s; want all but the steer, no faults", res.Drop, res.Actions, res.Faults)
	}
}

// Beside each failing trace it writes, the failing run's and the smallest
// case's, fuzz writes the trace's page (picosim show --html), named the
// same but .html, and says where, in its report and in --json; the page
// opens on the failure.
func TestFuzzWritesAPageBesideEachFailingTrace(t *testing.T) {
	t.Setenv(plantedEnv, "tool-order")
	args := []string{"parallel-tools", "--seeds", "12", "--workers", "1", "--fail-fast"}
	out := filepath.Join(t.TempDir(), "failures")
	var report, stderr bytes.Buffer
	if code := fuzzMain(context.Background(), append(args, "--out", out), &report, &stderr); code != 1 {
		t.Fatalf("fuzz: exit %d; want 1\n%s%s", code, report.String(), stderr.String())
	}
	traces, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	pages, _ := filepath.Glob(filepath.Join(out, "*.html"))
	if len(traces) != 2 || len(pages) != len(traces) {
		t.Fatalf("fuzz wrote traces %v and pages %v; want a page beside each of two traces", traces, pages)
	}
	for _, trace := range traces {
		path := strings.TrimSuffix(trace, ".jsonl") + ".html"
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no page beside %s: %v", trace, err)
		}
		lines, _, err := readTrace(trace)
		if err != nil {
			t.Fatal(err)
		}
		want, err := showPage(lines, showOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not the page of %s", path, trace)
		}
		if !strings.Contains(report.String(), "  its page: "+path+"\n") {
			t.Errorf("the report does not say where %s went:\n%s", path, report.String())
		}
		if !regexp.MustCompile(`<p id="verdict" class="failed">failed at step \d+ in actor main: planted bug: tool b ran before tool a</p>`).Match(got) ||
			strings.Count(string(got), `class="mark failure"`) != 1 {
			t.Errorf("%s does not open on the failing check", path)
		}
	}
	var summary bytes.Buffer
	jsonOut := filepath.Join(t.TempDir(), "failures")
	fuzzMain(context.Background(), append(args, "--json", "--out", jsonOut), &summary, &stderr)
	var sum fuzzSummary
	if err := json.Unmarshal(summary.Bytes(), &sum); err != nil || len(sum.Failures) != 1 {
		t.Fatalf("fuzz --json printed %q: %v", summary.String(), err)
	}
	f := sum.Failures[0]
	if f.Page != strings.TrimSuffix(f.Trace, ".jsonl")+".html" || f.SmallestPage != strings.TrimSuffix(f.SmallestTrace, ".jsonl")+".html" {
		t.Errorf("--json names the pages %q and %q beside %q and %q", f.Page, f.SmallestPage, f.Trace, f.SmallestTrace)
	}
}

func TestFuzzWithoutBugsPassesAndMistakesExitTwo(t *testing.T) {
	t.Setenv(plantedEnv, "")
	var stdout, stderr bytes.Buffer
	if code := fuzzMain(context.Background(), []string{"--seeds", "4", "--out", t.TempDir()}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	summary := fmt.Sprintf(`^DONE %d runs over %d scenarios, [1-9]\d* faults injected \(\d+ restarts\), 0 failures in [\d.]+s: \d+ schedules/s\n$`, 4*len(scenarios), len(scenarios))
	if !regexp.MustCompile(summary).MatchString(stdout.String()) {
		t.Fatalf("summary %q", stdout.String())
	}
	for _, args := range [][]string{{"nope"}, {"--workers", "0"}, {"--workers", "1025"}, {"--backend", "x"}, {"--seeds", "x"}} {
		stderr.Reset()
		if code := fuzzMain(context.Background(), args, &stdout, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line", args, code, stderr.String())
		}
	}
}

// --start moves the window of seeds: a failing seed found from 1 is found
// again as the only seed of a window that starts at it.
func TestFuzzStartsAtTheSeedGiven(t *testing.T) {
	t.Setenv(plantedEnv, "ack-failed")
	var stdout, stderr bytes.Buffer
	if code := fuzzMain(context.Background(), []string{"basic-turn", "--seeds", "40", "--workers", "1", "--fail-fast", "--out", t.TempDir()}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	m := regexp.MustCompile(`(?m)^FAIL basic-turn seed (\d+) `).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no failing seed in:\n%s", stdout.String())
	}
	stdout.Reset()
	code := fuzzMain(context.Background(), []string{"basic-turn", "--start", m[1], "--seeds", "1", "--out", t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.HasPrefix(stdout.String(), "FAIL basic-turn seed "+m[1]+" ") || !strings.Contains(stdout.String(), "DONE 1 runs over 1 scenarios") {
		t.Fatalf("--start %s --seeds 1: exit %d\n%s", m[1], code, stdout.String())
	}
}

// --shard K/N splits the seeds into N disjoint shares that together are
// all of them; a bad shard is a mistake of use.
func TestShardsSplitTheSeedsDisjointly(t *testing.T) {
	seen := map[uint64]int{}
	for k := 1; k <= 3; k++ {
		cfg, err := parseFuzz([]string{"basic-turn", "--seeds", "10", "--start", "5", "--shard", fmt.Sprintf("%d/3", k)})
		if err != nil {
			t.Fatal(err)
		}
		f := &fuzzer{cfg: cfg, stop: make(chan struct{}), batches: map[string]int{}}
		jobs := make(chan runSpec)
		go f.feed(context.Background(), jobs, time.Now())
		for spec := range jobs {
			seen[spec.seed]++
		}
	}
	for seed := uint64(5); seed < 15; seed++ {
		if seen[seed] != 1 {
			t.Fatalf("seeds run %v; want each of 5..14 exactly once", seen)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("seeds run %v; want 10", seen)
	}
	for _, bad := range []string{"0/3", "4/3", "3", "a/b"} {
		if _, err := parseFuzz([]string{"--shard", bad}); err == nil {
			t.Errorf("--shard %s accepted", bad)
		}
	}
}

// Fuzz runs its seeds untraced and a failing one again for its trace. A
// seed that does not fail the same way the second time is not fixed by
// its seed: fuzz stops on it, naming the command and both outcomes,
// rather than shrink or write a trace that does not show the failure.
func TestFuzzStopsOnASeedThatFailsOnlyOnce(t *testing.T) {
	var calls atomic.Int32
	flaky := scenario{name: "flaky", run: func(ctx context.Context, e *env) error {
		if err := basicTurn(ctx, e); err != nil {
			return err
		}
		if calls.Add(1) == 1 {
			return errors.New("only the first time")
		}
		return nil
	}}
	f := &fuzzer{cfg: fuzzConfig{out: t.TempDir()}, stop: make(chan struct{})}
	spec := runSpec{sc: flaky, seed: 1, backend: "memory", strategy: "random", untraced: true}
	f.try(context.Background(), spec)
	var ne *NondeterminismError
	if !errors.As(f.fatal, &ne) || ne.Command != spec.command() || !strings.Contains(ne.First, "only the first time") || ne.Again != "" {
		t.Fatalf("fatal %v; want a NondeterminismError naming %q, the first failure and a pass", f.fatal, spec.command())
	}
	if calls.Load() != 2 || len(f.findings) != 0 {
		t.Fatalf("%d runs, %d findings; want the seed run twice and no finding", calls.Load(), len(f.findings))
	}
	if want := "is not deterministic: it failed with: "; !strings.Contains(ne.Error(), want) || !strings.HasSuffix(ne.Error(), "run again for its trace it passed") {
		t.Fatalf("message %q", ne.Error())
	}
}

// A failure that names the run's own directory (a JSONL or SQLite error
// names its file) differs in that name between the run and its traced
// rerun; it fails the same way all the same, as shrink judges it, and is
// a finding with its trace, not a nondeterminism.
func TestFuzzTakesAFailureNamingItsDirectoryAsDeterministic(t *testing.T) {
	named := scenario{name: "named", run: func(ctx context.Context, e *env) error {
		if err := basicTurn(ctx, e); err != nil {
			return err
		}
		return fmt.Errorf("the session's file %s is bad", filepath.Join(e.dir, "session.jsonl"))
	}}
	f := &fuzzer{cfg: fuzzConfig{out: t.TempDir()}, stop: make(chan struct{})}
	f.try(context.Background(), runSpec{sc: named, seed: 1, backend: "jsonl", strategy: "random", untraced: true})
	if f.fatal != nil || len(f.findings) != 1 || f.findings[0].trace == "" {
		t.Fatalf("fatal %v, %d findings; want one finding with its trace", f.fatal, len(f.findings))
	}
}

// A run whose actor loops without ever reaching a scheduling point cannot
// be stopped; it is given up as stalled once it has made no decision for
// stallLimit of real time, so that fuzz reports it instead of hanging.
// (The one test that needs the wall clock: a stall is real time passing.)
func TestARunThatNeverYieldsIsGivenUpAsStalled(t *testing.T) {
	defer func(old time.Duration) { stallLimit = old }(stallLimit)
	stallLimit = 50 * time.Millisecond
	var release atomic.Bool
	defer release.Store(true) // the abandoned run then finishes on its own
	spin := scenario{name: "spin", run: func(ctx context.Context, e *env) error {
		for !release.Load() { // no scheduling point: the baton never comes back
		}
		return nil
	}}
	res, err := runScenario(context.Background(), runSpec{sc: spin, seed: 1, backend: "memory", strategy: "random", untraced: true}, nil)
	if err != nil || res.OK || !strings.Contains(res.Error, "stalled: no scheduling decision") {
		t.Fatalf("runScenario = %+v, %v; want a run failed as stalled", res, err)
	}
}
