package kit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pico-go/pico/conformance/script"
)

// A scenario file (fixtures/scenarios/NAME.txt) is a program in the
// program language (package script), then the separator line, then the
// normalized outcome journal this implementation produced, which
// `go test ./conformance/... -update` rewrites and nothing else should.
const Separator = "---- outcome"

// Scenario is one data scenario.
type Scenario struct {
	Name    string
	Path    string
	Program *script.Program
	// Text is the file up to the separator; Expected the journal after it
	// (empty in a new file).
	Text     string
	Expected []byte
}

// ScenarioError is a scenario file the kit cannot run, naming the file and
// the line.
type ScenarioError struct {
	Path   string
	Line   int
	Reason string
}

func (e *ScenarioError) Error() string {
	return fmt.Sprintf("scenario %s:%d: %s", e.Path, e.Line, e.Reason)
}

// LoadScenarios reads every *.txt in dir, by name.
func LoadScenarios(dir string) ([]*Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("kit: no scenarios (*.txt) in %s", dir)
	}
	sort.Strings(paths)
	var out []*Scenario
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sc, err := ParseScenario(p, string(data))
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// ParseScenario reads one scenario file's text.
func ParseScenario(path, text string) (*Scenario, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".txt")
	prog, rest, found := strings.Cut(text, "\n"+Separator+"\n")
	if !found {
		if strings.HasSuffix(text, "\n"+Separator) || strings.HasSuffix(text, "\n"+Separator+"\n") {
			prog, rest = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\n"+Separator), ""
		} else {
			return nil, &ScenarioError{path, strings.Count(text, "\n") + 1, fmt.Sprintf("no %q line after the program", Separator)}
		}
	}
	prog += "\n"
	p, err := script.Parse(prog)
	var pe *script.ProgramError
	if errors.As(err, &pe) {
		return nil, &ScenarioError{path, pe.Line, pe.Reason}
	} else if err != nil {
		return nil, &ScenarioError{path, 1, err.Error()}
	}
	if p.Queue != 0 {
		return nil, &ScenarioError{path, lineOf(prog, "swarm"), "a data scenario has no watch queue bound"}
	}
	for _, l := range p.Lines {
		if !deterministicOps[l.Op] {
			return nil, &ScenarioError{path, lineOf(prog, l.String()), fmt.Sprintf("op %s depends on timing or a tool a port need not have; data scenarios use %s", l.Op, strings.Join(sortedKeys(deterministicOps), ", "))}
		}
	}
	for _, l := range p.Lines {
		if !p.Shell && (l.Op == "process" || l.Op == "job" || l.Op == "wait-job") {
			return nil, &ScenarioError{path, lineOf(prog, l.String()), fmt.Sprintf("op %s needs the shell tools: swarm shell=true", l.Op)}
		}
	}
	if !p.Shell && p.Budget != 0 {
		return nil, &ScenarioError{path, lineOf(prog, "swarm"), "a budget is for the shell tools' calls: swarm shell=true"}
	}
	if p.Turns != 0 || p.Queries != 0 || p.Calls != 0 || p.Tokens != 0 || p.WallMs != 0 || p.Spend != 0 || p.Price != 0 {
		return nil, &ScenarioError{path, lineOf(prog, "swarm"), "session limits (turns, queries, calls, tokens, wall, spend) and prices are picosim's: the port protocol does not carry them"}
	}
	_, err = responses(p)
	if err == nil {
		_, err = processes(p)
	}
	if le := (*lineError)(nil); errors.As(err, &le) {
		return nil, &ScenarioError{path, nthLineOf(prog, le.l.String(), le.nth), le.err.Error()}
	} else if err != nil {
		return nil, &ScenarioError{path, 1, err.Error()}
	}
	return &Scenario{Name: name, Path: path, Program: p, Text: prog, Expected: []byte(rest)}, nil
}

// lineOf is the line number of the first line of text that starts with
// prefix (1 when none does).
func lineOf(text, prefix string) int {
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return i + 1
		}
	}
	return 1
}

// nthLineOf is the line number of the nth line of text whose tokens print
// as line (1 when there is none).
func nthLineOf(text, line string, nth int) int {
	for i, l := range strings.Split(text, "\n") {
		if q, err := script.Parse(script.Magic + "\n" + l + "\n"); err == nil && len(q.Lines) == 1 && q.Lines[0].String() == line {
			if nth--; nth == 0 {
				return i + 1
			}
		}
	}
	return 1
}

// Requests is the scenario as the protocol carries it: the open request,
// then one action request per host-action line.
func (sc *Scenario) Requests() (Request, []Request, error) {
	rs, err := responses(sc.Program)
	if err != nil {
		return Request{}, nil, err
	}
	ps, err := processes(sc.Program)
	if err != nil {
		return Request{}, nil, err
	}
	open := Request{Type: RequestOpen, Version: ProtocolVersion, Scenario: sc.Name,
		Swarm:     &Swarm{Tail: sc.Program.Tail, RetryMs: sc.Program.Retry, Shell: sc.Program.Shell, BudgetMs: sc.Program.Budget},
		Responses: rs, Processes: ps}
	var actions []Request
	for _, l := range sc.Program.Lines {
		if l.Op == "respond" || l.Op == "process" {
			continue
		}
		actions = append(actions, Request{Type: RequestAction, Index: len(actions), Op: l.Op, Args: l.Args, Line: l.String()})
	}
	return open, actions, nil
}

// Write writes the scenario file with journal as its expected outcome.
func (sc *Scenario) Write(journal []byte) error {
	return os.WriteFile(sc.Path, []byte(sc.Text+Separator+"\n"+string(journal)), 0o644)
}
