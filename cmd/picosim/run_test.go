package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
)

// withoutHeader drops a trace's header line, which names the backend.
func withoutHeader(trace []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(trace, []byte("\n")) {
		if !bytes.Contains(l, []byte(`"k":"header"`)) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}

// Every scenario passes on every backend, the same seed gives the same
// trace (apart from the header naming the backend) whatever the backend,
// and different seeds explore different schedules.
func TestScenariosPassAndAreDeterministic(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			digests := map[string]bool{}
			for seed := uint64(1); seed <= 5; seed++ {
				var first []byte
				var digest string
				for _, backend := range []string{"memory", "jsonl", "sqlite"} {
					if backend != "memory" && seed > 2 {
						continue // the disk backends add files, not schedules
					}
					var trace bytes.Buffer
					res, err := runScenario(context.Background(), runSpec{sc: sc, seed: seed, backend: backend, strategy: "random"}, &trace)
					if err != nil || !res.OK {
						t.Fatalf("seed %d on %s: %v %s\n  reproduce: go run ./cmd/picosim run %s --seed %d --backend %s", seed, backend, err, res.Error, sc.name, seed, backend)
					}
					if first == nil {
						first, digest = withoutHeader(trace.Bytes()), res.Digest
					} else if !bytes.Equal(withoutHeader(trace.Bytes()), first) {
						t.Fatalf("seed %d: %s's trace differs from memory's", seed, backend)
					}
				}
				again, _ := runScenario(context.Background(), runSpec{sc: sc, seed: seed, backend: "memory", strategy: "random"}, nil)
				if again.Digest != digest {
					t.Fatalf("seed %d ran twice gives traces %s and %s", seed, digest, again.Digest)
				}
				digests[digest] = true
			}
			if len(digests) < 2 {
				t.Fatalf("five seeds gave %d distinct schedules", len(digests))
			}
		})
	}
}

func TestRunWritesIdenticalTracesForTheSameSeed(t *testing.T) {
	dir := t.TempDir()
	var traces [2][]byte
	for i := range traces {
		path := filepath.Join(dir, "trace"+string(rune('a'+i)))
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), []string{"input-while-busy", "--seed", "7", "--trace", path, "--json"}, &out, &errOut); code != 0 {
			t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
		}
		var res runResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.OK || res.Seed != 7 {
			t.Fatalf("result %s: %v", out.String(), err)
		}
		var err error
		if traces[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if len(traces[0]) == 0 || !bytes.Equal(traces[0], traces[1]) {
		t.Fatalf("two runs of one seed wrote different traces (%d and %d bytes)", len(traces[0]), len(traces[1]))
	}
}

func TestRunAndListMistakesAreOneLineAndExitTwo(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"basic-turn", "--backend", "oracle"}, {"basic-turn", "--strategy", "chaos"}, {"basic-turn", "--seed", "x"}, {"basic-turn", "extra"}} {
		var out, errOut bytes.Buffer
		if code := runMain(context.Background(), args, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errOut.String())
		}
	}
	var out bytes.Buffer
	listMain(&out)
	for _, sc := range scenarios {
		if !strings.Contains(out.String(), sc.name+" ") {
			t.Errorf("list lacks %s:\n%s", sc.name, out.String())
		}
	}
}

func TestReplaySaysIdenticalOrNamesTheFirstDifferingLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.trace")
	var out, errOut bytes.Buffer
	if code := runMain(context.Background(), []string{"parallel-tools", "--seed", "3", "--backend", "jsonl", "--trace", path}, &out, &errOut); code != 0 {
		t.Fatalf("run: exit %d: %s %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := replayMain(context.Background(), []string{path}, &out, &errOut); code != 0 || out.String() != "identical\n" {
		t.Fatalf("replay of a fresh trace: exit %d, %q %q", code, out.String(), errOut.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) < 30 || !bytes.Contains(data, []byte(`"k":"commit"`)) || !bytes.Contains(data, []byte(`"k":"event"`)) || !bytes.Contains(data, []byte(`"k":"view"`)) {
		t.Fatalf("the trace lacks commits, events or the final view:\n%s", data)
	}
	lines[24] = bytes.Replace(lines[24], []byte(`"k":`), []byte(`"K":`), 1)
	if err := os.WriteFile(path, bytes.Join(lines, []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := replayMain(context.Background(), []string{path}, &out, &errOut); code != 1 || !strings.HasPrefix(out.String(), "line 25 differs\n") {
		t.Fatalf("replay of an edited trace: exit %d, %q; want line 25 named and exit 1", code, out.String())
	}
	if err := os.WriteFile(path, []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := replayMain(context.Background(), []string{path}, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("replay of a corrupt file: exit %d, %q; want exit 2 and one line", code, errOut.String())
	}
}

// The golden traces in fixtures/traces are what ports replay: per scenario
// one run (seed 1, memory) and one whose process crashes halfway through
// its commits (the batch persisted) and is restarted. Each must be exactly
// what a run writes today; go test ./cmd/picosim -update regenerates them.
func TestGoldenTracesReplay(t *testing.T) {
	dir := filepath.Join("..", "..", "fixtures", "traces")
	for _, sc := range scenarios {
		spec := runSpec{sc: sc, seed: 1, backend: "memory", strategy: "random"}
		plain, err := runScenario(context.Background(), spec, nil)
		if err != nil || !plain.OK {
			t.Fatalf("%s: %v %s", sc.name, err, plain.Error)
		}
		crash := spec
		crash.plan = fault.Plan{Faults: []fault.Fault{{Name: "halfway", Kind: fault.Crash, Commit: plain.Batches / 2, Persist: true}}}
		for _, golden := range []struct {
			path string
			spec runSpec
		}{{sc.name + ".jsonl", spec}, {sc.name + ".crash.jsonl", crash}} {
			path := filepath.Join(dir, golden.path)
			var trace bytes.Buffer
			res, err := runScenario(context.Background(), golden.spec, &trace)
			if err != nil || !res.OK || res.Recovered != (len(golden.spec.plan.Faults) > 0) {
				t.Fatalf("%s: %v %s (recovered %v)", golden.path, err, res.Error, res.Recovered)
			}
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, trace.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var out, errOut bytes.Buffer
			if code := replayMain(context.Background(), []string{path}, &out, &errOut); code != 0 {
				t.Errorf("%s: replaying %s: %s%s(if the change is intended: go test ./cmd/picosim -update)", sc.name, path, out.String(), errOut.String())
			}
		}
	}
}

func TestSuiteRunsEveryScenarioAndEndsWithDone(t *testing.T) {
	var out bytes.Buffer
	if failures, err := runSuite(context.Background(), &out, 3, suiteBackend, false); err != nil || failures != 0 {
		t.Fatalf("%d failures, %v:\n%s", failures, err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(scenarios)+1 || !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("DONE %d scenarios, %d runs (each replayed), 0 failures in ", len(scenarios), 3*len(scenarios))) {
		t.Fatalf("output:\n%s", out.String())
	}
	injected := 0
	for i, sc := range scenarios {
		m := regexp.MustCompile(`^✓ ` + sc.name + ` +3 seeds, \d+ schedules, \d+ commits, (\d+) faults injected \(\d+ restarts\), 0 failures, `).FindStringSubmatch(lines[i])
		if m == nil {
			t.Errorf("line %d = %q; want scenario %s passing 3 seeds", i, lines[i], sc.name)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		injected += n
	}
	if injected == 0 {
		t.Error("the suite injected no fault: its even seeds run with a fault plan")
	}
}

// Every fault kind on the backends that carry it: the run passes (a
// stopping fault is judged after a restart), says what fired, writes the
// same trace twice, and its trace replays identically.
func TestRunWithFaults(t *testing.T) {
	sc, _ := findScenario("parallel-tools")
	for _, c := range []struct {
		backend   string
		fault     fault.Fault
		fired     int
		recovered bool
		inTrace   string
	}{
		{"memory", fault.Fault{Name: "c", Kind: fault.Crash, Commit: 3, Batch: storage.BatchMain, Persist: true}, 1, true, `"event":"fire"`},
		{"jsonl", fault.Fault{Name: "c", Kind: fault.Crash, Commit: 10, Tear: 7}, 1, true, `"torn":{"file":"session.`},
		{"sqlite", fault.Fault{Name: "u", Kind: fault.Uncertain, Commit: 6}, 1, true, `"kind":"uncertain","event":"fire"`},
		{"memory", fault.Fault{Name: "f", Kind: fault.Fail, Commit: 2, Batch: storage.BatchScratch}, 1, true, `"k":"restart"`},
		{"jsonl", fault.Fault{Name: "un", Kind: fault.UnlinkFail, Commit: 2}, 1, false, `"kind":"unlinkFail","event":"fire"`},
		{"memory", fault.Fault{Name: "h", Kind: fault.Hold, Commit: 5}, 1, false, `"kind":"hold","event":"release","commit":5`},
		{"memory", fault.Fault{Name: "late", Kind: fault.Crash, Commit: 999}, 0, false, `"faults":[{"name":"late"`},
	} {
		t.Run(c.backend+"/"+string(c.fault.Kind), func(t *testing.T) {
			spec := runSpec{sc: sc, seed: 3, backend: c.backend, strategy: "random", plan: fault.Plan{Faults: []fault.Fault{c.fault}}}
			var traces [2]bytes.Buffer
			var res runResult
			for i := range traces {
				var err error
				if res, err = runScenario(context.Background(), spec, &traces[i]); err != nil || !res.OK {
					t.Fatalf("%v %s\n  reproduce: %s", err, res.Error, spec.command())
				}
			}
			if res.Fired != c.fired || res.Recovered != c.recovered {
				t.Fatalf("fired %d, recovered %v; want %d, %v", res.Fired, res.Recovered, c.fired, c.recovered)
			}
			if !bytes.Equal(traces[0].Bytes(), traces[1].Bytes()) {
				t.Fatal("two runs of one spec wrote different traces")
			}
			if !strings.Contains(traces[0].String(), c.inTrace) {
				t.Fatalf("the trace lacks %s", c.inTrace)
			}
			path := filepath.Join(t.TempDir(), "trace.jsonl")
			if err := os.WriteFile(path, traces[0].Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := replayMain(context.Background(), []string{path}, &out, &errOut); code != 0 || out.String() != "identical\n" {
				t.Fatalf("replay: exit %d, %s%s", code, out.String(), errOut.String())
			}
		})
	}
}

// A plan or a drop list that cannot be used is one line naming what is
// wrong, exit 2, and no run.
func TestRunFaultMistakesAreOneLineAndExitTwo(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--faults", `{"faults":[{"name":"x","kind":"boom","commit":1}]}`}, `faults[0].kind: unknown kind "boom"`},
		{[]string{"--faults", `{"faults":[{"name":"x","kind":"crash","commit":0}]}`}, "faults[0].commit"},
		{[]string{"--faults", `{"faults":[{"name":"x","kind":"crash","commit":2,"tear":3}]}`}, "only the jsonl backend"},
		{[]string{"--faults", `{"faults":[]} trailing`}, "after the plan"},
		{[]string{"--faults", `{"fautls":[]}`}, `unknown field "fautls"`},
		{[]string{"--faults", missing}, "missing.json"},
		{[]string{"--drop", "a"}, `"a" is not a host action index`},
		{[]string{"--drop", "1,1"}, "action 1 is named twice"},
	} {
		var out, errOut bytes.Buffer
		code := runMain(context.Background(), append([]string{"basic-turn"}, c.args...), &out, &errOut)
		if code != 2 || out.Len() != 0 || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, out.String(), errOut.String(), c.want)
		}
	}
}

// A dropped host action is recorded as dropped and not performed, and the
// run replays with the same drop.
func TestRunDropsHostActions(t *testing.T) {
	sc, _ := findScenario("input-while-busy")
	spec := runSpec{sc: sc, seed: 4, backend: "memory", strategy: "random"}
	full, err := runScenario(context.Background(), spec, nil)
	if err != nil || !full.OK || full.Actions != 6 {
		t.Fatalf("%v %s: %d actions; want 6 (go, three while busy, nextRun, the idle accept)", err, full.Error, full.Actions)
	}
	spec.drop = []int{1, 3}
	var trace bytes.Buffer
	res, err := runScenario(context.Background(), spec, &trace)
	if err != nil || !res.OK || res.Actions != 6 || !strings.HasSuffix(res.Command, " --drop 1,3") {
		t.Fatalf("%v %s: %d actions, command %q", err, res.Error, res.Actions, res.Command)
	}
	if got := strings.Count(trace.String(), `"dropped":true`); got != 2 {
		t.Fatalf("%d host records say dropped; want 2", got)
	}
	if res.Commits >= full.Commits {
		t.Fatalf("dropping two inputs committed %d sequences, the full run %d; want fewer", res.Commits, full.Commits)
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, trace.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := replayMain(context.Background(), []string{path}, &out, &errOut); code != 0 || out.String() != "identical\n" {
		t.Fatalf("replay: exit %d, %s%s", code, out.String(), errOut.String())
	}
}

// afterBasicTurn plays basic-turn at seed 1 on memory, then runs then in
// the same simulation with the run's env, closes the session, and fails t
// with every problem then reports.
func afterBasicTurn(t *testing.T, then func(ctx context.Context, s *sim.Sim, e *env) []string) {
	t.Helper()
	sc, _ := findScenario("basic-turn")
	s := sim.New(sim.Options{Seed: 1})
	var problems []string
	err := s.Run(context.Background(), func(ctx context.Context) {
		e := newEnv(s, runSpec{sc: sc, seed: 1, backend: "memory", strategy: "random"}, t.TempDir())
		if err := e.play(ctx); err != nil {
			problems = append(problems, "the run itself: "+err.Error())
		}
		problems = append(problems, then(ctx, s, e)...)
		_ = e.h.Close(ctx)
		e.endHolds()
	})
	if err != nil || len(problems) > 0 {
		t.Fatalf("%v %v", err, problems)
	}
}

// The end-of-run invariants fail when acknowledged work is missing.
func TestInvariantsCatchLostAcknowledgedWork(t *testing.T) {
	afterBasicTurn(t, func(ctx context.Context, _ *sim.Sim, e *env) (problems []string) {
		last := e.h.Store().LastSeq()
		e.entries = append(e.entries, last+1)
		if err := e.invariants(ctx); err == nil || err.Error() != fmt.Sprintf("entry %d was acknowledged, but the session has lost it", last+1) {
			problems = append(problems, fmt.Sprintf("a lost entry: %v", err))
		}
		e.entries, e.acked = nil, last+3
		if err := e.invariants(ctx); err == nil || err.Error() != fmt.Sprintf("sequence %d was acknowledged, but the session ends at %d", last+3, last) {
			problems = append(problems, fmt.Sprintf("a lost sequence: %v", err))
		}
		return problems
	})
}

// picosim show's timeline of a golden trace, whole and filtered, is
// golden too; a damaged trace is refused.
func TestShowTimelines(t *testing.T) {
	trace := filepath.Join("..", "..", "fixtures", "traces", "provider-clear.crash.jsonl")
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"show-provider-clear-crash", nil},
		{"show-provider-clear-crash-commits", []string{"--kinds", "commit,host,fault,restart,check", "--from", "10", "--to", "60"}},
		{"show-provider-clear-crash-main", []string{"--actor", "main", "--kinds", "host,commit"}},
	} {
		var out, errOut bytes.Buffer
		if code := showMain(append([]string{trace}, tc.args...), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut.String())
		}
		golden := filepath.Join("testdata", tc.golden+".golden")
		if *update {
			if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test ./cmd/picosim -update creates it)", err)
		}
		if out.String() != string(want) {
			t.Errorf("show %v:\n%s\nwant:\n%s\n(if intended: go test ./cmd/picosim -update)", tc.args, out.String(), want)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"k\":\"run\"\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := showMain([]string{bad}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "bad.jsonl") {
		t.Fatalf("show of a damaged trace: exit %d, %q; want a usage failure naming the file", code, errOut.String())
	}
}

// replay --until prints the run's state at a step inside a turn: the
// streaming generation and the method it runs, the last commit, the root
// view so far; the replay still says identical. A step the run never
// reaches is a mistake of use.
func TestReplayUntilAStepInsideATurn(t *testing.T) {
	trace := filepath.Join("..", "..", "fixtures", "traces", "provider-clear.jsonl")
	var out, errOut bytes.Buffer
	if code := replayMain(context.Background(), []string{trace, "--until", "16"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"at step 16, virtual time 0s", "7 generation in conversation 1: streaming (execute running)",
		"last commit: commit 8–9: entry system, patch streaming", `root view: {"conversation":{"id":1}`, "identical"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("replay --until 16 printed:\n%s\nwithout %q", out.String(), want)
		}
	}
	out.Reset()
	errOut.Reset()
	if code := replayMain(context.Background(), []string{trace, "--until", "1000000"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "does not reach") {
		t.Fatalf("--until past the end: exit %d, %q", code, errOut.String())
	}
}
