package kit

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/pico-go/pico/conformance/script"
)

// The port protocol (fixtures/README.md): the runner starts the port as a
// child process and writes one JSON request a line on its stdin; the port
// answers every request with one JSON reply a line on its stdout, in order.
// A scenario is: open, then one action per host-action line, then outcome;
// the next scenario opens again on the same process. close ends the
// process.

// ProtocolVersion is the protocol a runner speaks; a port that speaks
// another answers open with an error.
const ProtocolVersion = 1

// Request types.
const (
	RequestOpen    = "open"
	RequestAction  = "action"
	RequestOutcome = "outcome"
	RequestClose   = "close"
)

// Request is one line the runner writes.
type Request struct {
	Type string `json:"type"`
	// open: the protocol version, the scenario's name, its swarm options
	// and the model's answers in the order calls take them.
	Version   int        `json:"version,omitempty"`
	Scenario  string     `json:"scenario,omitempty"`
	Swarm     *Swarm     `json:"swarm,omitempty"`
	Responses []Response `json:"responses,omitempty"`
	// Processes are the fake processes of a shell scenario (swarm
	// shell), by the exact command line each answers.
	Processes []Process `json:"processes,omitempty"`
	// action: its index among the scenario's actions, its op and
	// arguments as the program line has them, and the line.
	Index int      `json:"index,omitempty"`
	Op    string   `json:"op,omitempty"`
	Args  []string `json:"args,omitempty"`
	Line  string   `json:"line,omitempty"`
}

// Swarm is the session options a scenario sets: the watches' entry tail,
// the first retry delay in milliseconds, and for a shell scenario the
// shell tools (bash and job over the scenario's processes) and the root's
// tool call budget in milliseconds (0: the default).
type Swarm struct {
	Tail     int  `json:"tail"`
	RetryMs  int  `json:"retryMs"`
	Shell    bool `json:"shell,omitempty"`
	BudgetMs int  `json:"budgetMs,omitempty"`
}

// Process is one fake process of a shell scenario: the exact command line
// it answers (any other command prints "COMMAND: command not found" on
// stderr and exits 127), its output chunks, each AfterMs virtual
// milliseconds after the previous one (or the start), then EndAfterMs
// more before it exits with ExitCode — or, with Hang, it runs until it is
// killed. Killed, it dies at once, or TrapMs later (emitting what falls due
// before then, and exiting on its own if its script ends first); a killed
// process's status is 137.
type Process struct {
	Command    string         `json:"command"`
	Chunks     []ProcessChunk `json:"chunks,omitempty"`
	EndAfterMs int            `json:"endAfterMs,omitempty"`
	ExitCode   int            `json:"exitCode,omitempty"`
	Hang       bool           `json:"hang,omitempty"`
	TrapMs     int            `json:"trapMs,omitempty"`
}

// ProcessChunk is one piece of a process's output: on stdout or stderr.
type ProcessChunk struct {
	AfterMs int    `json:"afterMs,omitempty"`
	Stream  string `json:"stream"`
	Data    string `json:"data"`
}

// Response is one scripted answer of the faux model.
//
//   - text: an answer with one text block, stop reason stop;
//   - calls: an answer with one tool call block per call, stop reason toolUse;
//   - rate-limited: a retryable error ("rate limited (429)");
//   - deferred: stop reason deferred with a handle; the first fetch of the
//     handle plays the next response of the queue against the same request;
//   - overflow: a context-overflow error;
//   - fail: stop reason error, errorMessage "the provider refused";
//   - aborted: text "cut", stop reason aborted.
type Response struct {
	Kind  string `json:"kind"`
	Text  string `json:"text,omitempty"`
	Calls []Call `json:"calls,omitempty"`
}

// Call is one tool call of a calls answer. Job, when set, names the
// session's Job-th job (by creation order, modulo how many there are):
// the port puts that job's id in the arguments as "id" when the model
// plays the answer, since job ids are each implementation's own.
type Call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Job       *int            `json:"job,omitempty"`
}

// Reply is one line the port writes: ok, or an error the runner reports as
// the port's failure. unsupported (to open or an action) says the port
// cannot express the scenario, which the runner skips and reports.
type Reply struct {
	OK          bool           `json:"ok"`
	Error       string         `json:"error,omitempty"`
	Unsupported string         `json:"unsupported,omitempty"`
	Action      *ActionOutcome `json:"action,omitempty"`
	Outcome     *Outcome       `json:"outcome,omitempty"`
}

// fallbackAnswers is how many plain answers follow a scenario's scripted
// ones, so that a recovery or a subagent that calls the model once more
// than the script says still gets an answer: "answer 0", "answer 1", ….
const fallbackAnswers = 8

// deterministicOps are the ops a data scenario may use: each is applied and
// returns before the next, and only drive runs tasks, so the outcome is a
// function of the script alone. drive-async and sleep depend on timing,
// and boundary needs a provider adapter, which the kit does not ask of a
// port. The shell ops (process, job, wait-job, drive-for) run on virtual
// time: a process's output and exit, the budget a bash call waits and
// drive-for's bound are virtual milliseconds, so their order is the
// script's.
var deterministicOps = map[string]bool{
	"process": true, "job": true, "wait-job": true, "drive-for": true,
	"respond": true, "accept": true, "followup": true, "steer": true, "next-run": true, "write": true,
	"cancel-queued": true, "abort": true, "abort-task": true, "fork": true, "watch": true, "unwatch": true,
	"drive": true, "reopen": true, "shutdown": true, "collapse": true, "reset": true, "spawn": true,
	"entry": true, "value": true, "list": true,
}

// responses is the program's answers as the protocol carries them, then
// the fallback answers. Tool call ids count from call-1 across the
// program, as picosim numbers them.
func responses(p *script.Program) ([]Response, error) {
	var out []Response
	calls := 0
	for _, l := range p.Lines {
		if l.Op != "respond" {
			continue
		}
		r := Response{Kind: l.Args[0]}
		switch r.Kind {
		case "text":
			if len(l.Args) != 2 {
				return nil, fmt.Errorf("%s: respond text takes TEXT", l)
			}
			r.Text = l.Args[1]
		case "calls":
			if len(l.Args) != 2 {
				return nil, fmt.Errorf("%s: respond calls takes NAMES", l)
			}
			for _, name := range strings.Split(l.Args[1], ",") {
				calls++
				tool, arg, _ := strings.Cut(name, ":")
				args := "{}"
				var job *int
				switch tool {
				case "work":
					args = fmt.Sprintf(`{"do":%q}`, arg)
				case "subagent":
					args = fmt.Sprintf(`{"command":%q,"prompt":"look into it"}`, arg)
				case "bash":
					args = fmt.Sprintf(`{"command":%q}`, arg)
				case "job":
					command, k, ok := strings.Cut(arg, ":")
					n, err := strconv.Atoi(k)
					if !ok || err != nil || n < 0 {
						return nil, &lineError{l, 1, fmt.Errorf("a job call is job:COMMAND:K (K the session's Kth job), not %q", name)}
					}
					args, job = fmt.Sprintf(`{"command":%q}`, command), &n
				}
				r.Calls = append(r.Calls, Call{ID: fmt.Sprintf("call-%d", calls), Name: tool, Arguments: json.RawMessage(args), Job: job})
			}
		case "slow":
			return nil, fmt.Errorf("%s: a slow answer depends on time; data scenarios have none", l)
		}
		out = append(out, r)
	}
	for i := range fallbackAnswers {
		out = append(out, Response{Kind: "text", Text: fmt.Sprintf("answer %d", i)})
	}
	return out, nil
}

// processes is the program's process lines as the protocol carries them.
func processes(p *script.Program) ([]Process, error) {
	var out []Process
	seen := map[string]bool{}
	printed := map[string]int{} // how often each line was met, to name the right one
	for _, l := range p.Lines {
		if l.Op != "process" {
			continue
		}
		printed[l.String()]++
		sp, err := script.ProcessOf(l)
		if err != nil {
			return nil, &lineError{l, printed[l.String()], err}
		}
		if seen[sp.Command] {
			return nil, &lineError{l, printed[l.String()], fmt.Errorf("process %q is declared twice", sp.Command)}
		}
		seen[sp.Command] = true
		pr := Process{Command: sp.Command, EndAfterMs: sp.EndAfterMs, ExitCode: sp.ExitCode, Hang: sp.Hang, TrapMs: sp.TrapMs}
		for _, c := range sp.Chunks {
			pr.Chunks = append(pr.Chunks, ProcessChunk{AfterMs: c.AfterMs, Stream: c.Stream, Data: c.Data})
		}
		out = append(out, pr)
	}
	return out, nil
}

// lineError is an error of a program line: the nth line that prints as l.
type lineError struct {
	l   script.Line
	nth int
	err error
}

func (e *lineError) Error() string { return fmt.Sprintf("%s: %v", e.l, e.err) }
