package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/storage"
)

// A drawn program prints and parses back to itself, for many seeds; the
// printed form is the program.
func TestProgramsPrintAndParseBack(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		p := drawProgram(seed)
		text := p.String()
		q, err := parseProgram(text)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, text)
		}
		if q.String() != text {
			t.Fatalf("seed %d: the program read back prints differently:\n%s\nvs\n%s", seed, text, q.String())
		}
	}
}

// A program that does not parse is a ProgramError naming its line.
func TestBadProgramsNameTheirLine(t *testing.T) {
	for _, tc := range []struct {
		text string
		line int
		want string
	}{
		{"not a program\n", 1, "want"},
		{programMagic + "\nswarm tail=x\n", 2, "tail"},
		{programMagic + "\naccept c0 \"hi\"\nfly c0\n", 3, "unknown op"},
		{programMagic + "\nrespond shout\n", 2, "respond"},
		{programMagic + "\nsleep soon\n", 2, "sleep"},
		{programMagic + "\naccept x0 \"hi\"\n", 2, "not a conversation"},
		{programMagic + "\naccept c0 \"unterminated\n", 2, "quoted"},
		{programMagic + "\nfork c0 1 maybe\n", 2, "want abort"},
	} {
		_, err := parseProgram(tc.text)
		var pe *ProgramError
		if !errors.As(err, &pe) || pe.Line != tc.line || !strings.Contains(pe.Reason, tc.want) {
			t.Errorf("parse %q = %v; want a ProgramError at line %d mentioning %q", tc.text, err, tc.line, tc.want)
		}
	}
}

// Dropping host actions from a run is the same as running the program
// without those lines: the shrunk program replays the shrunk run.
func TestAProgramWithoutItsDroppedLinesRunsAsTheDroppedRun(t *testing.T) {
	sc, _ := findScenario("generated")
	compared := 0
	for seed := uint64(1); seed <= 20; seed++ {
		drop := []int{0, 2, 5}
		dropped, err := runScenario(context.Background(), runSpec{sc: sc, seed: seed, backend: "memory", strategy: "random", drop: drop}, nil)
		if err != nil {
			continue // the run reaches fewer actions than that
		}
		p := drawProgram(seed).without(drop)
		given, err := runScenario(context.Background(), runSpec{sc: sc, seed: seed, backend: "memory", strategy: "random", program: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if given.OK != dropped.OK || given.Commits != dropped.Commits || given.Error != dropped.Error {
			t.Fatalf("seed %d: dropped run %+v, program run %+v; want the same outcome", seed, dropped, given)
		}
		compared++
	}
	if compared < 10 {
		t.Fatalf("only %d of 20 seeds reached the dropped actions", compared)
	}
}

// picosim run --program FILE runs a printed program, and the trace
// replays identically.
func TestRunProgramFileAndReplayIt(t *testing.T) {
	res, path, _ := runProgramFile(t, drawProgram(7).String(), 3)
	if !strings.Contains(res.Command, "--program "+path) {
		t.Fatalf("command %q does not name the program", res.Command)
	}
}

// runProgramFile runs the program text as picosim run --program FILE
// --seed seed does, fails the test unless the run passes and its trace
// replays identically, and returns the result, the program's path and
// the trace.
func runProgramFile(t *testing.T, text string, seed uint64) (runResult, string, []byte) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.program")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseRun([]string{"--program", path, "--seed", strconv.FormatUint(seed, 10)})
	if err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "t.jsonl")
	f, err := os.Create(trace)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runScenario(context.Background(), o.spec, f)
	f.Close()
	if err != nil || !res.OK {
		t.Fatalf("run: %v %s", err, res.Error)
	}
	if got, err := replay(context.Background(), trace); err != nil || got != "" {
		t.Fatalf("replay = %q, %v", got, err)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	return res, path, data
}

// An argument with a newline, a tab or a quote prints quoted and reads
// back as the same one token.
func TestArgumentsWithControlCharactersRoundTrip(t *testing.T) {
	p := &program{tail: 1, lines: []progLine{{op: "accept", args: []string{"c0", "two\nlines\tand \"quotes\" \\ end"}}, {op: "write", args: []string{"c0", "plain"}}}}
	q, err := parseProgram(p.String())
	if err != nil || q.String() != p.String() || q.lines[0].args[1] != p.lines[0].args[1] {
		t.Fatalf("read back %q (%v) from\n%s", q, err, p)
	}
}

// The model's answers go out in order, but one naming the asker's own
// child or job waits for a conversation that has one to ask, for at most
// answerPassesMax requests; its ids are the asker's.
func TestACommandAnswerWaitsForAnAskerWithAChild(t *testing.T) {
	e := &env{oracle: newOracle()}
	g := &programRun{e: e}
	queue := func(lines ...string) {
		for _, l := range lines {
			g.answers = append(g.answers, g.response(progLine{op: "respond", args: strings.Fields(l)}))
		}
	}
	queue("text first", "calls subagent:status", "text second", "calls job:stop:other", "text third")
	ask := func(conv storage.ID) string {
		t.Helper()
		step, err := g.next(ai.Request{SessionID: "conversation-" + strconv.Itoa(int(conv))})
		if err != nil {
			t.Fatal(err)
		}
		var calls []string
		for _, b := range step.Message.Content.Blocks {
			switch b.Type {
			case ai.BlockText:
				calls = append(calls, b.Text)
			case ai.BlockToolCall:
				calls = append(calls, b.Name+" "+string(b.Arguments))
			}
		}
		return strings.Join(calls, ",")
	}
	// Conversation 1's task 3 owns conversation 4; conversation 2 has no
	// child and a job, 5.
	var last storage.ID
	for _, b := range []storage.CommitBatch{
		main1(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
			storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 2}}),
		main1(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 3, ConversationID: 1, Kind: "tool", Status: "planned"}}),
		main1(storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 4, Owner: 3}},
			storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 5, ConversationID: 2, Kind: agent.JobKindName, Status: "running"}}),
	} {
		r := storage.Range{First: last + 1, Last: last + storage.ID(len(b.Writes))}
		if err := e.oracle.commit(core.Invocation{}, false, r, b); err != nil {
			t.Fatal(err)
		}
		last = r.Last
	}
	if got := ask(2); got != "first" {
		t.Fatalf("first answer = %q", got)
	}
	if got := ask(2); got != "second" { // the status waits: 2 has no child
		t.Fatalf("to a childless asker = %q; want the next plain answer", got)
	}
	if got := ask(1); got != `subagent {"command":"status","id":4,"text":"go on"}` {
		t.Fatalf("to the child's owner = %q; want its status", got)
	}
	if got := ask(1); got != `job {"command":"stop","id":5}` {
		t.Fatalf("another conversation's job = %q; want 5", got)
	}
	if got := ask(2); got != "third" {
		t.Fatalf("then = %q", got)
	}
	// Held back from answerPassesMax askers, it goes to the next one.
	queue("calls subagent:stop", "text a", "text b", "text c", "text d")
	for _, want := range []string{"a", "b", "c"} {
		if got := ask(2); got != want {
			t.Fatalf("held back: %q; want %q", got, want)
		}
	}
	if got := ask(2); got != `subagent {"command":"stop","id":4,"text":"go on"}` {
		t.Fatalf("after %d passes = %q; want the stop, naming another's child", answerPassesMax, got)
	}
}

// A program's own state writes run on every backend and are held to the
// state rule: values and lists set, appended to and removed from on the
// root (a remove before the fork, one after it), inherited by a fork taken from the newest end of its entries
// (fork c0 -1), then cleared and removed on the fork (c-1, the newest
// conversation); a remove from an empty list and a write against a
// state's first policy are outcomes, not failures. Every trace replays.
func TestStateLinesRunOnEveryBackendAndReplay(t *testing.T) {
	p, err := parseProgram(programMagic + `
swarm tail=2 shell=false
respond text "noted"
respond text "again"
value c0 host.r rewind set 1
list c0 host.rl rewind append 7
list c0 host.rl rewind append {"n":2}
list session host.gl sticky append 3
value c0 host.s sticky set 4
list c0 host.sl sticky remove 0
list c0 host.rl rewind remove 1
list c0 host.rl rewind append 9
accept c0 "state"
drive c0
fork c0 -1
list c0 host.rl rewind remove -1
list c-1 host.rl rewind remove 0
value c-1 host.r rewind set 5
list c-1 host.rl rewind clear
list c-1 host.rl rewind append 8
value c0 host.r sticky set 6
value session host.g/k1 sticky delete
accept c-1 "more"
drive c-1
`)
	if err != nil {
		t.Fatal(err)
	}
	for backend, trace := range runOnEveryBackend(t, p, 2) {
		if !strings.Contains(trace, "policy") {
			t.Errorf("%s: the trace records no refusal naming the policy", backend)
		}
	}
}

// runOnEveryBackend runs program p as the generated scenario with seed on
// memory, JSONL and SQLite, fails t unless each run passes every oracle
// and its trace replays identically, and returns the traces by backend.
func runOnEveryBackend(t *testing.T, p *program, seed uint64) map[string]string {
	t.Helper()
	sc, _ := findScenario("generated")
	traces := map[string]string{}
	for _, backend := range []string{"memory", "jsonl", "sqlite"} {
		path := filepath.Join(t.TempDir(), "t.jsonl")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runScenario(context.Background(), runSpec{sc: sc, seed: seed, backend: backend, strategy: "random", program: p}, f)
		f.Close()
		if err != nil || !res.OK {
			t.Fatalf("%s: run: %v %s", backend, err, res.Error)
		}
		if got, err := replay(context.Background(), path); err != nil || got != "" {
			t.Fatalf("%s: replay = %q, %v", backend, got, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		traces[backend] = string(data)
	}
	return traces
}

// drawnForSeeds draws the programs of seeds 1 to seeds, fails t unless a
// program has lines of op exactly when want says its seed should and
// every program parses back, and returns the lines of op drawn.
func drawnForSeeds(t *testing.T, op string, seeds uint64, want func(seed uint64) bool) []progLine {
	t.Helper()
	var drawn []progLine
	for seed := uint64(1); seed <= seeds; seed++ {
		p := drawProgram(seed)
		n := 0
		for _, l := range p.lines {
			if l.op == op {
				n++
				drawn = append(drawn, l)
			}
		}
		if (n > 0) != want(seed) {
			t.Fatalf("seed %d: %d %s lines; want some %v:\n%s", seed, n, op, want(seed), p)
		}
		if back, err := parseProgram(p.String()); err != nil || back.String() != p.String() {
			t.Fatalf("seed %d: the program does not parse back (%v)", seed, err)
		}
	}
	return drawn
}

// Every settleFaultSeeds-th seed from 2 has a fault on the commit that
// settles a task of one of the agent's kinds and no other fault that
// ends the process; a generated program has a collapse of its own that
// its model summarizes exactly when its fault names a collapse.
func TestSettleFaultsAreDrawnForTheirSeeds(t *testing.T) {
	sc, _ := findScenario("generated")
	kinds := map[string]int{}
	for seed := uint64(1); seed <= 200; seed++ {
		plan := drawPlan(sc, seed, 300, "memory")
		var settles []fault.Fault
		ends := 0
		for _, f := range plan.Faults {
			if f.Settles != "" {
				settles = append(settles, f)
			}
			if f.Kind == fault.Crash || f.Kind == fault.Uncertain {
				ends++
			}
		}
		if want := seed%settleFaultSeeds == 2; (len(settles) == 1) != want || len(settles) > 1 {
			t.Fatalf("seed %d: settle faults %+v; want one %v", seed, settles, want)
		}
		if len(settles) == 0 {
			continue
		}
		f := settles[0]
		kinds[f.Settles]++
		if ends > 1 || !slices.Contains(settleKinds, f.Settles) || f.Commit < 1 || f.Commit > 3 || f.Settles == agent.CollapseKindName && f.Commit != 1 {
			t.Fatalf("seed %d: plan %s", seed, plan)
		}
		p := drawProgram(seed)
		summarized := slices.ContainsFunc(p.lines, func(l progLine) bool {
			return l.op == "respond" && slices.Equal(l.args, []string{"text", "the summary"})
		})
		if f.Settles == agent.CollapseKindName != summarized {
			t.Fatalf("seed %d: the fault settles %s; the program summarizes a collapse of its own %v:\n%s", seed, f.Settles, summarized, p)
		}
	}
	if len(kinds) != len(settleKinds) {
		t.Fatalf("settle faults named %v; want every one of %v", kinds, settleKinds)
	}
}

// The resets of every handoffSeeds-th seed's program from 2 are handoffs,
// and no other program's are.
func TestHandoffsAreDrawnForTheirSeeds(t *testing.T) {
	handoffs := 0
	for seed := uint64(1); seed <= 200; seed++ {
		for _, l := range drawProgram(seed).lines {
			if l.op != "reset" {
				continue
			}
			if (len(l.args) == 2) != (seed%handoffSeeds == 2) {
				t.Fatalf("seed %d: %s", seed, l)
			}
			if len(l.args) == 2 {
				handoffs++
			}
		}
	}
	if handoffs == 0 {
		t.Fatal("no program of 200 resets with a handoff")
	}
}

// Half the limit seeds' sessions without a drawn output limit may write
// exactly what their first turn's answer writes, and that turn comes first.
func TestExactOutputLimitsAreDrawnForTheirSeeds(t *testing.T) {
	exact := 0
	for seed := uint64(1); seed <= 300; seed++ {
		p := drawProgram(seed)
		if p.limits.OutputTokens != 1 {
			continue
		}
		exact++
		if seed%limitSeeds != 0 || p.lines[0].String() != "respond text done" || p.lines[1].op != "accept" {
			t.Fatalf("seed %d: an output limit of 1 for the program\n%s", seed, p)
		}
	}
	if exact < 300/limitSeeds/5 {
		t.Fatalf("%d of %d limit seeds have an exact output limit; want about a quarter", exact, 300/limitSeeds)
	}
}

// Every nestSeeds-th seed's program from 11 begins with a turn whose model
// runs a subagent at every depth, one past the bound, and no other does.
func TestNestedRunsAreDrawnForTheirSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		p := drawProgram(seed)
		runs := 0
		for _, l := range p.lines {
			if l.String() == "respond calls subagent:run" {
				runs++
			}
		}
		if nested := runs >= agent.SubagentDepthMax+1; nested != (seed%nestSeeds == 11) {
			t.Fatalf("seed %d: %d answers run a subagent:\n%s", seed, runs, p)
		}
	}
}

// setsToolBudget reports whether a program line sets pi.tool.budget.
func setsToolBudget(l progLine) bool {
	return l.op == "value" && l.args[1] == agent.ToolBudgetValue.Namespace
}

// Every bashAbortSeeds-th shell program from 6 aborts the root while a
// bash call serves, before a short budget could delegate its job (after
// the one-token turn of an exact output limit, which must come first).
func TestBashAbortsAreDrawnForTheirSeeds(t *testing.T) {
	drawn := 0
	for seed := uint64(1); seed <= 300; seed++ {
		p := drawProgram(seed)
		if !p.shell || seed%bashAbortSeeds != 6 {
			continue
		}
		i := slices.IndexFunc(p.lines, func(l progLine) bool { return l.String() == "respond calls bash:serve" })
		budget := slices.IndexFunc(p.lines, setsToolBudget)
		if i < 0 || i > 3 || i+5 >= len(p.lines) || p.lines[i+5].String() != "abort c0" || budget >= 0 && budget < i {
			t.Fatalf("seed %d: no bash abort first:\n%s", seed, p)
		}
		drawn++
	}
	if drawn == 0 {
		t.Fatal("no seed up to 300 draws a bash abort")
	}
}

// Every shortBudgetSeeds-th shell program from 3 gives the root a tool
// budget of 100 ms and runs a bash call that outlives it (first, unless a
// bash abort comes before); no other program sets the budget.
func TestShortBudgetsAreDrawnForTheirSeeds(t *testing.T) {
	short := 0
	for seed := uint64(1); seed <= 300; seed++ {
		p := drawProgram(seed)
		j := slices.IndexFunc(p.lines, setsToolBudget)
		set := j >= 0
		if want := p.shell && seed%shortBudgetSeeds == 3; set != want || want && (p.lines[j+1].op != "respond" || !strings.HasPrefix(p.lines[j+1].args[1], "bash:")) {
			t.Fatalf("seed %d (shell %v): sets the tool budget %v:\n%s", seed, p.shell, set, p)
		}
		if set {
			short++
		}
	}
	if short == 0 {
		t.Fatal("no program of 300 sets a short tool budget")
	}
}

// A rule refusing the commit the harness built for a host verb is the
// harness's mistake; one refusing the host's own writes, or an abort of a
// task that has ended, is the host's, as is every refusal that is not a
// rule's.
func TestAVerbKeepsTheRules(t *testing.T) {
	rule := func(r core.Rule) error { return fmt.Errorf("agent: abort: %w", &core.CommitError{Rule: r, ID: 9}) }
	for _, c := range []struct {
		op     string
		err    error
		broken bool
	}{
		{"abort", rule("input-result-transition"), true},
		{"cancel-queued", rule("input-result-transition"), true},
		{"boundary", rule(core.RuleStorage), true},
		{"delete", rule(core.RuleStorage), true},
		{"abort-task", rule(core.RuleAbortCreates), true},
		{"abort-task", rule(core.RuleTaskTerminal), false},
		{"tx", rule(core.RuleStorage), false},
		{"entry", rule("head-before-previous-head"), false},
		{"value", rule(core.RuleStorage), false},
		{"settings", rule(core.RuleBadPayload), false},
		{"delete", fmt.Errorf("%w: conversation 3", core.ErrNotFound), false},
	} {
		err := ownRuleKept(c.op, c.err)
		var oe *oracleError
		if broken := errors.As(err, &oe) && oe.Rule == ruleOwnCommits; broken != c.broken || !c.broken && err != nil {
			t.Errorf("%s refused with %v: %v; want broken %v", c.op, c.err, err, c.broken)
		}
	}
}

// The draws that put in reach what random programs rarely line up: an
// answer that breaks off after calls before an inheriting child, an element
// removed twice in one host commit, turns spaced around a wall-clock limit,
// a request id repeated in another conversation, two handoffs that differ
// in one answer, a call of a tool a hook took out of the request, a child
// under hooks of its owner's subtree and its own, two handlers instructing
// one collapse, a root's list remove below a fork that writes the list, a
// job stopped again once killed, a tool added to a selection, a write
// queued under a turn that fails, a restart during a generation's last
// attempt, a session watch whose values change, turns and a collapse on a
// model the host set, an abort while a reopened session recovers a call,
// Codex's /new reported as a startup, a reset while a collapse summarizes,
// a collapse after an answer whose two calls share an id, a shaper in a
// fork nobody watches. Each
// lands in its seeds and some of them within 300, and none touches the
// golden traces' seed 1.
func TestDrawsForRareCombinationsLandInTheirSeeds(t *testing.T) {
	if l := collapseAfterTwoTurns(1, progLine{op: "respond"}); l[collapseLine].op != "collapse" {
		t.Fatalf("collapseLine %d is not the collapse of %v", collapseLine, l)
	}
	has := func(p *program, pred func(i int, l progLine) bool) bool {
		for i, l := range p.lines {
			if pred(i, l) {
				return true
			}
		}
		return false
	}
	brokenOff := func(i int, l progLine) bool {
		return l.op == "respond" && len(l.args) == 2 && (l.args[0] == "fail" || l.args[0] == "aborted")
	}
	rerm := func(i int, l progLine) bool { return l.op == "tx" && strings.Contains(l.String(), " rerm") }
	handoffs := func(i int, l progLine) bool {
		return l.op == "respond" && len(l.args) == 2 && strings.HasPrefix(l.args[1], "new_context:") &&
			(strings.Contains(l.args[1], ",work:handoff") || strings.Count(l.args[1], "new_context:") == 2)
	}
	dropped := func(p *program) func(i int, l progLine) bool {
		return func(i int, l progLine) bool {
			tool, ok := strings.CutPrefix(strings.Join(l.args, " "), "c0 drop:")
			return l.op == "hook" && ok && i+1 < len(p.lines) && p.lines[i+1].String() == "respond calls "+tool
		}
	}
	counts := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		p := drawProgram(seed)
		checks := []struct {
			name   string
			seeds  bool // the seed is one of the draw's
			landed bool
		}{
			{"broken-off answer", seed%inheritSeeds == 3, has(p, brokenOff)},
			{"element removed twice", seed%hostTxSeeds == 2, has(p, rerm)},
			{"two handoffs", p.shell && seed%fileSeeds == 0, has(p, handoffs)},
			{"dropped tool called", seed%hookSeeds == 2, has(p, dropped(p))},
			{"child under its owner's hook and its own", seed%hookSeeds == 2, has(p, func(i int, l progLine) bool {
				return l.String() == "hook c0 section subtree" && i+2 < len(p.lines) && p.lines[i+1].String() == "hook c0/child section" &&
					p.lines[i+2].String() == `accept c0/child "go on"`
			})},
			{"removes below a fork's own", seed%stateSeeds == 0, has(p, func(i int, l progLine) bool {
				return l.String() == "fork c0 -1" && i+1 < len(p.lines) && p.lines[i+1].String() == "list c-1 host.rl rewind append 3" &&
					i >= 4 && strings.HasPrefix(p.lines[i-4].String(), "list c0 host.rl rewind remove ")
			})},
			{"a job stopped twice", p.shell && seed%shortBudgetSeeds == 3, has(p, func(i int, l progLine) bool {
				return l.String() == `accept c0 "stop it again"` && i >= 5 && p.lines[i-5].String() == `accept c0 "stop it"`
			})},
			{"a tool added to a selection", seed%settingsSeeds == 5, has(p, func(i int, l progLine) bool {
				return l.op == "settings" && slices.Equal(l.args, []string{"c0", "generation", "selectedTools", `["work","a"]`}) && i+1 < len(p.lines) &&
					p.lines[i+1].String() == "respond calls work:addTools"
			})},
			{"a write under a turn that fails", seed%failedWriteSeeds == 4, has(p, func(i int, l progLine) bool {
				return l.String() == "accept c0 look" && i >= 3 && p.lines[i-3].String() == "respond rate-limited" &&
					p.lines[i-1].String() == "respond rate-limited" && i+3 < len(p.lines) && p.lines[i+3].op == "write"
			})},
			{"a restart at the last attempt", seed%lastAttemptSeeds == 8, has(p, func(i int, l progLine) bool {
				return l.String() == "respond slow 5000 slowly" && i+4 < len(p.lines) && p.lines[i+4].String() == "reopen"
			})},
			{"a session watch first", seed%stateSeeds == 0, p.lines[0].op == "watch-session"},
			{"turns and a collapse on a model set", seed%settingsSeeds == 5, has(p, func(i int, l progLine) bool {
				return l.op == "settings" && len(l.args) == 4 && l.args[2] == "model" && i+1+collapseLine < len(p.lines) &&
					p.lines[i+3].String() == "accept c0 first" && p.lines[i+1+collapseLine].op == "collapse"
			})},
			{"an abort while a reopened session recovers a call", seed%recoverAbortSeeds == 9 && seed%childAbortSeeds != 3, has(p, func(i int, l progLine) bool {
				return l.op == "respond" && len(l.args) == 2 && l.args[0] == "calls" && slices.Contains([]string{"work:slow", "work:slow,b:3000", "b:3000,work:slow"}, l.args[1]) &&
					i+8 < len(p.lines) && p.lines[i+5].String() == "reopen" && strings.HasPrefix(p.lines[i+8].op, "abort")
			})},
			{"a call never replayed that a reopen interrupts", seed%recoverAbortSeeds == 9 && seed%childAbortSeeds != 3, has(p, func(i int, l progLine) bool {
				return l.op == "respond" && len(l.args) == 2 && l.args[0] == "calls" && strings.Contains(l.args[1], "b:3000") && i+5 < len(p.lines) &&
					p.lines[i+5].String() == "reopen"
			})},
			{"codex's /new after a startup", seed%providerSeeds == 0, has(p, func(i int, l progLine) bool {
				return l.op == "boundary" && slices.Equal(l.args[:1], []string{"startup"}) && len(l.args) == 3 && l.args[2] == "codex:start" &&
					i+1 < len(p.lines) && p.lines[i+1].op == "boundary" && p.lines[i+1].args[2] == "codex:start" && p.lines[i+1].args[1] != l.args[1]
			})},
			{"a reset while a collapse summarizes", seed%staleCollapseSeeds == 2, has(p, func(i int, l progLine) bool {
				return l.String() == "respond slow 1000 \"the summary\"" && i+3 < len(p.lines) && p.lines[i+1].String() == "collapse c0" &&
					p.lines[i+3].op == "reset"
			})},
			{"a collapse after calls under one id", seed%reusedIDSeeds == 0 && seed/reusedIDSeeds%pairedIDSeeds == 2, has(p, func(i int, l progLine) bool {
				return l.String() == "respond calls a,b" && i+1+collapseLine < len(p.lines) && p.lines[i+1].String() == "respond text done" &&
					p.lines[i+1+collapseLine].String() == "collapse c0"
			})},
			{"a shaped fork nobody watches", seed%shapeSeeds == 3, has(p, func(i int, l progLine) bool {
				return l.String() == "fork c0 0" && i+1 < len(p.lines) && strings.HasPrefix(p.lines[i+1].String(), "shape c-1 ")
			})},
			{"a grandchild inheriting a head that begins with an answer", seed%answerHeadSeeds == 7 && seed%limitSeeds != 0, has(p, func(i int, l progLine) bool {
				return i == 0 && l.op == "respond" && len(l.args) == 2 && l.args[0] == "calls" && p.lines[4].String() == "edit c0 0 omit" &&
					p.lines[5].String() == "respond calls subagent:run:inherit" && p.lines[6].String() == "respond calls subagent:run:inherit"
			})},
			{"a decline before a handler that does not", seed%hookSeeds == 2, has(p, func(i int, l progLine) bool {
				return strings.HasSuffix(l.String(), " decline") && i+2 < len(p.lines) && strings.HasPrefix(p.lines[i+1].String(), "hook c0 ") &&
					!strings.HasSuffix(p.lines[i+1].String(), " decline") && p.lines[i+2].String() == "collapse c0"
			})},
			{"a call an args hook leaves alone", seed%hookSeeds == 2, has(p, func(i int, l progLine) bool {
				return l.op == "hook" && len(l.args) == 2 && strings.HasPrefix(l.args[1], "args:") && i+5 < len(p.lines) &&
					(p.lines[i+1].String() == "respond calls a,b" || p.lines[i+1].String() == "respond calls b,a") && p.lines[i+5].String() == "unhook -1"
			})},
			{"a section whose text changes in place", seed%settingsSeeds == 5, has(p, func(i int, l progLine) bool {
				return l.String() == "hook c0 section" && i+9 < len(p.lines) && p.lines[i+5].op == "settings" &&
					p.lines[i+8].String() == "settings c0 generation selectedTools null" && p.lines[i+9].String() == "unhook -1"
			})},
			{"an edit of a text written twice", p.shell && seed%fileSeeds == 0, has(p, func(i int, l progLine) bool {
				return l.String() == `accept c0 "write and edit"` && i >= 3 && strings.HasPrefix(p.lines[i-3].String(), "respond calls write:") &&
					strings.HasPrefix(p.lines[i-2].String(), "respond calls edit:")
			})},
			{"steering while a slow call runs", seed%cancelSeeds == 7 && seed%limitSeeds != 0, has(p, func(i int, l progLine) bool {
				return l.String() == `steer c0 "and this"` && i >= 5 && strings.HasSuffix(p.lines[i-5].String(), "work:slow") &&
					p.lines[i-2].String() == "drive-async c0" && i+1 < len(p.lines) && p.lines[i+1].String() == "drive c0"
			})},
			{"two instructions", seed%hookSeeds == 2, has(p, func(i int, l progLine) bool {
				return l.String() == "hook c0 instruct" && i+2 < len(p.lines) && strings.HasSuffix(p.lines[i+1].String(), " instruct") &&
					strings.HasPrefix(p.lines[i+2].String(), "collapse c0")
			})},
		}
		for _, c := range checks {
			if c.landed && !c.seeds {
				t.Fatalf("seed %d: a %s outside the draw's seeds:\n%s", seed, c.name, p)
			}
			if c.landed {
				counts[c.name]++
			}
		}
		cross := has(p, func(i int, l progLine) bool {
			return l.String() == "spawn c0 look" && i+2 < len(p.lines) && strings.HasSuffix(p.lines[i+1].String(), "req=rx") &&
				strings.HasSuffix(p.lines[i+2].String(), "req=rx") && p.lines[i+1].args[0] != p.lines[i+2].args[0]
		})
		if cross != (seed%crossRequestSeeds == 5) {
			t.Fatalf("seed %d: repeats a request id in another conversation: %v:\n%s", seed, cross, p)
		}
		if cross {
			counts["request repeated elsewhere"]++
		}
		if w := p.limits.WallClock; seed%limitSeeds == 0 && w > 0 {
			for _, gap := range []time.Duration{w / 2, w * 2 / 3} {
				sleep := fmt.Sprintf("sleep %d", gap.Milliseconds())
				if i := slices.IndexFunc(p.lines, func(l progLine) bool { return l.String() == sleep }); i >= 2 && p.lines[i-1].String() == "drive-async c0" {
					counts["turns around the wall clock"]++
				}
			}
		}
	}
	for _, name := range []string{"broken-off answer", "element removed twice", "two handoffs", "dropped tool called",
		"child under its owner's hook and its own", "two instructions", "request repeated elsewhere", "turns around the wall clock",
		"removes below a fork's own", "a job stopped twice", "a tool added to a selection",
		"a write under a turn that fails", "a restart at the last attempt", "a session watch first", "turns and a collapse on a model set",
		"an abort while a reopened session recovers a call", "codex's /new after a startup", "a reset while a collapse summarizes",
		"a collapse after calls under one id", "a shaped fork nobody watches", "a grandchild inheriting a head that begins with an answer",
		"a decline before a handler that does not", "a call an args hook leaves alone",
		"a call never replayed that a reopen interrupts", "a section whose text changes in place",
		"an edit of a text written twice", "steering while a slow call runs"} {
		if counts[name] == 0 {
			t.Errorf("no program up to seed 300 draws this: %s", name)
		}
	}
	if p := drawProgram(1); has(p, brokenOff) || has(p, rerm) || has(p, handoffs) || slices.ContainsFunc(p.lines, func(l progLine) bool { return strings.Contains(l.String(), "req=rx") }) {
		t.Fatalf("seed 1 draws one of them:\n%s", p)
	}
}
