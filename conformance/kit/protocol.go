package kit

import (
	"encoding/json"
	"fmt"
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
	// action: its index among the scenario's actions, its op and
	// arguments as the program line has them, and the line.
	Index int      `json:"index,omitempty"`
	Op    string   `json:"op,omitempty"`
	Args  []string `json:"args,omitempty"`
	Line  string   `json:"line,omitempty"`
}

// Swarm is the session options a scenario sets: the watches' entry tail
// and the first retry delay in milliseconds.
type Swarm struct {
	Tail    int `json:"tail"`
	RetryMs int `json:"retryMs"`
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

// Call is one tool call of a calls answer.
type Call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
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
// job needs fake processes and boundary a provider adapter, which the kit
// does not ask of a port.
var deterministicOps = map[string]bool{
	"respond": true, "accept": true, "followup": true, "steer": true, "next-run": true, "write": true,
	"cancel-queued": true, "abort": true, "abort-task": true, "fork": true, "watch": true, "unwatch": true,
	"drive": true, "reopen": true, "shutdown": true, "collapse": true, "reset": true, "spawn": true,
	"entry": true,
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
				switch tool {
				case "work":
					args = fmt.Sprintf(`{"do":%q}`, arg)
				case "subagent":
					args = fmt.Sprintf(`{"command":%q,"prompt":"look into it"}`, arg)
				}
				r.Calls = append(r.Calls, Call{ID: fmt.Sprintf("call-%d", calls), Name: tool, Arguments: json.RawMessage(args)})
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
