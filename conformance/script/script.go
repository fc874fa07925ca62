// Package script is the host-action program language (DESIGN §6): what a
// host does to a session, and what its model answers, one line each, in a
// printed form that parses back. picosim's generator and interpreter and
// the conformance kit's data scenarios (fixtures/scenarios) read the same
// language through this package, so a program the fuzzer prints is a
// scenario a port can run.
//
//	picosim program 1
//	swarm tail=2 shell=false
//	respond calls a,work:throw
//	respond text "done"
//	accept c0 "hello" req=r1
//	steer c0 "focus"
//	drive c0
//
// The package knows the syntax and each op's arguments; what an op does is
// its interpreter's business (cmd/picosim, conformance).
package script

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Magic is a program's first line.
const Magic = "picosim program 1"

// Program is a parsed program: its swarm options and its lines.
type Program struct {
	Tail  int  // the watches' entry tail
	Shell bool // the shell tools over fake processes
	Queue int  // the watches' queue bound (0: the harness's default)
	Retry int  // the first retry delay in ms (0: the default)
	Chunk int  // tokens per streamed chunk (0: the faux provider's 3 to 5)
	// Budget is the root's tool call budget in virtual ms (pi.tool.budget;
	// 0: the default), which a bash call waits for its job.
	Budget int
	// Turns, Queries, Calls, Tokens and WallMs are the session's budget
	// limits (DESIGN §11; agent.BudgetLimits): model turns, provider
	// queries, tool calls, output tokens and virtual ms since the first
	// counted use, across every conversation and every clear (0: no
	// limit).
	Turns, Queries, Calls, Tokens, WallMs int
	// Price is what the faux provider charges, in units of PriceUnit
	// dollars a token: a cached read costs Price, an input token twice
	// that, a token written to the cache three times and an output token
	// eight times (0: the reference's provider, whose answers cost
	// nothing). Spend is the session's spend limit in the same units (0:
	// none). Units of a power of two keep every cost and sum exact.
	Price, Spend int
	Lines        []Line
}

// PriceUnit is the dollars one unit of Price and Spend is: 2^-20, about a
// millionth.
const PriceUnit = 1.0 / (1 << 20)

// Line is one line: an op and its arguments.
type Line struct {
	Op   string
	Args []string
}

// Arity is each op's argument count bounds: min, max.
var Arity = map[string][2]int{
	"respond":       {1, 3},
	"accept":        {2, 3},
	"followup":      {2, 2},
	"steer":         {2, 2},
	"next-run":      {2, 2},
	"write":         {2, 2},
	"cancel-queued": {2, 2},
	"abort":         {1, 1},
	"abort-task":    {1, 1},
	"fork":          {2, 4},
	"watch":         {1, 1},
	"watch-session": {0, 0},
	"unwatch":       {1, 1},
	"resnapshot":    {1, 1},
	"drive":         {1, 1},
	"prompt":        {2, 2},
	"tx":            {2, TxWritesMax + 1},
	"shape":         {2, 2},
	"drive-async":   {1, 1},
	"sleep":         {1, 1},
	"reopen":        {0, 0},
	"shutdown":      {0, 0},
	"collapse":      {1, 2},
	"reset":         {1, 2},
	"delete":        {1, 1},
	"job":           {1, 5},
	"wait-job":      {1, 1},
	"drive-for":     {2, 2},
	"process":       {2, 1000},
	"spawn":         {2, 3},
	"boundary":      {2, 3},
	"entry":         {2, 2},
	"edit":          {3, 3},
	"value":         {4, 5},
	"list":          {4, 5},
	"hook":          {2, 3},
	"settings":      {4, 4},
	"unhook":        {1, 1},
}

// ChildInputOps are the ops that give input to a conversation and may
// name cN/child: the newest child conversation a task of cN made (a
// subagent's), which the program cannot name otherwise.
var ChildInputOps = []string{"accept", "followup", "steer", "next-run", "write"}

// ResponseKinds are what respond takes.
var ResponseKinds = []string{"text", "calls", "rate-limited", "deferred", "overflow", "fail", "aborted", "slow"}

// ProgramError is a program that does not parse, naming its line.
type ProgramError struct {
	Line   int
	Reason string
}

func (e *ProgramError) Error() string { return fmt.Sprintf("program line %d: %s", e.Line, e.Reason) }

// String prints the program; Parse reads it back.
func (p *Program) String() string {
	var b strings.Builder
	b.WriteString(Magic + "\n")
	fmt.Fprintf(&b, "swarm tail=%d shell=%v queue=%d retry=%d chunk=%d", p.Tail, p.Shell, p.Queue, p.Retry, p.Chunk)
	if p.Budget != 0 {
		fmt.Fprintf(&b, " budget=%d", p.Budget)
	}
	opts := p.intOptions()
	for _, k := range []string{"turns", "queries", "calls", "tokens", "wall", "price", "spend"} {
		if n := *opts[k]; n != 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
		}
	}
	b.WriteByte('\n')
	for _, l := range p.Lines {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func (l Line) String() string {
	parts := []string{l.Op}
	for _, a := range l.Args {
		if NeedsQuote(a) {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// NeedsQuote reports whether an argument must be printed quoted to read
// back as one token: empty, or holding a space, a quote, a backslash or
// anything unprintable.
func NeedsQuote(a string) bool {
	if a == "" {
		return true
	}
	for _, r := range a {
		if r == ' ' || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return true
		}
	}
	return false
}

// Parse reads a printed program, refusing anything it does not know with
// a ProgramError naming the line. Blank lines and lines starting with #
// are comments.
func Parse(text string) (*Program, error) {
	sc := bufio.NewScanner(strings.NewReader(text))
	p := &Program{Tail: 1}
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case n == 1:
			if line != Magic {
				return nil, &ProgramError{1, fmt.Sprintf("%q: want %q", line, Magic)}
			}
			continue
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		}
		toks, err := tokens(line)
		if err != nil {
			return nil, &ProgramError{n, err.Error()}
		}
		if toks[0] == "swarm" {
			if err := p.swarm(toks[1:]); err != nil {
				return nil, &ProgramError{n, err.Error()}
			}
			continue
		}
		l := Line{Op: toks[0], Args: toks[1:]}
		if err := l.Check(); err != nil {
			return nil, &ProgramError{n, err.Error()}
		}
		p.Lines = append(p.Lines, l)
	}
	if n == 0 {
		return nil, &ProgramError{1, "empty program"}
	}
	return p, sc.Err()
}

// intOptions are the swarm's numeric options, by key.
func (p *Program) intOptions() map[string]*int {
	return map[string]*int{"queue": &p.Queue, "retry": &p.Retry, "chunk": &p.Chunk, "budget": &p.Budget,
		"turns": &p.Turns, "queries": &p.Queries, "calls": &p.Calls, "tokens": &p.Tokens, "wall": &p.WallMs,
		"price": &p.Price, "spend": &p.Spend}
}

func (p *Program) swarm(opts []string) error {
	for _, o := range opts {
		k, v, ok := strings.Cut(o, "=")
		var err error
		switch {
		case !ok:
			return fmt.Errorf("swarm option %q: want key=value", o)
		case k == "tail":
			p.Tail, err = strconv.Atoi(v)
			if err == nil && (p.Tail < 0 || p.Tail > 1000) {
				err = errors.New("want 0 to 1000")
			}
		case k == "shell":
			p.Shell, err = strconv.ParseBool(v)
		case p.intOptions()[k] != nil:
			var n int
			n, err = strconv.Atoi(v)
			switch {
			case err == nil && (n < 0 || n > 1_000_000):
				err = errors.New("want 0 to 1000000")
			case err == nil:
				*p.intOptions()[k] = n
			}
		default:
			return fmt.Errorf("unknown swarm option %q", k)
		}
		if err != nil {
			return fmt.Errorf("swarm option %s: %v", k, err)
		}
	}
	return nil
}

// tokens splits a line into words and quoted strings.
func tokens(line string) ([]string, error) {
	var out []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, fmt.Errorf("bad quoted string at %q", line)
			}
			s, _ := strconv.Unquote(q)
			out, line = append(out, s), line[len(q):]
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		out, line = append(out, word), rest
	}
	return out, nil
}

// Check validates a line's op and arguments.
func (l Line) Check() error {
	ar, ok := Arity[l.Op]
	switch {
	case !ok:
		return fmt.Errorf("unknown op %q", l.Op)
	case len(l.Args) < ar[0] || len(l.Args) > ar[1]:
		return fmt.Errorf("%s takes %d to %d arguments, not %d", l.Op, ar[0], ar[1], len(l.Args))
	}
	switch l.Op {
	case "respond":
		if !slices.Contains(ResponseKinds, l.Args[0]) {
			return fmt.Errorf("respond %q: want one of %s", l.Args[0], strings.Join(ResponseKinds, ", "))
		}
		if (l.Args[0] == "text" || l.Args[0] == "calls") && len(l.Args) != 2 {
			return fmt.Errorf("respond %s takes one argument (%s), not %d", l.Args[0], map[string]string{"text": "TEXT", "calls": "NAMES"}[l.Args[0]], len(l.Args)-1)
		}
		if l.Args[0] == "slow" {
			if len(l.Args) != 3 {
				return errors.New("respond slow takes MS and TEXT")
			}
			if _, err := strconv.Atoi(l.Args[1]); err != nil {
				return fmt.Errorf("respond slow: %v", err)
			}
		}
	case "boundary":
		if len(l.Args) == 3 {
			prov, ev, _ := strings.Cut(l.Args[2], ":")
			if !slices.Contains(BoundaryProviders, prov) {
				return fmt.Errorf("boundary provider %q: want one of %s", prov, strings.Join(BoundaryProviders, ", "))
			}
			if ev != "" && !slices.Contains(BoundaryEvents, ev) {
				return fmt.Errorf("boundary event %q: want one of %s", ev, strings.Join(BoundaryEvents, ", "))
			}
			break // the event's source is the provider's to accept
		}
		if !slices.Contains([]string{"startup", "resume", "clear", "compact", "fork"}, l.Args[0]) {
			return fmt.Errorf("boundary %q: want startup, resume, clear, compact or fork", l.Args[0])
		}
	case "process":
		if _, err := ProcessOf(l); err != nil {
			return err
		}
	case "job":
		if _, err := JobOf(l); err != nil {
			return err
		}
	case "drive-for":
		if n, err := strconv.Atoi(l.Args[1]); err != nil || n < 0 {
			return fmt.Errorf("drive-for: %q: want a number of virtual ms", l.Args[1])
		}
	case "sleep", "abort-task", "unwatch", "resnapshot", "wait-job":
		if _, err := strconv.Atoi(l.Args[0]); err != nil {
			return fmt.Errorf("%s: %v", l.Op, err)
		}
	case "cancel-queued", "fork", "entry", "edit":
		if _, err := strconv.Atoi(l.Args[1]); err != nil {
			return fmt.Errorf("%s: %v", l.Op, err)
		}
		if l.Op == "edit" && l.Args[2] != "omit" && l.Args[2] != "replace" {
			return fmt.Errorf("edit: third argument %q: want omit or replace", l.Args[2])
		}
		if l.Op == "fork" {
			if _, _, err := ForkOf(l); err != nil {
				return err
			}
		}
	case "value", "list":
		if err := checkState(l); err != nil {
			return err
		}
	case "tx":
		if _, err := TxOf(l); err != nil {
			return err
		}
	case "shape":
		if n, err := strconv.Atoi(l.Args[1]); err != nil || n < 1 || n > ShapeStepsMax {
			return fmt.Errorf("shape: steps %q: want 1 to %d", l.Args[1], ShapeStepsMax)
		}
	case "settings":
		if !slices.Contains(SettingsKinds, l.Args[1]) {
			return fmt.Errorf("settings: kind %q: want one of %s", l.Args[1], strings.Join(SettingsKinds, ", "))
		}
		if !json.Valid([]byte(l.Args[3])) {
			return fmt.Errorf("settings: value %q is not JSON", l.Args[3])
		}
	case "hook":
		if err := checkHook(l); err != nil {
			return err
		}
	case "unhook":
		if _, err := strconv.Atoi(l.Args[0]); err != nil {
			return fmt.Errorf("unhook: %v", err)
		}
	case "accept":
		if len(l.Args) == 3 && !strings.HasPrefix(l.Args[2], "req=") {
			return fmt.Errorf("accept: third argument %q: want req=ID", l.Args[2])
		}
	}
	if !slices.Contains([]string{"respond", "sleep", "abort-task", "unwatch", "resnapshot", "job", "boundary", "process", "wait-job", "value", "list", "tx", "hook", "unhook"}, l.Op) && len(l.Args) > 0 {
		conv := l.Args[0]
		if slices.Contains(ChildInputOps, l.Op) {
			conv = strings.TrimSuffix(conv, "/child")
		}
		if _, err := ConvIndex(conv); err != nil {
			return err
		}
	}
	return nil
}

// BoundaryProviders and BoundaryEvents are what a boundary line's third
// argument may name: boundary SOURCE ID [PROVIDER[:EVENT]] delivers
// PROVIDER's lifecycle event (a session start unless EVENT says end,
// precompact, postcompact or precompress) with SOURCE as its source,
// reason or trigger, for provider session ID; without it, a Claude
// session start.
var (
	BoundaryProviders = []string{"claude", "codex", "gemini", "copilot", "generic"}
	BoundaryEvents    = []string{"start", "end", "precompact", "postcompact", "precompress"}
)

// HookEffects are what a hook line's handler does: section adds a system
// section of its own (system_instructions); drop:TOOL and describe:TOOL
// take a tool out of the tools merged so far or give it a description of
// the hook's (system_instructions, which then names the tools); block:TOOL
// refuses every call of the tool, and args:TOOL adds the hook's number to
// the list "hooks" in the arguments of each (before_tool; to other tools'
// calls it answers with an output that changes nothing); decline, summary and
// instruct decline a collapse, supply its summary, or give the summarizer
// instructions of the hook's (before_collapse); request adds a user
// message of the hook's to the end of a generation's request
// (before_request); observe notes each response a generation's model gave
// (after_response); fail has a handler fail at every point that reports
// and skips a failure (system_instructions, before_request,
// after_response, after_tool, before_collapse) and at before_tool, where
// the failure blocks the call.
//
//	hook TARGET EFFECT [subtree]
//	unhook N
//
// TARGET is session (every conversation), a conversation, or cN/child,
// the newest conversation a task of cN made (a subagent tool's child),
// and subtree extends a conversation's hook to the conversations it owns
// (never to its forks). The Nth hook line registers hook N (from 1), which names its
// section and describes its tool after itself. unhook N removes the Nth of
// the hooks still registered, taken modulo how many. Hooks are the host
// process's: a reopened session has its host register them again.
var HookEffects = []string{"section", "drop", "describe", "block", "args", "decline", "summary", "instruct", "request", "observe", "fail"}

// HookNamesTool reports whether a hook effect names a tool.
func HookNamesTool(effect string) bool {
	return effect == "drop" || effect == "describe" || effect == "block" || effect == "args"
}

// checkHook validates a hook line: hook TARGET EFFECT [subtree].
func checkHook(l Line) error {
	if l.Args[0] != "session" {
		if _, err := ConvIndex(strings.TrimSuffix(l.Args[0], "/child")); err != nil {
			return fmt.Errorf("hook: target %q: want session, a conversation or a conversation's /child", l.Args[0])
		}
	}
	effect, tool, named := strings.Cut(l.Args[1], ":")
	switch {
	case !slices.Contains(HookEffects, effect):
		return fmt.Errorf("hook: effect %q: want one of %v, with :TOOL after drop, describe, block and args", l.Args[1], HookEffects)
	case HookNamesTool(effect) != named || named && tool == "":
		return fmt.Errorf("hook: effect %q: drop, describe, block and args name a tool; section, decline, summary, instruct, request, observe and fail none", l.Args[1])
	case len(l.Args) == 3 && l.Args[2] != "subtree":
		return fmt.Errorf("hook: third argument %q: want subtree", l.Args[2])
	case len(l.Args) == 3 && l.Args[0] == "session":
		return errors.New("hook: a session hook has no subtree; it applies everywhere")
	}
	return nil
}

// SettingsKinds are the kinds whose configuration a settings line writes
// through its typed view (§5.2), then reads back whole:
//
//	settings CONV KIND NAME JSON
var SettingsKinds = []string{"generation", "collapse"}

// StateOps are what a value line and a list line do, each with whether
// it takes an argument: a value is set to JSON or deleted; a list gets a
// JSON element appended, its Nth visible element removed, or is cleared.
var StateOps = map[string]map[string]bool{
	"value": {"set": true, "delete": false},
	"list":  {"append": true, "remove": true, "clear": false},
}

// Carried is a conversation value a fork line carries into the fork
// (ForkOptions.Values): its name, NS or NS/KEY, and its policy.
type Carried struct {
	Name   string
	Rewind bool
}

// ForkOf reads a fork line's options after its entry: abort, and
// carry=NS[/KEY]:POLICY,... (POLICY rewind or sticky), each at most once,
// in either order.
func ForkOf(l Line) (abort bool, carry []Carried, err error) {
	for _, a := range l.Args[2:] {
		list, isCarry := strings.CutPrefix(a, "carry=")
		switch {
		case a == "abort" && !abort:
			abort = true
		case isCarry && carry == nil:
			for _, v := range strings.Split(list, ",") {
				name, policy, _ := strings.Cut(v, ":")
				if ns, _, _ := strings.Cut(name, "/"); ns == "" || policy != "rewind" && policy != "sticky" {
					return false, nil, fmt.Errorf("fork: carried value %q: want NS[/KEY]:rewind or NS[/KEY]:sticky", v)
				}
				carry = append(carry, Carried{Name: name, Rewind: policy == "rewind"})
			}
		default:
			return false, nil, fmt.Errorf("fork: argument %q: want abort or carry=NS[/KEY]:POLICY,..., each once", a)
		}
	}
	return abort, carry, nil
}

// checkState validates a value or list line: TARGET NS[/KEY] POLICY OP
// [ARG], TARGET session or cN, POLICY rewind or sticky.
func checkState(l Line) error {
	if l.Args[0] != "session" {
		if _, err := ConvIndex(l.Args[0]); err != nil {
			return fmt.Errorf("%s: target %v: want session or a conversation", l.Op, err)
		}
	}
	if ns, _, _ := strings.Cut(l.Args[1], "/"); ns == "" {
		return fmt.Errorf("%s: %q names no namespace", l.Op, l.Args[1])
	}
	if l.Args[2] != "rewind" && l.Args[2] != "sticky" {
		return fmt.Errorf("%s: policy %q: want rewind or sticky", l.Op, l.Args[2])
	}
	takes, ok := StateOps[l.Op][l.Args[3]]
	switch {
	case !ok:
		return fmt.Errorf("%s: op %q: want one of %s", l.Op, l.Args[3], strings.Join(slices.Sorted(maps.Keys(StateOps[l.Op])), ", "))
	case takes != (len(l.Args) == 5):
		return fmt.Errorf("%s %s: takes %d arguments after the op, not %d", l.Op, l.Args[3], b2i(takes), len(l.Args)-4)
	case l.Args[3] == "remove":
		if _, err := strconv.Atoi(l.Args[4]); err != nil {
			return fmt.Errorf("list remove: %v", err)
		}
	case takes && !json.Valid([]byte(l.Args[4])):
		return fmt.Errorf("%s %s: %q is not JSON", l.Op, l.Args[3], l.Args[4])
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Nth is the index a line's number n picks among length things (length
// > 0): n modulo length, so any number picks one, a negative one counting
// back from the end (-1 the last).
func Nth(n, length int) int {
	return (n%length + length) % length
}

// ConvIndex reads "cN", the Nth conversation the program knows (c0 is the
// root, then forks and spawned children in the order they were made;
// c-1 the newest, c-2 the one before it), to be picked with Nth.
func ConvIndex(a string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(a, "c"))
	if !strings.HasPrefix(a, "c") || err != nil || strings.HasPrefix(a, "c+") {
		return 0, fmt.Errorf("%q is not a conversation (c0, c1, …, or c-1 the newest)", a)
	}
	return n, nil
}

// Process is a fake process a program declares (a process line): the
// exact command line it answers, its output chunks in order, and how it
// ends: with ExitCode, or, with Hang, never on its own (until killed).
type Process struct {
	Command string
	Chunks  []ProcessChunk
	// EndAfterMs is the virtual time after the last chunk (or the start)
	// before the process exits.
	EndAfterMs int
	ExitCode   int
	Hang       bool
	// TrapMs is how long the process runs on after it is killed (as one
	// that traps the signal), emitting what falls due meanwhile.
	TrapMs int
}

// ProcessChunk is one piece of a process's output, AfterMs virtual
// milliseconds after the previous one (or the start).
type ProcessChunk struct {
	AfterMs int
	Stream  string // "stdout" or "stderr"
	Data    string
}

// ProcessOf reads a process line:
//
//	process COMMAND STEP… END
//
// where each STEP is `wait MS` (virtual ms before the next chunk), `out
// TEXT` or `err TEXT` (a chunk on stdout or stderr), `repeat N TEXT` (one
// stdout chunk of TEXT N times) or `trap MS` (once killed it runs on MS
// virtual ms, anywhere in the line), and END, the last word, is `exit N`
// or `hang` (it runs until killed).
func ProcessOf(l Line) (Process, error) {
	p := Process{Command: l.Args[0]}
	if strings.TrimSpace(p.Command) == "" {
		return p, errors.New("process: an empty command")
	}
	bad := func(format string, args ...any) (Process, error) {
		return Process{}, fmt.Errorf("process %q: "+format, append([]any{p.Command}, args...)...)
	}
	args := l.Args[1:]
	wait := 0
	ended := false
	for i := 0; i < len(args); i++ {
		if ended {
			return bad("%q after the end (exit N or hang is the last step)", args[i])
		}
		need := func(n int) bool { return i+n < len(args) }
		switch step := args[i]; step {
		case "trap":
			if !need(1) {
				return bad("trap takes a number")
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 0 || n > 86_400_000 {
				return bad("trap %q: want 0 to 86400000 virtual ms", args[i+1])
			}
			p.TrapMs = n
			i++
		case "wait", "exit":
			if !need(1) {
				return bad("%s takes a number", step)
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || (step == "wait" && (n < 0 || n > 86_400_000)) || (step == "exit" && (n < 0 || n > 255)) {
				return bad("%s %q: want %s", step, args[i+1], map[string]string{"wait": "0 to 86400000 virtual ms", "exit": "an exit code 0 to 255"}[step])
			}
			i++
			if step == "wait" {
				wait += n
			} else {
				p.ExitCode, ended = n, true
			}
		case "out", "err":
			if !need(1) {
				return bad("%s takes a TEXT", step)
			}
			stream := map[string]string{"out": "stdout", "err": "stderr"}[step]
			p.Chunks = append(p.Chunks, ProcessChunk{AfterMs: wait, Stream: stream, Data: args[i+1]})
			wait = 0
			i++
		case "repeat":
			if !need(2) {
				return bad("repeat takes N and TEXT")
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 1 || n > 1_000_000 || len(args[i+2])*n > 4<<20 {
				return bad("repeat %q: want 1 to 1000000 copies, at most 4 MiB in all", args[i+1])
			}
			p.Chunks = append(p.Chunks, ProcessChunk{AfterMs: wait, Stream: "stdout", Data: strings.Repeat(args[i+2], n)})
			wait = 0
			i += 2
		case "hang":
			p.Hang, ended = true, true
		default:
			return bad("unknown step %q: want wait MS, out TEXT, err TEXT, repeat N TEXT, trap MS, exit N or hang", step)
		}
	}
	switch {
	case !ended:
		return bad("no end: the last step is exit N or hang")
	case wait != 0 && p.Hang:
		return bad("a wait before hang waits for nothing")
	}
	p.EndAfterMs = wait
	return p, nil
}

// Job is a job line's start: its command, its interval (0: once), how
// long after the start its first run is due (0: at once), its catch-up
// policy ("" for the default), and whether it is safe to run again after a
// restart.
type Job struct {
	Cmd          string
	Every, After time.Duration
	CatchUp      string
	Rerun        bool
}

// JobOf reads a job line: job CMD [every=MS] [after=MS] [catchup=once|skip]
// [rerun], the options in any order, each once.
func JobOf(l Line) (Job, error) {
	j := Job{Cmd: l.Args[0]}
	seen := map[string]bool{}
	for _, a := range l.Args[1:] {
		k, v, _ := strings.Cut(a, "=")
		if seen[k] {
			return Job{}, fmt.Errorf("job: %q given twice", k)
		}
		seen[k] = true
		ms := func() (time.Duration, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("job: %q: want %s=MS with MS a positive number", a, k)
			}
			return time.Duration(n) * time.Millisecond, nil
		}
		var err error
		switch {
		case a == "rerun":
			j.Rerun = true
		case k == "every":
			j.Every, err = ms()
		case k == "after":
			j.After, err = ms()
		case k == "catchup" && (v == "once" || v == "skip"):
			j.CatchUp = v
		default:
			return Job{}, fmt.Errorf("job: argument %q: want every=MS, after=MS, catchup=once|skip or rerun", a)
		}
		if err != nil {
			return Job{}, err
		}
	}
	if j.CatchUp != "" && j.Every == 0 {
		return Job{}, fmt.Errorf("job: catchup=%s without every=MS", j.CatchUp)
	}
	return j, nil
}

// ShapeStepsMax bounds a shape line's steps.
const ShapeStepsMax = 100

// TxWritesMax bounds a tx line's writes; TxFillMax bounds one fill.
const (
	TxWritesMax = 32
	TxFillMax   = 40
)

// TxWrite is one write of a tx line, VERB[:NS[/KEY]:POLICY[:ARG]]:
//
//	set:NS[/KEY]:POLICY:JSON   a value set
//	del:NS[/KEY]:POLICY        a value deleted
//	add:NS[/KEY]:POLICY:JSON   a list element appended
//	fill:NS[/KEY]:POLICY:N     N elements appended (1 to TxFillMax)
//	rm:NS[/KEY]:POLICY:N       the Nth element of the list as the commit sees it removed
//	clr:NS[/KEY]:POLICY        a list cleared
//	rerm:NS[/KEY]:POLICY       the element the commit removed last removed again
//	note                       a notice entry in the target conversation
//
// POLICY is rewind or sticky, the target's state (the session's, or the
// conversation's), or session: the session's own (sticky) state from any
// target, so that a conversation's commit writes session state too.
type TxWrite struct {
	Verb, Name, Policy, Arg string
}

// TxVerbs are what a tx line's writes do, each with whether it takes an
// argument.
var TxVerbs = map[string]bool{"set": true, "del": false, "add": true, "fill": true, "rm": true, "clr": false, "rerm": false, "note": false}

// List reports whether the write is one of a list's.
func (w TxWrite) List() bool { return w.Verb != "set" && w.Verb != "del" && w.Verb != "note" }

func (w TxWrite) String() string {
	if w.Verb == "note" {
		return w.Verb
	}
	s := w.Verb + ":" + w.Name + ":" + w.Policy
	if w.Arg != "" {
		s += ":" + w.Arg
	}
	return s
}

// TxOf parses a tx line, TARGET WRITE..., TARGET session or cN: a host's
// own commit of several state writes (and notices) at once, which lands
// whole or not at all. A note needs a conversation.
func TxOf(l Line) ([]TxWrite, error) {
	if l.Args[0] != "session" {
		if _, err := ConvIndex(l.Args[0]); err != nil {
			return nil, fmt.Errorf("tx: target %v: want session or a conversation", err)
		}
	}
	var out []TxWrite
	for i, tok := range l.Args[1:] {
		parts := strings.SplitN(tok, ":", 4)
		w := TxWrite{Verb: parts[0]}
		takes, ok := TxVerbs[w.Verb]
		switch {
		case !ok:
			return nil, fmt.Errorf("tx write %d %q: verb %q: want one of %s", i+1, tok, w.Verb, strings.Join(slices.Sorted(maps.Keys(TxVerbs)), ", "))
		case w.Verb == "note" && len(parts) != 1:
			return nil, fmt.Errorf("tx write %d %q: note takes nothing", i+1, tok)
		case w.Verb == "note" && l.Args[0] == "session":
			return nil, fmt.Errorf("tx write %d %q: a note needs a conversation, not the session", i+1, tok)
		case w.Verb == "note":
			out = append(out, w)
			continue
		case len(parts) < 3:
			return nil, fmt.Errorf("tx write %d %q: want %s:NS[/KEY]:POLICY", i+1, tok, w.Verb)
		}
		w.Name, w.Policy = parts[1], parts[2]
		if len(parts) == 4 {
			w.Arg = parts[3]
		}
		if ns, _, _ := strings.Cut(w.Name, "/"); ns == "" {
			return nil, fmt.Errorf("tx write %d %q: %q names no namespace", i+1, tok, w.Name)
		}
		if w.Policy != "rewind" && w.Policy != "sticky" && w.Policy != "session" {
			return nil, fmt.Errorf("tx write %d %q: policy %q: want rewind, sticky or session", i+1, tok, w.Policy)
		}
		switch {
		case takes != (len(parts) == 4):
			return nil, fmt.Errorf("tx write %d %q: %s takes %d arguments after the policy, not %d", i+1, tok, w.Verb, b2i(takes), len(parts)-3)
		case w.Verb == "fill":
			if n, err := strconv.Atoi(w.Arg); err != nil || n < 1 || n > TxFillMax {
				return nil, fmt.Errorf("tx write %d %q: fill %q: want 1 to %d elements", i+1, tok, w.Arg, TxFillMax)
			}
		case w.Verb == "rm":
			if _, err := strconv.Atoi(w.Arg); err != nil {
				return nil, fmt.Errorf("tx write %d %q: rm: %v", i+1, tok, err)
			}
		case takes && !json.Valid([]byte(w.Arg)):
			return nil, fmt.Errorf("tx write %d %q: %q is not JSON", i+1, tok, w.Arg)
		}
		out = append(out, w)
	}
	return out, nil
}
