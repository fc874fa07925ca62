package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/conformance/kit"
	"github.com/pico-go/pico/conformance/script"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// Programs are host-action programs as data (DESIGN §6): what a host does
// to a session, and what its model answers, one line each, in a printed
// form that parses back. The generated scenario draws one from its seed
// (or runs the one --program names), so fuzzing explores sequences no
// hand-written scenario has, and shrinking drops lines.
//
//	picosim program 1
//	swarm tail=2 shell=false
//	respond calls a,work:throw
//	respond text "done"
//	accept c0 "hello" req=r1
//	steer c0 "focus"
//	spawn c0 "look into it"
//	abort c0
//	drive c0
//
// respond lines queue the model's answers in order (text, calls NAMES,
// rate-limited, deferred, overflow, fail [NAMES], aborted [NAMES], slow MS
// TEXT; the NAMES of fail and aborted are calls streamed before the answer
// broke off, which never run); every
// line is one host action; spawn CONV TEXT [MODE] takes any word for the
// context mode, one other than fresh or inherit being the harness's to
// refuse. A call is a tool's name with what it does:
// work:throw, bash:serve, spill-head:RECIPE[:fail] (spill.go), subagent:spawn; subagent:send|status|wait|stop
// and job:status|output|wait|stop name the asking conversation's newest
// child or job, and with ":other" appended another conversation's, which
// the tool must refuse (the answer naming the asker's own waits a few
// requests for an asker that has one).
//
// A conversation is cN, the Nth the program knows (c0 the root, then forks
// and children in the order they were made; c-1 the newest), and a number
// that picks among things (an entry, a queued input, a live task, a watch,
// a list's element) is taken modulo how many, a negative one from the end.
// value and list lines write the host's own state: value TARGET NS[/KEY]
// rewind|sticky set JSON|delete, list TARGET NS[/KEY] rewind|sticky
// append JSON|remove N|clear, TARGET session or a conversation. The
// swarm line's turns=, queries=, calls=, tokens= and wall= (ms) are the
// session's budget limits, and so is spend=, in script.PriceUnit dollars,
// the unit of price=, the faux provider's price of a cached token
// (fauxPrice). boundary SOURCE ID [PROVIDER[:EVENT]] delivers a provider's
// lifecycle event (Claude's session start unless it names another).
// hook TARGET EFFECT [subtree] (EFFECT one of script.HookEffects)
// registers a hook (hooks.go; TARGET session, a conversation, or cN/child,
// the newest child a call of cN made) and unhook N removes one; the input
// lines (accept, followup, steer, next-run, write) may name cN/child too.
// reset CONV [TEXT] resets the context, TEXT a handoff that begins it.
// settings CONV KIND NAME JSON writes one value of a kind's configuration
// through its typed view and reads the view back (settingsrule.go).
//
// --drop numbers the lines the way the run reaches them: the respond lines
// first (all answers are queued before anything else happens), then the
// other lines, each in program order.

// programMagic is a program's first line.
const programMagic = script.Magic

// program is a parsed program: its swarm options and its lines. The
// syntax is package script's, shared with the conformance kit's data
// scenarios; this is picosim's working copy of it.
type program struct {
	tail  int  // the watches' entry tail
	shell bool // the shell tools over fake processes
	queue int  // the watches' queue bound (0: the harness's default)
	retry int  // the first retry delay in ms (0: the default)
	chunk int  // tokens per streamed chunk (0: the faux provider's 3 to 5)
	// limits are the session's budget limits on turns, queries and tool
	// calls (zero: none).
	limits agent.BudgetLimits
	// price is the faux provider's, in script.PriceUnit a cached token
	// (fauxPrice; 0: answers cost nothing).
	price int
	lines []progLine
}

// swarmOptions are the harness options a program's swarm sets.
type swarmOptions struct {
	queue  int
	retry  agent.RetryPolicy
	limits agent.BudgetLimits
}

func (p *program) swarmOptions() swarmOptions {
	return swarmOptions{queue: p.queue, retry: agent.RetryPolicy{Delay: time.Duration(p.retry) * time.Millisecond}, limits: p.limits}
}

// lagged reports whether a watch event is the lag fault, after which a
// client resnapshots.
func lagged(ev core.ConversationEvent) bool {
	return ev.Type == core.EventFault && ev.Error == core.ErrWatchLagging.Error()
}

// progLine is one line: an op and its arguments.
type progLine struct {
	op   string
	args []string
}

// ProgramError is a program that does not parse, naming its line.
type ProgramError = script.ProgramError

// shared is the program in package script's form.
func (p *program) shared() *script.Program {
	q := &script.Program{Tail: p.tail, Shell: p.shell, Queue: p.queue, Retry: p.retry, Chunk: p.chunk,
		Turns: p.limits.Turns, Queries: p.limits.Queries, Calls: p.limits.ToolCalls, Tokens: int(p.limits.OutputTokens), WallMs: int(p.limits.WallClock.Milliseconds()),
		Price: p.price, Spend: int(p.limits.Spend / script.PriceUnit)}
	for _, l := range p.lines {
		q.Lines = append(q.Lines, l.shared())
	}
	return q
}

func (l progLine) shared() script.Line { return script.Line{Op: l.op, Args: l.args} }

// String prints the program; parseProgram reads it back.
func (p *program) String() string { return p.shared().String() }

func (l progLine) String() string { return l.shared().String() }

// hostOrder is the program's lines in the order they are host actions:
// the respond lines first (all answers are queued before anything else
// happens), then the others, each in program order.
func (p *program) hostOrder() []int {
	var responds, others []int
	for i, l := range p.lines {
		if l.op == "respond" {
			responds = append(responds, i)
		} else {
			others = append(others, i)
		}
	}
	return append(responds, others...)
}

// without is the program with the host actions numbered in drop left out:
// what a run of the program with --drop does, as a program of its own.
func (p *program) without(drop []int) *program {
	gone := map[int]bool{}
	for action, line := range p.hostOrder() {
		if slices.Contains(drop, action) {
			gone[line] = true
		}
	}
	q := *p
	q.lines = nil
	for i, l := range p.lines {
		if !gone[i] {
			q.lines = append(q.lines, l)
		}
	}
	return &q
}

// parseProgram reads a printed program, refusing anything it does not
// know with a ProgramError naming the line.
func parseProgram(text string) (*program, error) {
	sp, err := script.Parse(text)
	if err != nil {
		return nil, err
	}
	p := &program{tail: sp.Tail, shell: sp.Shell, queue: sp.Queue, retry: sp.Retry, chunk: sp.Chunk, price: sp.Price,
		limits: agent.BudgetLimits{Turns: sp.Turns, Queries: sp.Queries, ToolCalls: sp.Calls, OutputTokens: int64(sp.Tokens), WallClock: time.Duration(sp.WallMs) * time.Millisecond,
			Spend: float64(sp.Spend) * script.PriceUnit}}
	for _, l := range sp.Lines {
		p.lines = append(p.lines, progLine{op: l.Op, args: l.Args})
	}
	return p, nil
}

// --- the generator ---

// programWeights are how often the generator draws each host action.
var programWeights = []struct {
	op     string
	weight int
}{
	{"accept", 8}, {"followup", 3}, {"steer", 3}, {"next-run", 2}, {"write", 2}, {"cancel-queued", 2},
	{"abort", 2}, {"abort-task", 2}, {"fork", 2}, {"watch", 1}, {"watch-session", 1}, {"unwatch", 1}, {"resnapshot", 1},
	{"drive", 4}, {"drive-async", 3}, {"sleep", 4}, {"reopen", 1}, {"shutdown", 1}, {"collapse", 1}, {"reset", 1}, {"job", 1},
	{"spawn", 1}, {"boundary", 2},
}

// generatedActionsMax bounds a drawn program's host actions.
const generatedActionsMax = 10

// drawProgram draws a program from seed: its swarm (which actions are
// enabled, the watch tail, the shell), then weighted host actions and the
// model's answers.
func drawProgram(seed uint64) *program {
	rng := seededRNG(seed, "generated")
	p := &program{tail: 1 + rng.IntN(4), shell: rng.IntN(3) == 0}
	if p.tail == 4 {
		p.tail = 0 // watches that keep no entries, only the rest of the view
	}
	if rng.IntN(3) == 0 {
		p.queue = 1 + rng.IntN(4) // small enough that a listener lags
	}
	if rng.IntN(2) == 0 {
		p.retry = []int{1, 50, 500}[rng.IntN(3)]
	}
	if rng.IntN(4) != 0 {
		p.chunk = []int{16, 256}[rng.IntN(2)] // whole answers in a chunk or a few
	}
	var enabled []int // indexes into programWeights
	for i, w := range programWeights {
		if w.op == "accept" || rng.IntN(10) < 7 {
			enabled = append(enabled, i)
		}
	}
	total := 0
	for _, i := range enabled {
		total += programWeights[i].weight
	}
	convs, watches, reqs := 1, 0, 0
	conv := func() string { return fmt.Sprintf("c%d", rng.IntN(convs)) }
	words := []string{"look", "fix it", "why", "go on", "stop that", "summarize", "tool:a,b", "again"}
	for range 2 + rng.IntN(generatedActionsMax) {
		r := drawResponse(rng, p.shell)
		p.lines = append(p.lines, r)
		if r.args[0] == "rate-limited" && rng.IntN(2) == 0 {
			// A run of them as long as a generation's retry budget
			// (agent.RetryPolicy's three attempts), so that one runs out.
			p.lines = append(p.lines, r, r)
		}
		if r.args[0] == "calls" && rng.IntN(2) == 0 {
			// A subagent or a job started, then looked after: the
			// command's answer waits for an asker that has one.
			switch {
			case strings.Contains(r.args[1], "subagent:run") || strings.Contains(r.args[1], "subagent:spawn"):
				// Up to four commands, a send followed as often as not by
				// a wait for what it sent, so that the child's latest
				// input moves and its entries outgrow a status.
				cmds := []string{"send", "status", "wait", "stop", "send:other", "stop:other"}
				cmd := cmds[rng.IntN(len(cmds))]
				for n := rng.IntN(4); ; n-- {
					p.lines = append(p.lines, progLine{op: "respond", args: []string{"calls", "subagent:" + cmd}})
					if n == 0 {
						break
					}
					if cmd == "send" && rng.IntN(2) == 0 {
						cmd = "wait"
					} else {
						cmd = cmds[rng.IntN(len(cmds))]
					}
				}
			case strings.Contains(r.args[1], "bash:"):
				cmds := []string{"status", "output", "wait", "stop", "stop:other", "output:other"}
				p.lines = append(p.lines, progLine{op: "respond", args: []string{"calls", "job:" + cmds[rng.IntN(len(cmds))]}})
			}
		}
		pick := rng.IntN(total)
		var op string
		for _, i := range enabled {
			if pick -= programWeights[i].weight; pick < 0 {
				op = programWeights[i].op
				break
			}
		}
		l := progLine{op: op}
		switch op {
		case "accept":
			l.args = []string{conv(), words[rng.IntN(len(words))]}
			switch rng.IntN(4) {
			case 0:
				reqs++
				l.args = append(l.args, fmt.Sprintf("req=r%d", reqs))
			case 1:
				if reqs > 0 {
					l.args = append(l.args, fmt.Sprintf("req=r%d", 1+rng.IntN(reqs))) // a duplicate
				}
			}
		case "followup", "steer", "next-run", "write":
			l.args = []string{conv(), words[rng.IntN(len(words))]}
		case "spawn":
			l.args = []string{conv(), words[rng.IntN(len(words))]}
			convs++
		case "boundary":
			// Few provider sessions, so that repeats and clears back happen.
			l.args = []string{[]string{"startup", "resume", "clear", "clear", "compact", "fork"}[rng.IntN(6)], fmt.Sprintf("thread-%d", 1+rng.IntN(3))}
		case "cancel-queued":
			l.args = []string{conv(), strconv.Itoa(rng.IntN(4))}
		case "abort", "drive", "drive-async", "collapse", "reset", "watch":
			l.args = []string{conv()}
			if op == "watch" {
				watches++
			}
		case "abort-task":
			l.args = []string{strconv.Itoa(rng.IntN(6))}
		case "fork":
			l.args = []string{conv(), strconv.Itoa(rng.IntN(8))}
			if rng.IntN(3) == 0 {
				l.args = append(l.args, "abort")
			}
			convs++
		case "unwatch", "resnapshot":
			l.args = []string{strconv.Itoa(rng.IntN(max(watches, 1)))}
		case "sleep":
			l.args = []string{strconv.Itoa([]int{0, 1, 50, 300, 2000}[rng.IntN(5)])}
		case "job":
			if !p.shell {
				continue
			}
			// Processes that exit, run long, hang ignoring the kill's TERM
			// for a while, and crash.
			l.args = []string{[]string{"go test ./...", "backup", "serve", "flaky"}[rng.IntN(4)]}
		}
		p.lines = append(p.lines, l)
		if op == "reopen" && rng.IntN(2) == 0 {
			// The reopened session recovers what the old one left running,
			// and an abort lands while it does.
			abort := progLine{op: "abort", args: []string{conv()}}
			if rng.IntN(2) == 0 {
				abort = progLine{op: "abort-task", args: []string{strconv.Itoa(rng.IntN(6))}}
			}
			p.lines = append(p.lines, progLine{op: "drive-async", args: []string{"c0"}}, progLine{op: "sleep", args: []string{"50"}}, abort)
		}
	}
	p.lines = append(p.lines, progLine{op: "drive", args: []string{"c0"}})
	drawTranscriptActions(p, seed)
	drawStateActions(p, seed)
	drawLimits(p, seed)
	drawPrices(p, seed)
	drawProviders(p, seed)
	drawSpills(p, seed)
	drawTypedCalls(p, seed)
	drawInherits(p, seed)
	drawReusedInherits(p, seed)
	drawBadSpawns(p, seed)
	drawSchedules(p, seed)
	drawFileCalls(p, seed)
	drawPrompts(p, seed)
	drawCollapseSettings(p, seed)
	drawDeletes(p, seed)
	drawChildAborts(p, seed)
	drawSubagentTalks(p, seed)
	drawBoundaryInputs(p, seed)
	drawCancels(p, seed)
	drawMidStreamReads(p, seed)
	drawHooks(p, seed)
	drawFailingHooks(p, seed)
	drawSummarizerFailures(p, seed)
	drawSettledCollapse(p, seed)
	drawHandoffs(p, seed)
	drawThresholds(p, seed)
	drawHostTxs(p, seed)
	drawShapes(p, seed)
	drawFailingCommands(p, seed)
	drawSettings(p, seed)
	drawBudgetTurns(p, seed)
	drawCrossRequests(p, seed)
	drawFailedTurnWrites(p, seed)
	drawLastAttemptRestarts(p, seed)
	drawRecoverAborts(p, seed)
	drawSpillAborts(p, seed)
	drawStaleCollapses(p, seed)
	drawPairedCollapses(p, seed)
	drawNestedRuns(p, seed)
	drawAnswerHeads(p, seed) // first but for the turns of shell programs' own draws
	drawSteerJoins(p, seed)
	drawShortBudgets(p, seed)
	drawBashAborts(p, seed)  // before the short budget: the abort lands while the call waits
	drawExactOutput(p, seed) // last: its turn must be the program's first
	return p
}

// shortBudgetSeeds is how often a drawn shell program gives the root a
// tool call budget of a tenth of a second: every seventh seed from 3.
const shortBudgetSeeds = 7

// drawShortBudgets has such a program begin by setting the root's
// pi.tool.budget to 100 ms and running a turn whose model calls bash with
// a command that outlives it: the call settles delegated, and the job's
// end, an exit or a crash, reaches the model as a notice
// (a-job-ends-as-its-method), which the default budget of three minutes
// never lets the fake commands do. A turn after it starts a job that runs
// until killed, and two more stop it, the second once it has been killed.
// The program's other bash calls outlive the budget too.
func drawShortBudgets(p *program, seed uint64) {
	if !p.shell || seed%shortBudgetSeeds != 3 {
		return
	}
	cmd := []string{"go test ./...", "backup", "flaky"}[seededRNG(seed, "short budgets").IntN(3)]
	block := []progLine{
		{op: "value", args: []string{"c0", agent.ToolBudgetValue.Namespace, "sticky", "set", "100"}},
		{op: "respond", args: []string{"calls", "bash:" + cmd}}, {op: "respond", args: []string{"text", "it runs"}},
		{op: "accept", args: []string{"c0", "run it"}}, {op: "drive", args: []string{"c0"}},
	}
	// Then a job that runs until killed starts, and two turns stop it, the
	// second once it has been killed: that stop must say it had ended.
	block = append(block, progLine{op: "respond", args: []string{"calls", "bash:go test ./..."}}, progLine{op: "respond", args: []string{"text", "it runs"}},
		progLine{op: "accept", args: []string{"c0", "test it"}}, progLine{op: "drive", args: []string{"c0"}})
	for _, say := range []string{"stop it", "stop it again"} {
		block = append(block, progLine{op: "respond", args: []string{"calls", "job:stop"}}, progLine{op: "respond", args: []string{"text", "ok"}},
			progLine{op: "accept", args: []string{"c0", say}}, progLine{op: "drive", args: []string{"c0"}}, progLine{op: "sleep", args: []string{"2000"}})
	}
	p.lines = append(block, p.lines...)
}

// bashAbortSeeds is how often a drawn shell program aborts the root while
// a bash call waits for its job: every eleventh seed from 6.
const bashAbortSeeds = 11

// drawBashAborts has such a program begin with a turn whose model calls
// bash with a command that serves until killed, and the host aborting the
// root a tenth of a second to two seconds in, while the call waits within
// its budget: the call's abort must take its job with it (the rule
// abort-cleanup), which random programs line up only when an abort happens
// to land in that window.
func drawBashAborts(p *program, seed uint64) {
	if !p.shell || seed%bashAbortSeeds != 6 {
		return
	}
	rng := seededRNG(seed, "bash aborts")
	p.lines = append([]progLine{
		{op: "respond", args: []string{"calls", "bash:serve"}}, {op: "respond", args: []string{"text", "serving"}},
		{op: "accept", args: []string{"c0", "start the server"}}, {op: "drive-async", args: []string{"c0"}},
		{op: "sleep", args: []string{strconv.Itoa(100 + rng.IntN(1900))}}, {op: "abort", args: []string{"c0"}},
	}, p.lines...)
}

// nestSeeds is how often a drawn program nests subagent runs to the depth
// bound: every thirteenth seed from 11.
const nestSeeds = 13

// drawNestedRuns has such a program begin with a turn of the root whose
// model answers each conversation that asks, the root and every child, with
// a subagent run, one past agent.SubagentDepthMax, then each with "done":
// the deepest child's run is refused for depth and every level answers
// (subagent-answers-for-its-child), which random programs never nest
// deep enough to meet.
func drawNestedRuns(p *program, seed uint64) {
	if seed%nestSeeds != 11 {
		return
	}
	var block []progLine
	for range agent.SubagentDepthMax + 1 {
		block = append(block, progLine{op: "respond", args: []string{"calls", "subagent:run"}})
	}
	for range agent.SubagentDepthMax + 1 {
		block = append(block, progLine{op: "respond", args: []string{"text", "done"}})
	}
	block = append(block, progLine{op: "accept", args: []string{"c0", "nest"}}, progLine{op: "drive", args: []string{"c0"}})
	p.lines = append(block, p.lines...)
}

// drawExactOutput gives half the limit seeds' sessions without an output
// limit, from a generator of its own, one of exactly what their first
// answer writes: the program begins with a turn answered "done", one
// token, and the session may write one. The next query then meets the
// limit exactly, where an off-by-one lets it through (budget-holds),
// which the drawn limits of two to nine tokens seldom line up.
func drawExactOutput(p *program, seed uint64) {
	if seed%limitSeeds != 0 || p.limits.OutputTokens != 0 || seededRNG(seed, "exact output").IntN(2) != 0 {
		return
	}
	p.limits.OutputTokens = 1
	block := []progLine{{op: "respond", args: []string{"text", "done"}}, {op: "accept", args: []string{"c0", "first"}}, {op: "drive", args: []string{"c0"}}}
	p.lines = append(block, p.lines...)
}

// handoffSeeds is how often a drawn program's resets are handoffs: every
// fourth seed from 2, not the golden traces' seed 1.
const handoffSeeds = 4

// drawHandoffs makes every reset of such a program a handoff (reset CONV
// TEXT): a head that starts the context with a message of the host's.
func drawHandoffs(p *program, seed uint64) {
	if seed%handoffSeeds != 2 {
		return
	}
	for i, l := range p.lines {
		if l.op == "reset" && len(l.args) == 1 {
			p.lines[i].args = append(slices.Clone(l.args), "carry on from the plan")
		}
	}
}

// childAbortSeeds is how often a drawn program aborts the root while a
// subagent of its works (every eighth seed from 3, not the golden traces'
// seed 1).
const childAbortSeeds = 8

// drawChildAborts has the program of every childAbortSeeds-th seed begin,
// from a generator of its own, with a turn of the root whose first answer
// runs (or spawns) subagents whose own answers are slow, and an abort of
// the root, a fork of it that aborts, or an abort of one of the live
// tasks, while they work: the foreground set then reaches through the
// calls into the children's conversations, and a call's abort into its
// own (abortrule.go), which random programs almost never line up.
func drawChildAborts(p *program, seed uint64) {
	if seed%childAbortSeeds != 3 {
		return
	}
	rng := seededRNG(seed, "child aborts")
	calls := []string{"subagent:run"}
	for range rng.IntN(2) {
		calls = append(calls, []string{"subagent:run", "subagent:spawn", "work:slow"}[rng.IntN(3)])
	}
	block := []progLine{{op: "respond", args: []string{"calls", strings.Join(calls, ",")}}}
	for range calls {
		block = append(block, progLine{op: "respond", args: []string{"slow", strconv.Itoa(500 * (1 + rng.IntN(4))), "slowly"}})
	}
	abort := []progLine{
		{op: "abort", args: []string{"c0"}},
		{op: "fork", args: []string{"c0", "0", "abort"}},
		{op: "abort-task", args: []string{strconv.Itoa(rng.IntN(3))}}, // the call, its child's turn, or the post_tools
	}[rng.IntN(3)]
	block = append(block, progLine{op: "accept", args: []string{"c0", "look"}}, progLine{op: "drive-async", args: []string{"c0"}},
		progLine{op: "sleep", args: []string{[]string{"1", "50", "300"}[rng.IntN(3)]}})
	// Half the time the newest child has steer or followUp input queued
	// behind its slow turn, which a conversation abort of the root
	// cancels there too (§6.3).
	queued := rng.IntN(2) == 0
	if queued {
		for _, op := range [][]string{{"steer"}, {"followup"}, {"steer", "followup"}}[rng.IntN(3)] {
			block = append(block, progLine{op: op, args: []string{"c0/child", "and this"}})
		}
	}
	// From a generator of their own: two in three with queued input abort
	// the root, which must cancel it; a third of the others abort the first
	// live task, the call, itself, which must reach the child it runs.
	switch more := seededRNG(seed, "call aborts"); {
	case queued && abort.op != "abort" && more.IntN(3) != 0:
		abort = progLine{op: "abort", args: []string{"c0"}}
	case !queued && abort.op != "abort" && more.IntN(3) == 0:
		abort = progLine{op: "abort-task", args: []string{"0"}}
	}
	p.lines = append(append(block, abort), p.lines...)
}

// subagentTalkSeeds is how often a drawn program talks to a subagent at
// length (every ninth seed from 6, not the golden traces' seed 1).
const subagentTalkSeeds = 9

// drawSubagentTalks has the program of every subagentTalkSeeds-th seed
// begin, from a generator of its own, with a turn of the root that spawns
// a subagent and then sends it input, waits for it and asks its status,
// three to six commands in all, a wait after most sends: the child's
// latest input moves under the waits, and its entries outgrow what a
// status lists (subagentrule.go), which the occasional command of random
// programs seldom lines up.
func drawSubagentTalks(p *program, seed uint64) {
	if seed%subagentTalkSeeds != 6 {
		return
	}
	rng := seededRNG(seed, "subagent talks")
	respond := func(call string) progLine {
		return progLine{op: "respond", args: []string{"calls", "subagent:" + call}}
	}
	block := []progLine{respond("spawn")}
	cmds := []string{"send", "send", "send", "wait", "status", "status"}
	cmd := cmds[rng.IntN(len(cmds))]
	for range 3 + rng.IntN(4) {
		block = append(block, respond(cmd))
		if cmd == "send" && rng.IntN(3) > 0 {
			cmd = "wait"
		} else {
			cmd = cmds[rng.IntN(len(cmds))]
		}
	}
	if rng.IntN(2) == 0 {
		// The child's answers are slow: a wait waits, a status finds it working.
		block = append(block, progLine{op: "respond", args: []string{"slow", strconv.Itoa(100 * (1 + rng.IntN(5))), "slowly"}})
	}
	block = append(block, progLine{op: "accept", args: []string{"c0", "talk to a helper"}}, progLine{op: "drive", args: []string{"c0"}})
	p.lines = append(block, p.lines...)
}

// boundaryInputSeeds is how often a drawn program gives input while a
// turn's tools run (every fifth seed from 4, not the golden traces' seed 1).
const boundaryInputSeeds = 5

// drawBoundaryInputs has the program of every boundaryInputSeeds-th seed
// begin, from a generator of its own, with a turn of the root whose first
// answer calls a slow tool (work:slow, three virtual seconds) and one that
// asks post_tools for something (a handoff, more tools, a stop, or
// nothing), and one to three inputs of any mode given while the calls run
// or as they end: post_tools places them at its boundary in the commit
// that writes the handoff head and the next generation (§8.1), which
// random programs seldom line up.
func drawBoundaryInputs(p *program, seed uint64) {
	if seed%boundaryInputSeeds != 4 {
		return
	}
	rng := seededRNG(seed, "boundary inputs")
	calls := []string{"work:slow", []string{"work:handoff", "work:handoff", "work:addTools", "work:terminate", "work:ok"}[rng.IntN(5)]}
	if rng.IntN(2) == 0 {
		calls[0], calls[1] = calls[1], calls[0]
	}
	block := []progLine{{op: "respond", args: []string{"calls", strings.Join(calls, ",")}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}}}
	words := []string{"fix it", "why", "go on"}
	for range 1 + rng.IntN(3) {
		block = append(block,
			progLine{op: "sleep", args: []string{[]string{"1", "50", "1000", "2999", "3000"}[rng.IntN(5)]}},
			progLine{op: []string{"write", "write", "steer", "followup", "next-run"}[rng.IntN(5)], args: []string{"c0", words[rng.IntN(len(words))]}})
	}
	p.lines = append(block, p.lines...)
}

// cancelSeeds is how often a drawn program cancels input it has just
// queued (every ninth seed from 7, not the golden traces' seed 1).
const cancelSeeds = 9

// drawCancels has the program of every cancelSeeds-th seed begin, from a
// generator of its own, with a slow turn of the root and one to three
// inputs of any mode queued while it streams, each followed by a
// CancelQueued of the newest input (or, once in three, of the one before):
// random programs cancel an input that is still queued only now and then,
// and the rule cancel-withdraws-queued-input holds what each call says it
// did.
func drawCancels(p *program, seed uint64) {
	if seed%cancelSeeds != 7 {
		return
	}
	rng := seededRNG(seed, "cancels")
	block := []progLine{{op: "respond", args: []string{"slow", strconv.Itoa(500 * (1 + rng.IntN(5))), "slowly"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}}}
	words := []string{"fix it", "why", "go on"}
	for range 1 + rng.IntN(3) {
		block = append(block,
			progLine{op: "sleep", args: []string{[]string{"1", "50", "300"}[rng.IntN(3)]}},
			progLine{op: []string{"write", "steer", "followup", "next-run"}[rng.IntN(4)], args: []string{"c0", words[rng.IntN(len(words))]}},
			progLine{op: "cancel-queued", args: []string{"c0", []string{"-1", "-1", "-2"}[rng.IntN(3)]}})
	}
	p.lines = append(block, p.lines...)
}

// drawSteerJoins has half the cancel seeds' programs but the limit seeds',
// from a generator of their own, begin with steering while the root's
// slow call runs: it joins at post_tools, whose one generation takes it
// (§6.2), not two. Drawn after the other blocks that begin a program, so
// that no turn before it takes its answers or spends a budget.
func drawSteerJoins(p *program, seed uint64) {
	if seed%cancelSeeds != 7 || seed%limitSeeds == 0 {
		return
	}
	if join := seededRNG(seed, "steer joins"); join.IntN(2) == 0 {
		p.lines = append([]progLine{{op: "respond", args: []string{"calls", []string{"work:slow", "a,work:slow"}[join.IntN(2)]}},
			{op: "respond", args: []string{"text", "done"}},
			{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}},
			{op: "sleep", args: []string{strconv.Itoa(100 * (1 + join.IntN(20)))}},
			{op: "steer", args: []string{"c0", "and this"}}, {op: "drive", args: []string{"c0"}}}, p.lines...)
	}
}

// midStreamSeeds is how often a drawn program reads its watch while the
// model streams (every fifth seed from 2, not the golden traces' seed 1).
const midStreamSeeds = 5

// drawMidStreamReads has the program of every midStreamSeeds-th seed
// begin, from a generator of its own, with a watched turn of the root whose
// first answer is long and comes after a delay, and the host waking as it
// starts to stream and then re-snapshotting its watch several times at the
// same virtual instant: each check after an action captures the
// conversation afresh and reads Harness.Preview of the streaming task
// (oracles.go, previewsAgree) while the generation holds frames it has
// applied to its preview and not yet committed, a window that random
// programs reach only when a sleep happens to end as a stream begins.
func drawMidStreamReads(p *program, seed uint64) {
	if seed%midStreamSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "mid-stream reads")
	delay := strconv.Itoa(100 * (1 + rng.IntN(5)))
	block := []progLine{{op: "respond", args: []string{"slow", delay, midStreamAnswer}}, {op: "watch", args: []string{"c0"}},
		{op: "accept", args: []string{"c0", "look"}}, {op: "drive-async", args: []string{"c0"}}, {op: "sleep", args: []string{delay}}}
	for range 3 + rng.IntN(4) {
		block = append(block, progLine{op: "resnapshot", args: []string{"-1"}})
	}
	p.lines = append(block, p.lines...)
}

// midStreamAnswer is long enough to stream in many chunks whatever their
// drawn sizes.
const midStreamAnswer = "here is a long answer that streams in many chunks, one after another, so that a reader finds it half way more than once, and then again"

// deleteSeeds is how often a drawn program deletes conversations (every
// seventh seed from 5, not the golden traces' seed 1).
const deleteSeeds = 7

// drawDeletes has the program of every deleteSeeds-th seed delete, from a
// generator of its own, the newest conversation right after one to three
// of its forks, spawns and provider boundaries (or later, or at the end):
// idle, busy or owning children, so that both deletes and their refusals
// happen, and the conversation rule (convrule.go) holds what the session
// lists after each. A delete after a boundary, which may have made the
// newest conversation current, is followed by that boundary's event for a
// provider session no line binds (thread-4), which the transition rule
// holds to starting from the current conversation, or to being refused
// when the host deleted it.
func drawDeletes(p *program, seed uint64) {
	if seed%deleteSeeds != 5 {
		return
	}
	rng := seededRNG(seed, "deletes")
	var after []int // the lines after which a conversation is newer
	for i, l := range p.lines {
		if l.op == "fork" || l.op == "spawn" || l.op == "boundary" {
			after = append(after, i)
		}
	}
	if len(after) == 0 {
		// None made by the host: a fork of the root, then its delete.
		at := rng.IntN(len(p.lines))
		p.lines = slices.Insert(p.lines, at, progLine{op: "fork", args: []string{"c0", strconv.Itoa(rng.IntN(8))}})
		after = append(after, at)
	}
	for n := 1 + rng.IntN(3); n > 0 && len(after) > 0; n-- {
		k := rng.IntN(len(after))
		at := after[k] + 1 + rng.IntN(len(p.lines)-after[k])
		if at > len(p.lines) {
			at = len(p.lines)
		}
		ins := []progLine{{op: "delete", args: []string{"c-1"}}}
		if b := p.lines[after[k]]; b.op == "boundary" {
			ins = append(ins, progLine{op: "boundary", args: append([]string{b.args[0], "thread-4"}, b.args[2:]...)})
		}
		p.lines = slices.Insert(p.lines, at, ins...)
		after = slices.Delete(after, k, k+1)
		for i := range after {
			if after[i] >= at {
				after[i] += len(ins)
			}
		}
	}
}

// collapseSeeds is how often a drawn program's conversations keep few
// tokens when they collapse, and collapse often (every sixth seed from 4,
// not the golden traces' seed 1): with the default settings no cut ever
// falls inside the history, so the rules of where a cut may fall (§2.3)
// went unexercised.
const collapseSeeds = 6

// drawCollapseSettings sets, in the root or the newest conversation, from a
// generator of its own, a keepRecent of a few hundred tokens at most and,
// half the time, a threshold past which each generation collapses first,
// and adds one to three collapses: one right after the settings, and
// others anywhere before the final drive; half the collapses of such a
// seed have instructions.
func drawCollapseSettings(p *program, seed uint64) {
	if seed%collapseSeeds != 4 {
		return
	}
	rng := seededRNG(seed, "collapse")
	conv := []string{"c0", "c-1"}[rng.IntN(2)]
	at := rng.IntN(len(p.lines))
	lines := []progLine{{op: "value", args: []string{conv, "pi.collapse.keepRecent", "rewind", "set", strconv.Itoa(rng.IntN(300))}}}
	if rng.IntN(2) == 0 {
		threshold := strconv.FormatFloat(float64(1+rng.IntN(30))/10_000, 'f', -1, 64) // 13 to 384 tokens of the faux window
		lines = append(lines, progLine{op: "value", args: []string{conv, "pi.collapse.threshold", "rewind", "set", threshold}})
	}
	lines = append(lines, progLine{op: "collapse", args: []string{conv}})
	p.lines = slices.Insert(p.lines, at, lines...)
	for range rng.IntN(3) {
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), progLine{op: "collapse", args: []string{"c" + strconv.Itoa(rng.IntN(2))}})
	}
	// Half the collapses, from a generator of their own, carry
	// instructions for the summarizer (summarizerrule.go).
	instr := seededRNG(seed, "instructions")
	for i, l := range p.lines {
		if l.op == "collapse" && instr.IntN(2) == 0 {
			p.lines[i].args = append(slices.Clip(l.args), collapseInstructions[instr.IntN(len(collapseInstructions))])
		}
	}
}

// collapseInstructions are what a drawn collapse asks its summarizer to
// keep besides the rest.
var collapseInstructions = []string{"keep-every-file-path", "list-the-open-questions", "quote-the-last-error"}

// spillSeeds is how often a drawn program's model also calls the spill
// tools (spill.go): every fourth seed from 2, not the golden traces' seed 1.
const spillSeeds = 4

// drawSpills gives the model of every spillSeeds-th seed's program one to
// three answers that call the spill tools, from a generator of their own,
// among its other answers, so that output windows meet aborts, restarts,
// budgets and failures; half of those programs begin with a spill call
// that an abort cuts short (drawSpillAborts).
func drawSpills(p *program, seed uint64) {
	if seed%spillSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "spills")
	tools := []string{"spill-head", "spill-tail"}
	for range 1 + rng.IntN(3) {
		var names []string
		for range 1 + rng.IntN(2) {
			name := fmt.Sprintf("%s:%d", tools[rng.IntN(2)], rng.IntN(1000))
			if rng.IntN(4) == 0 {
				name += ":fail"
			}
			names = append(names, name)
		}
		l := progLine{op: "respond", args: []string{"calls", strings.Join(names, ",")}}
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), l) // before the final drive
	}
}

// drawSpillAborts has half the spill programs begin with a spill call cut
// short. It runs after the draws that begin a program with blocks of their
// own (the hook seeds' are the spill seeds), so that its turn is the
// program's first and the first answer its.
func drawSpillAborts(p *program, seed uint64) {
	if seed%spillSeeds != 2 {
		return
	}
	// Half of them begin with a turn whose first answer calls a spill
	// tool, aborted (the turn, or the call) after a chunk or a few: an
	// aborted call settles with what its sink made durable, usage and all.
	rng := seededRNG(seed, "spill aborts")
	if rng.IntN(2) == 0 {
		return
	}
	call := fmt.Sprintf("%s:%d", []string{"spill-head", "spill-tail"}[rng.IntN(2)], rng.IntN(1000))
	abort := []progLine{{op: "abort", args: []string{"c0"}}, {op: "abort-task", args: []string{"0"}}}[rng.IntN(2)]
	block := []progLine{{op: "respond", args: []string{"calls", call}}, {op: "accept", args: []string{"c0", "spill"}}, {op: "drive-async", args: []string{"c0"}},
		{op: "sleep", args: []string{strconv.Itoa(int(spillChunkWait/time.Millisecond) * (1 + rng.IntN(4)))}}, abort}
	p.lines = append(block, p.lines...)
}

// providerSeeds is how often a drawn program's boundaries are another
// provider's lifecycle events: every third seed, not seed 1's goldens.
const providerSeeds = 3

// providerEvents are the lifecycle events, and their sources, reasons or
// triggers, that a drawn program delivers for each provider
// (shared/reference/provider-hooks.md).
var providerEvents = map[string]map[string][]string{
	"claude":  {"start": {"startup", "resume", "clear", "compact", "fork"}, "end": {"clear", "resume", "logout", "other"}, "precompact": {"manual", "auto"}, "postcompact": {"auto"}},
	"codex":   {"start": {"startup", "startup", "resume", "clear", "compact"}, "end": {"clear", "exit", "other"}, "precompact": {"manual", "auto"}},
	"gemini":  {"start": {"startup", "resume", "clear", "clear"}, "end": {"clear", "clear", "exit", "other"}, "precompress": {"manual", "auto"}},
	"copilot": {"start": {"startup", "resume", "new"}},
	"generic": {"start": {"startup", "resume", "clear", "compact", "fork", "ui-only"}},
}

// drawProviders makes the boundaries of every providerSeeds-th seed's
// program the lifecycle events of one provider, drawn from a generator of
// their own, and adds one to three more: starts, ends, compactions, with
// the provider's quirks (Codex reports /new as a startup, Gemini ends a
// clear before it starts it and resumes without an event).
func drawProviders(p *program, seed uint64) {
	if seed%providerSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "providers")
	provs := slices.Sorted(maps.Keys(providerEvents))
	prov := provs[rng.IntN(len(provs))]
	events := slices.Sorted(maps.Keys(providerEvents[prov]))
	line := func() progLine {
		ev := events[rng.IntN(len(events))]
		if rng.IntN(2) == 0 {
			ev = "start"
		}
		sources := providerEvents[prov][ev]
		return progLine{op: "boundary", args: []string{sources[rng.IntN(len(sources))], fmt.Sprintf("thread-%d", 1+rng.IntN(3)), prov + ":" + ev}}
	}
	for i, l := range p.lines {
		if l.op == "boundary" {
			p.lines[i] = line()
		}
	}
	for range 1 + rng.IntN(3) {
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), line()) // before the final drive
	}
	if prov == "codex" {
		// Codex reports its /new as a startup under a new session id: a
		// pair of them, from a generator of its own, the second a clear.
		pair := seededRNG(seed, "codex new")
		first := 1 + pair.IntN(3)
		second := 1 + (first+pair.IntN(2))%3
		p.lines = slices.Insert(p.lines, pair.IntN(len(p.lines)),
			progLine{op: "boundary", args: []string{"startup", fmt.Sprintf("thread-%d", first), "codex:start"}},
			progLine{op: "boundary", args: []string{"startup", fmt.Sprintf("thread-%d", second), "codex:start"}})
	}
}

// limitSeeds is how often a drawn program's session has budget limits
// (DESIGN §11): every fifth seed, not the golden traces' seed 1.
const limitSeeds = 5

// drawLimits gives the session of every limitSeeds-th seed's program
// small limits on turns, provider queries, output tokens, virtual
// wall-clock time and tool calls (each half the time, at least one), from a generator of their own, so that programs
// run into them, through clears and forks and restarts alike.
func drawLimits(p *program, seed uint64) {
	if seed%limitSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "limits")
	if rng.IntN(2) == 0 {
		p.limits.Turns = 1 + rng.IntN(4)
	}
	if rng.IntN(2) == 0 {
		p.limits.Queries = 1 + rng.IntN(5)
		if rng.IntN(2) == 0 {
			// A rate limit first, so that a retry meets the limit: a
			// retried query counts as any other.
			p.lines = slices.Insert(p.lines, 0, progLine{op: "respond", args: []string{"rate-limited"}})
		}
	}
	if rng.IntN(2) == 0 {
		p.limits.OutputTokens = int64(2 + rng.IntN(8))
	}
	if rng.IntN(2) == 0 {
		p.limits.WallClock = time.Duration(50+rng.IntN(1_500)) * time.Millisecond
	}
	if rng.IntN(2) == 0 || p.limits == (agent.BudgetLimits{}) {
		p.limits.ToolCalls = 1 + rng.IntN(3)
	}
	// Half the sessions without a wall-clock limit get one the program's
	// waits, slow answers and retries often add up to, so that a query may
	// start exactly as the time runs out; from a generator of its own, so
	// that the draws above stay as they were.
	round := seededRNG(seed, "round wall clock")
	if p.limits.WallClock == 0 && round.IntN(2) == 0 {
		p.limits.WallClock = time.Duration([]int{50, 100, 300, 500, 1000}[round.IntN(5)]) * time.Millisecond
	}
}

// priceSeeds is how often a drawn program's answers cost something: every
// second seed (not the golden traces' seed 1), so that the usage rows and
// totals carry costs whose sums the check holds.
const priceSeeds = 2

// drawPrices gives the faux provider of every priceSeeds-th seed's program
// a price of 1 to 3 units a cached token, and half the limit seeds' sessions
// a spend limit that a few queries reach: a query of the first turn writes
// a prompt of some 800 tokens to the cache (2,400 units a unit of price),
// each later one reads most of it back. From a generator of its own, so
// that the other draws stay as they were.
func drawPrices(p *program, seed uint64) {
	rng := seededRNG(seed, "prices")
	if seed%priceSeeds == 0 {
		p.price = 1 + rng.IntN(3)
	}
	if seed%limitSeeds == 0 && rng.IntN(2) == 0 {
		p.price = max(p.price, 1)
		p.limits.Spend = float64(p.price*(500+rng.IntN(10_000))) * script.PriceUnit
	}
}

// fauxPrice is the price of a program's price= for the faux provider: a
// cached token costs price units, an input token twice that, a token
// written to the cache three times and an output token eight times.
func fauxPrice(price int) ai.Cost {
	u := float64(price) * script.PriceUnit
	return ai.Cost{Input: 2 * u, Output: 8 * u, CacheRead: u, CacheWrite: 3 * u}
}

// transcriptSeeds is how often a drawn program also writes heads and edits
// of its own (every third seed: not the golden traces' seed 1), so that
// the context rule (§2.2) meets host heads at any boundary and edits that
// omit and replace: none of the agent's own writes makes an edit.
const transcriptSeeds = 3

// drawTranscriptActions inserts one to three entry and edit lines into the
// program of every transcriptSeeds-th seed, before its final drive, from a
// generator of their own, so that the program's other draws stay as they
// are.
func drawTranscriptActions(p *program, seed uint64) {
	if seed%transcriptSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "transcript")
	for range 1 + rng.IntN(3) {
		conv := fmt.Sprintf("c%d", rng.IntN(2))
		l := progLine{op: "entry", args: []string{conv, strconv.Itoa(rng.IntN(8))}}
		if rng.IntN(3) != 0 {
			l = progLine{op: "edit", args: []string{conv, strconv.Itoa(rng.IntN(4)), []string{"omit", "replace"}[rng.IntN(2)]}}
		}
		at := rng.IntN(len(p.lines)) // before the final drive
		p.lines = slices.Insert(p.lines, at, l)
	}
	// Half of them, from a generator of their own, edit one entry of the
	// root twice in a row: the newer edit is the one the context shows.
	if twice := seededRNG(seed, "edits twice"); twice.IntN(2) == 0 {
		entry := strconv.Itoa(twice.IntN(4))
		p.lines = slices.Insert(p.lines, twice.IntN(len(p.lines)),
			progLine{op: "edit", args: []string{"c0", entry, []string{"omit", "replace"}[twice.IntN(2)]}},
			progLine{op: "edit", args: []string{"c0", entry, []string{"omit", "replace"}[twice.IntN(2)]}})
	}
}

// stateSeeds is how often a drawn program also writes state of its own
// (every other seed: not the golden traces' seed 1), so that rewindable
// values and lists, which the agent's own writes leave mostly alone, meet
// forks, clears and removes at any point (§9.1).
const stateSeeds = 2

// stateName is a state a drawn program writes: a value or a list, in
// session scope or a conversation's ("c"), at a namespace and key, with
// its one policy.
type stateName struct{ op, target, name, policy string }

// stateNames are the states a drawn program writes: a namespace (and key)
// with the one policy it always writes it with, per target.
var stateNames = []stateName{
	{"value", "c", "host.r", "rewind"}, {"value", "c", "host.r/k1", "rewind"}, {"value", "c", "host.r/k2", "rewind"},
	{"value", "c", "host.s", "sticky"}, {"value", "c", "host.s/k1", "sticky"},
	{"value", "session", "host.g", "sticky"}, {"value", "session", "host.g/k1", "sticky"},
	{"list", "c", "host.rl", "rewind"}, {"list", "c", "host.rl", "rewind"}, {"list", "c", "host.sl", "sticky"},
	{"list", "session", "host.gl", "sticky"},
}

// stateKindsBefore and stateKindsAfter are the writes a drawn program's
// value and list lines draw from, before a fork and after it.
var (
	stateKindsBefore = map[string][]string{"value": {"set", "set", "set", "set", "set", "delete"}, "list": {"append", "append", "append", "remove", "remove", "clear"}}
	stateKindsAfter  = map[string][]string{"value": {"set", "delete"}, "list": {"append", "clear", "remove"}}
)

// drawStateActions inserts a block of three to ten value and list lines
// into the program of every stateSeeds-th seed, before its final drive,
// from a generator of their own, so that the program's other draws stay
// as they are. Three blocks in four fork the root between two of the
// writes, after a turn of the root, at one of its last entries, so that
// the fork inherits what the root wrote before it (or some of it). The
// writes before the fork go mostly to the root and mostly set and append;
// those after it go mostly to the fork and to what it inherited, and a
// third of them clear and a third remove.
func drawStateActions(p *program, seed uint64) {
	if seed%stateSeeds != 0 {
		return
	}
	rng := seededRNG(seed, "state")
	n := 3 + rng.IntN(8)
	fork := -1 // none
	if rng.IntN(4) != 0 {
		fork = 1 + rng.IntN(n-1) // after a write, before another
	}
	// A few states, written again and again: a value and a list, and a
	// third of any kind.
	var values, lists []int
	for i, st := range stateNames {
		if st.op == "value" {
			values = append(values, i)
		} else {
			lists = append(lists, i)
		}
	}
	var names []stateName
	for _, i := range []int{values[rng.IntN(len(values))], lists[rng.IntN(len(lists))], rng.IntN(len(stateNames))} {
		names = append(names, stateNames[i])
	}
	var inherited []stateName // what the root wrote before the fork
	lines := make([]progLine, 0, n+3)
	for i := range n {
		after := fork >= 0 && i >= fork
		if i == fork {
			lines = append(lines, progLine{op: "accept", args: []string{"c0", "state"}}, progLine{op: "drive", args: []string{"c0"}},
				progLine{op: "fork", args: drawCarry(seed, names, []string{"c0", strconv.Itoa(-1 - rng.IntN(6))})})
		}
		st := names[rng.IntN(len(names))]
		if after && len(inherited) > 0 && rng.IntN(4) != 0 {
			st = inherited[rng.IntN(len(inherited))]
		}
		target := st.target
		if target == "c" {
			// The root before a fork, the fork (the newest) after it,
			// and now and then another.
			target = []string{"c0", "c1", "c-1"}[rng.IntN(3)]
			if rng.IntN(4) != 0 {
				target = "c0"
				if after {
					target = "c-1"
				}
			}
		}
		if !after && target == "c0" {
			inherited = append(inherited, st)
		}
		l := progLine{op: st.op, args: []string{target, st.name, st.policy}}
		val := strconv.Itoa(1 + rng.IntN(9))
		if rng.IntN(4) == 0 {
			val = fmt.Sprintf(`{"n":%s}`, val)
		}
		kinds := stateKindsBefore
		if after {
			kinds = stateKindsAfter
		}
		switch kind := kinds[st.op][rng.IntN(len(kinds[st.op]))]; kind {
		case "delete", "clear":
			l.args = append(l.args, kind)
		case "remove":
			l.args = append(l.args, kind, strconv.Itoa(rng.IntN(4)))
		default:
			l.args = append(l.args, kind, val)
		}
		lines = append(lines, l)
	}
	at := rng.IntN(len(p.lines)) // before the final drive
	p.lines = slices.Insert(p.lines, at, lines...)
	// A quarter of them, from a generator of their own, also remove from
	// the root's rewindable list before a fork that then writes the list
	// itself: the fork's reads must apply the root's removes below its own.
	if removes := seededRNG(seed, "fork removes"); removes.IntN(4) == 0 {
		list := func(conv string, args ...string) progLine {
			return progLine{op: "list", args: append([]string{conv, "host.rl", "rewind"}, args...)}
		}
		block := []progLine{list("c0", "append", "1"), list("c0", "append", "2"), list("c0", "remove", strconv.Itoa(removes.IntN(2))),
			{op: "respond", args: []string{"text", "ok"}}, {op: "accept", args: []string{"c0", "state"}}, {op: "drive", args: []string{"c0"}}, {op: "fork", args: []string{"c0", "-1"}},
			list("c-1", "append", "3")}
		if removes.IntN(2) == 0 {
			block = append(block, list("c-1", "remove", "-1"))
		}
		p.lines = slices.Insert(p.lines, removes.IntN(len(p.lines)), block...)
	}
	// A third of them, from a generator of their own, begin with a watch
	// of the session, whose values their session value lines then change.
	if watch := seededRNG(seed, "session watch"); watch.IntN(3) == 0 {
		p.lines = append([]progLine{{op: "watch-session"}}, p.lines...)
		set := progLine{op: "value", args: []string{"session", "host.g", "sticky", "set", strconv.Itoa(1 + watch.IntN(9))}}
		p.lines = slices.Insert(p.lines, 1+watch.IntN(len(p.lines)-1), set)
	}
}

// drawCarry adds to a state block's fork line, one time in two, the
// values it carries (ForkOptions.Values): from a generator of its own, one
// to three conversation value names, three times in four of those the
// block writes (so mostly values the root has), else of any.
func drawCarry(seed uint64, names []stateName, args []string) []string {
	rng := seededRNG(seed, "carry")
	if rng.IntN(2) == 0 {
		return args
	}
	from := names
	if rng.IntN(4) == 0 {
		from = stateNames
	}
	var pool []string
	for _, st := range from {
		if v := st.name + ":" + st.policy; st.op == "value" && st.target == "c" && !slices.Contains(pool, v) {
			pool = append(pool, v)
		}
	}
	if len(pool) == 0 {
		return args
	}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	return append(args, "carry="+strings.Join(pool[:min(1+rng.IntN(3), len(pool))], ","))
}

// boundaryEvents are the lifecycle events a boundary line names, by the
// name it gives them (start when it names none).
var boundaryEvents = map[string]string{"": boundary.EventSessionStart, "start": boundary.EventSessionStart, "end": boundary.EventSessionEnd,
	"precompact": boundary.EventPreCompact, "postcompact": boundary.EventPostCompact, "precompress": boundary.EventPreCompress}

// drawResponse draws one answer of the model.
func drawResponse(rng *rand.Rand, shell bool) progLine {
	kinds := []struct {
		kind   string
		weight int
	}{{"text", 6}, {"calls", 5}, {"rate-limited", 1}, {"deferred", 1}, {"overflow", 1}, {"fail", 1}, {"aborted", 1}, {"slow", 2}}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	pick := rng.IntN(total)
	kind := ""
	for _, k := range kinds {
		if pick -= k.weight; pick < 0 {
			kind = k.kind
			break
		}
	}
	switch kind {
	case "text":
		return progLine{op: "respond", args: []string{"text", []string{"ok", "done", "here is the answer"}[rng.IntN(3)]}}
	case "slow":
		return progLine{op: "respond", args: []string{"slow", strconv.Itoa(100 * (1 + rng.IntN(30))), "slowly"}}
	case "calls":
		tools := []string{"a", "b", "work:ok", "work:throw", "work:slow", "work:terminate", "work:handoff", "work:addTools", "subagent:run", "subagent:spawn",
			"subagent:send", "subagent:status", "subagent:wait", "subagent:stop", "subagent:send:other", "subagent:stop:other"}
		if shell {
			tools = append(tools, "bash:go test ./...", "bash:serve", "bash:flaky", "job:status", "job:output", "job:wait", "job:stop", "job:stop:other")
		}
		var names []string
		for range 1 + rng.IntN(3) {
			names = append(names, tools[rng.IntN(len(tools))])
		}
		return progLine{op: "respond", args: []string{"calls", strings.Join(names, ",")}}
	}
	return progLine{op: "respond", args: []string{kind}}
}

// --- the interpreter ---

// program is the run's program: the one the spec carries, or the one its
// seed draws.
func (e *env) program() *program {
	if e.prog == nil {
		e.prog = e.spec.program
		if e.prog == nil {
			e.prog = drawProgram(e.spec.seed)
		}
	}
	return e.prog
}

// driveBound is how long a drive action, and the liveness phase, may take
// in virtual time before the run is judged hung.
const driveBound = time.Hour

// generated is the scenario that runs a program: the one --program gave,
// or the one drawn from the seed.
func generated(ctx context.Context, e *env) error {
	p := e.program()
	e.s.Record("program", p.String())
	g := &programRun{e: e, p: p, convs: []storage.ID{root}}
	if err := g.respondAll(); err != nil {
		return err
	}
	for _, l := range p.lines {
		if l.op == "respond" {
			continue
		}
		if !e.host(l.String()) {
			continue
		}
		if err := g.do(ctx, l); err != nil {
			return fmt.Errorf("%s: %w", l, err)
		}
		if err := g.checkWatches(ctx); err != nil {
			return err
		}
	}
	return g.liveness(ctx)
}

// programRun is one program's run: the conversations and watches its
// actions refer to by index.
type programRun struct {
	e       *env
	p       *program
	convs   []storage.ID
	watches []*core.WatchHandle
	tails   []storage.ID // each watch's conversation
	trails  []*taskTrail // each watch's tasks as its events showed them
	session []*core.SessionWatchHandle
	calls   int
	prompts int      // the prompt lines reached (promptrule.go)
	hooked  int      // the hook lines reached
	answers []answer // the model's answers not given yet
	// receipts are the request ids the host used (receiptrule.go).
	receipts receipts
}

// respondAll queues the program's answers, each a host action (so that
// shrinking can drop it), then enough plain answers for the rest.
//
// The answers go out in order, except that one naming the asker's own
// child or job, or another's job (a subagent or job command), waits, for
// a few requests, for a conversation that has one to ask: the model's
// answers are one queue for every conversation, and a child's first
// request would otherwise take it.
func (g *programRun) respondAll() error {
	for _, l := range g.p.lines {
		if l.op != "respond" {
			continue
		}
		if g.e.host(l.String()) {
			g.answers = append(g.answers, g.response(l))
		}
	}
	for i := range recoveryAnswersMax * 2 {
		g.answers = append(g.answers, answer{step: func(storage.ID) faux.Step { return reply(fmt.Sprintf("answer %d", i)) }})
	}
	steps := make([]faux.Step, len(g.answers))
	for i := range steps {
		steps[i] = faux.Respond(g.next)
	}
	g.e.faux.SetResponses(steps...)
	return nil
}

// answer is one queued answer of the model: its step, given the asking
// conversation, and what the asker must have for it to be its answer.
type answer struct {
	step func(asker storage.ID) faux.Step
	// kind is its respond line's kind (text, rate-limited, fail, ...), ""
	// for the plain answers after the program's.
	kind string
	// child and job say the answer names the asker's own child or job,
	// otherJob another conversation's job.
	child, job, otherJob bool
	// passed counts the askers it was held back from.
	passed int
}

// answerPassesMax is how many askers without what it names an answer is
// held back from before it goes to the next asker anyway.
const answerPassesMax = 3

// next is the answer to req: the first queued one its asker has what it
// names for or that was held back long enough, else the first.
func (g *programRun) next(req ai.Request) (faux.Step, error) {
	var asker storage.ID // 0: a collapse's summarizer, whose request names no conversation
	if req.SessionID != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(req.SessionID, "conversation-"), 10, 64)
		if err != nil {
			return faux.Step{}, fmt.Errorf("a request without its conversation: %q", req.SessionID)
		}
		asker = storage.ID(n)
	}
	if len(g.answers) == 0 {
		return faux.Step{}, errors.New("no answer is left")
	}
	_, child := g.e.oracle.ownChild(asker)
	_, job := g.e.oracle.ownJob(asker)
	_, otherJob := g.e.oracle.otherJob(asker)
	i := slices.IndexFunc(g.answers, func(a answer) bool {
		return (child || !a.child) && (job || !a.job) && (otherJob || !a.otherJob) || a.passed >= answerPassesMax
	})
	if i < 0 {
		i = 0
	}
	for j := range i {
		g.answers[j].passed++
	}
	a := g.answers[i]
	g.answers = slices.Delete(g.answers, i, i+1)
	g.e.oracle.served(a.kind) // on the asking actor: Stream runs the step here
	return a.step(asker), nil
}

func (g *programRun) response(l progLine) answer {
	a := g.answerTo(l)
	a.kind = l.args[0]
	return a
}

func (g *programRun) answerTo(l progLine) answer {
	fixed := func(s faux.Step) answer { return answer{step: func(storage.ID) faux.Step { return s }} }
	switch l.args[0] {
	case "text":
		return fixed(reply(l.args[1]))
	case "slow":
		ms, _ := strconv.Atoi(l.args[1])
		return fixed(reply(l.args[2]).WithDelay(time.Duration(ms) * time.Millisecond))
	case "rate-limited":
		return fixed(faux.RateLimited())
	case "deferred":
		return fixed(faux.Reply().WithStop(ai.StopDeferred))
	case "overflow":
		return fixed(faux.ContextOverflow())
	case "fail", "aborted":
		if len(l.args) == 1 {
			return fixed(brokenOff(l.args[0], nil))
		}
		// "fail CALLS" and "aborted CALLS": the answer streamed its calls
		// before it broke off, so it has calls that never run.
	}
	type call struct{ id, tool, arg string }
	var calls []call
	var a answer
	for i, name := range strings.Split(l.args[1], ",") {
		g.calls++
		id := fmt.Sprintf("call-%d", g.calls)
		switch seed := g.e.spec.seed; {
		case seed%reusedIDSeeds == 0 && seed/reusedIDSeeds%pairedIDSeeds == 2:
			id = fmt.Sprintf("call-%d", i/2+1)
		case seed%reusedIDSeeds == 0:
			id = fmt.Sprintf("call-%d", i+1)
		}
		tool, arg, _ := strings.Cut(name, ":")
		calls = append(calls, call{id, tool, arg})
		own := !strings.HasSuffix(arg, ":other")
		cmd := strings.TrimSuffix(arg, ":inherit")
		a.child = a.child || own && tool == agent.SubagentToolName && cmd != "run" && cmd != "spawn"
		a.job = a.job || own && tool == agent.JobToolName
		a.otherJob = a.otherJob || !own && tool == agent.JobToolName
	}
	// The ids a subagent or job command names are the run's: the asking
	// conversation's newest child or job (":other": another conversation's,
	// which the tool must refuse), chosen when the model is asked.
	a.step = func(asker storage.ID) faux.Step {
		var blocks []ai.Block
		for _, c := range calls {
			args := "{}"
			command, other := strings.CutSuffix(c.arg, ":other")
			command, inherit := strings.CutSuffix(command, ":inherit")
			switch c.tool {
			case "work":
				args = fmt.Sprintf(`{"do":%q}`, c.arg)
			case "a", "b":
				if c.arg != "" { // a:MS, b:MS: the echo tool waits MS virtual ms
					args = fmt.Sprintf(`{"waitMs":%d}`, atoi(c.arg))
				}
			case "spill-head", "spill-tail":
				recipe, fail := strings.CutSuffix(c.arg, ":fail")
				raw, _ := json.Marshal(spillArgs{Recipe: atoi(recipe), Fail: fail})
				args = string(raw)
			case typedTool:
				args = typedArgs(atoi(c.arg))
			case "read", "write", "edit", "new_context":
				i := strings.LastIndex(c.arg, ":")
				args = fileArgs(c.tool, c.arg[:max(i, 0)], atoi(c.arg[i+1:]))
			case agent.SubagentToolName:
				switch command {
				case "run", "spawn":
					args = fmt.Sprintf(`{"command":%q,"prompt":"look into it"}`, command)
					if inherit {
						args = fmt.Sprintf(`{"command":%q,"prompt":"look into it","context":"inherit"}`, command)
					}
				default:
					args = fmt.Sprintf(`{"command":%q,"id":%d,"text":"go on"}`, command, g.e.oracle.child(asker, other))
				}
			case agent.JobToolName:
				args = fmt.Sprintf(`{"command":%q,"id":%d}`, command, g.e.oracle.job(asker, other))
			case "bash":
				raw, _ := json.Marshal(map[string]string{"command": c.arg})
				args = string(raw)
			}
			blocks = append(blocks, faux.ToolCall(c.id, c.tool, args))
		}
		if l.args[0] != "calls" {
			return brokenOff(l.args[0], blocks)
		}
		return faux.Reply(blocks...).WithStop(ai.StopToolUse)
	}
	return a
}

// brokenOff is an answer that breaks off, as kind ("fail" or "aborted")
// says, after streaming calls.
func brokenOff(kind string, calls []ai.Block) faux.Step {
	if kind == "fail" {
		return faux.Reply(calls...).WithStop(ai.StopError).WithError("the provider refused")
	}
	return faux.Reply(append([]ai.Block{faux.Text("cut")}, calls...)...).WithStop(ai.StopAborted)
}

// reusedIDSeeds is how often a run's model numbers its calls per answer, as
// many providers do, so that call ids come back in later answers and in
// other conversations: every third seed from 3 (not the golden traces'
// seed 1). Every other run numbers them across the run.
const reusedIDSeeds = 3

// pairedIDSeeds is how often, among those seeds, the model names each two
// calls of an answer by one id, as some providers do: the first call of a
// pair gets the result, the second an error result in every request
// (§2.2's normalization), though both run. Seeds 6, 18, 30 and so on.
const pairedIDSeeds = 4

// conv resolves "cN" to a conversation the program made (script.Nth).
func (g *programRun) conv(a string) storage.ID {
	n, _ := script.ConvIndex(a)
	return g.convs[script.Nth(n, len(g.convs))]
}

// inputConv resolves the conversation an input line names: cN, or
// cN/child, the newest child a task of cN made (script.ChildInputOps),
// which it is refused without.
func (g *programRun) inputConv(a string) (storage.ID, error) {
	target, child := strings.CutSuffix(a, "/child")
	if !child {
		return g.conv(a), nil
	}
	c, ok := g.e.oracle.ownChild(g.conv(target))
	if !ok {
		return 0, fmt.Errorf("conversation %d has no child a task of it made", g.conv(target))
	}
	return c, nil
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// do performs one host action. A rejection the harness names (a typed
// error) is an outcome, recorded in the trace; a fault of the session is
// the run's failure.
func (g *programRun) do(ctx context.Context, l progLine) error {
	e := g.e
	err := g.act(ctx, l)
	switch {
	case err == nil && (l.op == "fork" || l.op == "spawn" || l.op == "delete" || l.op == "boundary") && !e.stopping():
		return e.oracle.listingChecked(ctx, e.h.Conversations, l.String())
	case err == nil:
		return nil
	case isSessionFault(err), errors.As(err, new(*oracleError)):
		return err // the session failed, or what the harness answered broke a rule
	}
	if err := ownRuleKept(l.op, err); err != nil {
		return e.oracle.fail(err)
	}
	e.s.Record("refused", map[string]string{"action": l.String(), "error": err.Error()})
	return nil
}

// ruleOwnCommits: a rule never refuses a commit the harness builds for a
// host verb from the verb's arguments (an input, an abort, a cancel, a
// fork, a collapse, a delete…): such a refusal is the harness breaking its
// own rule, not the host's mistake, whose refusals are typed errors of
// their own (not found, busy, nothing to collapse). The host's own writes
// (entry, edit, value, list and tx lines) and picosim's own kind (shape)
// are held to the rules, as are the settings a line sets (settingsrule);
// and the rule that says so refuses an abort of a task that has ended.
const ruleOwnCommits oracleRule = "a-verb-keeps-the-rules"

// hostWrites are the lines whose commits carry what the host wrote.
var hostWrites = map[string]bool{"entry": true, "edit": true, "value": true, "list": true, "tx": true, "shape": true, "settings": true}

// ownRuleKept holds a refusal of the host verb op to ruleOwnCommits.
func ownRuleKept(op string, err error) error {
	var ce *core.CommitError
	if !errors.As(err, &ce) || hostWrites[op] || op == "abort-task" && ce.Rule == core.RuleTaskTerminal {
		return nil
	}
	return broke(ruleOwnCommits, "%s was refused by the rule %s, which the harness's own commit for it broke: %v", op, ce.Rule, err)
}

// isSessionFault reports whether err is the session failing rather than a
// host call being refused.
func isSessionFault(err error) bool {
	var fe *core.FaultError
	return errors.As(err, &fe)
}

func (g *programRun) act(ctx context.Context, l progLine) error {
	e := g.e
	rt := e.s.Runtime()
	switch l.op {
	case "accept", "followup":
		conv, err := g.inputConv(l.args[0])
		if err != nil {
			return err
		}
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		var id storage.ID
		if l.op == "followup" {
			id, err = c.FollowUp(ctx, ai.PlainText(l.args[1]))
		} else {
			var opts agent.AcceptOptions
			if len(l.args) == 3 {
				opts.RequestID = strings.TrimPrefix(l.args[2], "req=")
			}
			id, err = c.Accept(ctx, ai.PlainText(l.args[1]), opts)
			if opts.RequestID != "" {
				if rerr := g.receipts.accepted(ctx, e, opts.RequestID, conv, id, err); rerr != nil {
					return rerr
				}
			}
		}
		if err == nil {
			e.remember(conv, id)
			e.give(conv, id, core.UserKind.Kind(), l.args[1])
		}
		return err
	case "steer", "next-run", "write":
		mode := map[string]agent.InputMode{"steer": agent.ModeSteer, "next-run": agent.ModeNextRun, "write": agent.ModeWrite}[l.op]
		conv, err := g.inputConv(l.args[0])
		if err != nil {
			return err
		}
		_, err = e.acceptInput(ctx, conv, mode, l.args[1])
		return err
	case "cancel-queued":
		conv := g.conv(l.args[0])
		ins := e.inputs[conv]
		if len(ins) == 0 {
			return nil
		}
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		input := ins[script.Nth(atoi(l.args[1]), len(ins))]
		res, err := c.CancelQueued(ctx, input)
		if err != nil || e.stopping() {
			return err
		}
		return e.oracle.cancelledQueued(ctx, e.h.Store(), conv, input, res)
	case "abort":
		conv := g.conv(l.args[0])
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		return c.Abort(withHostAbort(ctx, conv, true))
	case "abort-task":
		in, err := e.h.Inspect(ctx)
		if err != nil {
			return err
		}
		live := append(in.Start, in.Inflight...)
		if len(live) == 0 {
			return nil
		}
		slices.SortFunc(live, func(a, b *storage.Task) int { return int(a.ID - b.ID) })
		id := live[script.Nth(atoi(l.args[0]), len(live))].ID
		scribble(in)
		if err := e.h.AbortTask(ctx, id); err != nil || e.stopping() {
			return err
		}
		return e.oracle.taskAborted(id)
	case "fork":
		conv := g.conv(l.args[0])
		page, err := e.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax})
		if err != nil || len(page.Items) == 0 {
			return err
		}
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		abort, carry, _ := script.ForkOf(script.Line{Op: l.op, Args: l.args})
		fctx := ctx
		if abort {
			fctx = withHostAbort(ctx, conv, false)
		}
		at, values := page.Items[script.Nth(atoi(l.args[1]), len(page.Items))].ID, kit.CarriedAddresses(carry)
		f, err := c.Fork(fctx, at, core.ForkOptions{Abort: abort, Values: values})
		if err != nil {
			return err
		}
		g.convs = append(g.convs, f.ID)
		return e.checkCarried(ctx, conv, at, f.ID, values)
	case "entry":
		// A host commit of a notice entry that starts the context at the
		// Nth entry of the conversation's transcript (§2.1 head rules).
		conv := g.conv(l.args[0])
		page, err := e.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax})
		if err != nil || len(page.Items) == 0 {
			return err
		}
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		head := page.Items[script.Nth(atoi(l.args[1]), len(page.Items))].ID
		_, err = c.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]string{"text": "host head"}, Head: head})
			return nil
		})
		return err
	case "edit":
		// A host commit of a notice entry whose context edit omits or
		// replaces the Nth user entry of the conversation's transcript
		// (§2.1 edits).
		conv := g.conv(l.args[0])
		page, err := e.h.Entries(ctx, conv, storage.Cursor{Limit: storage.PageLimitMax})
		if err != nil {
			return err
		}
		draft, ok := kit.HostEdit(page.Items, atoi(l.args[1]), l.args[2], rt.Now().UnixMilli())
		if !ok {
			return nil
		}
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		_, err = c.Commit(ctx, func(tx *core.ConversationTx) error {
			tx.Entry(core.NoticeKind, draft)
			return nil
		})
		if rule := core.RuleOf(err); rule != "" {
			// An edit of an earlier visible entry breaks no rule.
			_ = e.oracle.fail(broke(ruleAdmitsGoodWrites, "the host's %s of entry %d in conversation %d was refused by %q: %v", l.args[2], draft.Edits[0].Target, conv, rule, err))
		}
		return err
	case "value", "list":
		// A host write of its own state (§9.1 handles): a value set or
		// deleted, a list appended to, cleared or its Nth element
		// removed, in session scope or a conversation's.
		var scope core.StateScope = e.h
		if l.args[0] != "session" {
			c, err := e.h.Conversation(ctx, g.conv(l.args[0]))
			if err != nil {
				return err
			}
			scope = c
		}
		_, err := kit.HostState(ctx, scope, l.op, l.args)
		return err
	case "watch":
		conv := g.conv(l.args[0])
		w, err := e.h.Watch(ctx, conv, core.WatchOptions{Tail: g.p.tail, Values: hostWatched(conv)})
		if err != nil {
			return err
		}
		trail := e.trail(w, fmt.Sprintf("watch %d of conversation %d", len(g.watches), conv))
		g.watches, g.tails, g.trails = append(g.watches, w), append(g.tails, conv), append(g.trails, trail)
		return w.Start(ctx, func(ev core.ConversationEvent) { trail.listen(ctx, w, ev) })
	case "watch-session":
		w, err := e.h.WatchSession(ctx, sessionWatched()...)
		if err != nil {
			return err
		}
		g.session = append(g.session, w)
		return w.Start(ctx, func(ev core.SessionEvent) {
			if ev.Type == core.SessionEventFault && ev.Error == core.ErrWatchLagging.Error() {
				_, _ = w.Resnapshot(ctx)
			}
			e.oracle.sessionEventSeen(ev)
		})
	case "unwatch", "resnapshot":
		if len(g.watches) == 0 {
			return nil
		}
		i := script.Nth(atoi(l.args[0]), len(g.watches))
		if l.op == "unwatch" {
			g.watches[i].Unsubscribe()
			g.watches, g.tails, g.trails = slices.Delete(g.watches, i, i+1), slices.Delete(g.tails, i, i+1), slices.Delete(g.trails, i, i+1)
			return nil
		}
		v, err := g.watches[i].Resnapshot(ctx)
		if err == nil {
			g.trails[i].reset(v)
		}
		return err
	case "drive":
		return g.drive(ctx, g.conv(l.args[0]))
	case "prompt":
		return g.prompt(ctx, g.conv(l.args[0]), l.args[1])
	case "tx":
		return g.hostTx(ctx, l)
	case "shape":
		return g.startShaper(ctx, g.conv(l.args[0]), atoi(l.args[1]))
	case "drive-async":
		e.driveAsync(ctx, g.conv(l.args[0]))
		return nil
	case "sleep":
		if err := rt.Sleep(ctx, time.Duration(atoi(l.args[0]))*time.Millisecond); err != nil || !e.meddles() {
			return err
		}
		for _, c := range g.convs {
			e.meddleAsHost(ctx, c)
			e.tryBadWrites(ctx, c)
		}
		e.startMeddler(ctx, g.convs[0])
		return nil
	case "hook", "unhook":
		return g.hookLine(ctx, l)
	case "reopen", "shutdown":
		if l.op == "shutdown" {
			if err := e.h.Shutdown(ctx); err != nil && !isSessionFault(err) {
				if err := ownRuleKept(l.op, err); err != nil {
					return e.oracle.fail(err)
				}
				e.s.Record("refused", map[string]string{"action": l.String(), "error": err.Error()})
			}
		}
		if err := e.h.Close(ctx); err != nil {
			return err
		}
		g.watches, g.tails, g.trails, g.session = nil, nil, nil, nil
		return e.open(ctx)
	case "collapse":
		c, err := e.h.Conversation(ctx, g.conv(l.args[0]))
		if err != nil {
			return err
		}
		var opts agent.CollapseOptions
		if len(l.args) > 1 {
			opts.Instructions = l.args[1]
		}
		before := e.h.Store().LastSeq()
		id, err := c.Collapse(ctx, opts)
		if errors.Is(err, agent.ErrNothingToCollapse) && e.h.Store().LastSeq() == before {
			// Nothing committed while it decided: it saw the context as of
			// before. A violation is the oracle's first, judged at the end.
			_ = e.oracle.nothingToCollapse(c.ID, before)
		}
		if err == nil {
			return e.oracle.hostMade("Collapse", agent.CollapseKindName, c.ID, id)
		}
		if ce := (*agent.CollapseError)(nil); errors.As(err, &ce) && errors.Is(err, agent.ErrCollapseInProgress) {
			// The collapse it names may have settled since: its kind and
			// conversation are what can be held.
			if berr := e.oracle.hostMade("Collapse, refused as in progress,", agent.CollapseKindName, c.ID, ce.Task); berr != nil {
				return berr
			}
		}
		return err
	case "delete":
		id := g.conv(l.args[0])
		if id == g.convs[0] {
			// The root stays, so that the rest of the program runs.
			return errors.New("picosim: a program does not delete its root conversation")
		}
		if err := e.h.DeleteConversation(ctx, id); err != nil {
			var busy *core.ConversationBusyError
			if errors.As(err, &busy) && !e.oracle.everHadTasks(id) {
				return e.oracle.fail(broke(ruleConversations, "%s was refused, though no task was ever made in conversation %d or what it owns: %v", l.String(), id, err))
			}
			return err
		}
		if e.stopping() {
			return nil
		}
		return e.oracle.conversationsChecked(ctx, e.h.Store(), l.String())
	case "settings":
		return e.settingsLine(ctx, g.conv(l.args[0]), l)
	case "reset":
		conv := g.conv(l.args[0])
		c, err := e.h.Conversation(ctx, conv)
		if err != nil {
			return err
		}
		handoff := ""
		if len(l.args) == 2 {
			handoff = l.args[1]
		}
		input, entry, err := c.Reset(ctx, handoff)
		if err != nil {
			return err
		}
		kind := core.ResetKind.Kind()
		if handoff != "" {
			kind = core.HandoffKind.Kind()
		}
		e.give(conv, input, kind, handoff)
		if e.stopping() {
			return nil
		}
		return e.oracle.writeMade(ctx, e.h.Store(), conv, input, entry, kind)
	case "spawn":
		c, err := e.h.Conversation(ctx, g.conv(l.args[0]))
		if err != nil {
			return err
		}
		opts := agent.SpawnOptions{Prompt: ai.PlainText(l.args[1])}
		if len(l.args) == 3 {
			opts.Context = agent.SpawnContext(l.args[2])
		}
		e.oracle.hostSpawns(g.conv(l.args[0]), opts.Context)
		child, input, err := c.Spawn(ctx, opts)
		e.oracle.hostSpawns(0, "")
		if rerr := e.oracle.spawnRefusal(g.conv(l.args[0]), opts.Context, err); rerr != nil {
			return rerr
		}
		if err == nil {
			g.convs = append(g.convs, child)
			e.remember(child, input)
		}
		return err
	case "boundary":
		// A lifecycle event of the line's provider (Claude's session start
		// unless it names another), classified against that provider's
		// adapter state and held to what its hooks say it means.
		prov, event := boundary.Claude, boundary.EventSessionStart
		if len(l.args) == 3 {
			p, ev, _ := strings.Cut(l.args[2], ":")
			prov, event = boundary.Provider(p), boundaryEvents[ev]
		}
		st := e.adapterOf(prov)
		want, next := meaning(e.oracle.adapters[prov], prov, event, l.args[0], l.args[1])
		wasBound := e.oracle.sessionState.bound[string(prov)+"/"+l.args[1]]
		tr, _, err := e.deliverEvent(ctx, st, prov, event, l.args[0], l.args[1])
		if err != nil {
			return e.oracle.currentGone(err, wasBound, l.String())
		}
		before := e.oracle.adapters[prov].bound
		e.oracle.adapters[prov] = next
		e.oracle.classified(tr, want, wasBound, before, l.String())
		if tr.Changed && tr.Binding.Conversation != 0 && !slices.Contains(g.convs, tr.Binding.Conversation) {
			g.convs = append(g.convs, tr.Binding.Conversation)
		}
		return nil
	case "job":
		c, err := e.h.Conversation(ctx, root)
		if err != nil {
			return err
		}
		spec := kit.JobSpec(l.args, e.s.Runtime().Now())
		id, err := c.StartJob(ctx, spec)
		var bad *agent.JobSpecError
		switch {
		case err == nil:
			if err := e.oracle.jobStarted(l, id, spec); err != nil {
				return err
			}
			return e.oracle.hostMade("StartJob", agent.JobKindName, c.ID, id)
		case errors.As(err, &bad):
			// Every spec a program draws is valid (an interval for each
			// catch-up policy, delays and reruns within bounds).
			return e.oracle.fail(broke(ruleSchedule, "%s: StartJob refused its spec: %v", l, err))
		}
		return err
	}
	return fmt.Errorf("unknown op %q", l.op)
}

// drive drives conv and waits for it at most driveBound of virtual time;
// a drive still waiting then is left running, and the liveness phase
// judges whether the session can finish.
func (g *programRun) drive(ctx context.Context, conv storage.ID) error {
	rt := g.e.s.Runtime()
	done := g.e.driveAsync(ctx, conv)
	bound, cancel := context.WithCancel(ctx)
	defer cancel()
	timeout := rt.NewEvent("drive-bound")
	rt.Go(bound, "drive-bound", func(ctx context.Context) {
		if rt.Sleep(ctx, driveBound) == nil {
			timeout.Set()
		}
	})
	for !done.IsSet() && !timeout.IsSet() {
		if err := rt.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

// checkWatches holds every live watch the program registered to a fresh
// capture.
func (g *programRun) checkWatches(ctx context.Context) error {
	for i, w := range g.watches {
		if err := g.e.checkWatch(ctx, w, g.tails[i], core.WatchOptions{Tail: g.p.tail, Values: hostWatched(g.tails[i])}); err != nil {
			return err
		}
	}
	for _, w := range g.session {
		if err := g.e.checkSessionWatch(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// liveness is the phase after the program: the session, driven, must
// reach idle within driveBound of virtual time, and then every accepted
// input must end (an idle accept into each conversation places any queued
// nextRun input first).
func (g *programRun) liveness(ctx context.Context) error {
	e := g.e
	if err := g.idle(ctx); err != nil {
		return err
	}
	if err := e.endQueued(ctx, "finally", func(context.Context) error { return g.idle(ctx) }); err != nil {
		return err
	}
	if err := g.checkWatches(ctx); err != nil {
		return err
	}
	return e.settled(ctx, nil)
}

// isRejection reports whether err is a typed refusal of a host call.
func isRejection(err error) bool { return core.RuleOf(err) != "" }

// idle drives the whole session and fails, naming what is still live, if
// it is not idle within driveBound of virtual time.
func (g *programRun) idle(ctx context.Context) error {
	rt := g.e.s.Runtime()
	done := rt.NewEvent("liveness")
	var result core.DriveResult
	var derr error
	h := g.e.h
	rt.Go(ctx, "liveness", func(ctx context.Context) {
		result, derr = h.Drive(ctx)
		done.Set()
	})
	until := rt.Now().Add(driveBound)
	for !done.IsSet() {
		if !rt.Now().Before(until) {
			in, _ := h.Inspect(ctx)
			var live []string
			for _, t := range append(in.Start, in.Inflight...) {
				live = append(live, fmt.Sprintf("%s %d (%s)", t.Kind, t.ID, t.Status))
			}
			return fmt.Errorf("hang: the session is not idle %s after the program; live: %s", driveBound, strings.Join(live, ", "))
		}
		if err := rt.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	if derr != nil || result != core.Idle {
		return fmt.Errorf("the liveness drive = %q, %v; want idle", result, derr)
	}
	if !g.e.idleChecked() {
		return nil
	}
	in, err := h.Inspect(ctx)
	if err != nil {
		return err
	}
	return g.e.idleHoldsNothing(ctx, in)
}
