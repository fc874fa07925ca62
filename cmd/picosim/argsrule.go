package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The typed tool takes parameters a model can get wrong in many ways: a
// schema with required members, closed properties, ranges, lengths, a
// pattern, an enum, an array of integers, a nested object and a member
// whose name a JSON pointer must escape. Its calls' arguments come from a
// recipe (typedArgs), about half of them valid, so that a run's calls meet
// the validation of §8.3 before they run. A program's answers name its
// calls typed:RECIPE; a run registers it only when its program calls it.
//
// The arguments rule holds a call to its arguments, judged by hand
// (typedFailures) rather than by the validator the harness uses:
//
//   - a call whose arguments fail the schema never runs (is never patched
//     running, and the tool never sees them);
//   - its execute, when it finds the call offered, settles it with an
//     error "invalid arguments for typed: " naming every failing location
//     as a JSON pointer into the arguments ("at /items/1: ..."), each once,
//     in order, or saying the arguments are not an object;
//   - a call whose arguments satisfy the schema is never refused as
//     invalid.

// typedTool is the typed tool's name.
const typedTool = "typed"

// typedSchema is the typed tool's parameters.
var typedSchema = json.RawMessage(`{"type":"object",
"properties":{
  "n":{"type":"integer","minimum":0,"maximum":99},
  "tag":{"type":"string","minLength":1,"maxLength":8,"pattern":"^[a-z]+$"},
  "mode":{"enum":["fast","slow"]},
  "items":{"type":"array","items":{"type":"integer"},"maxItems":3},
  "opt":{"type":"object","properties":{"deep":{"type":"boolean"}},"required":["deep"]},
  "a/b~c":{"type":"integer"}},
"required":["n","tag"],
"additionalProperties":false}`)

// ruleArgs: a call runs only with arguments its tool's schema accepts, and
// is refused, naming where, otherwise.
const ruleArgs oracleRule = "a-call-runs-only-with-valid-arguments"

// typedMember is how one member of a recipe's arguments is drawn: its
// valid values, and its invalid ones.
type typedMember struct {
	name           string
	valid, invalid []string
}

var typedMembers = []typedMember{
	{"n", []string{"0", "7", "42", "99", "5.0", "1e1"}, []string{"-1", "100", "1.5", `"3"`, "null", "1e3", "true"}},
	{"tag", []string{`"a"`, `"abc"`, `"abcdefgh"`, `"zz"`}, []string{`""`, `"abcdefghi"`, `"AB"`, `"a b"`, "5", `["a"]`, `"ab1"`}},
	{"mode", []string{`"fast"`, `"slow"`}, []string{`"medium"`, `"FAST"`, "1", "null", `["fast"]`}},
	{"items", []string{"[]", "[1]", "[1,2,3]", "[0,-4]"}, []string{"[1,2,3,4]", `[1,"x"]`, "[1.5]", `"1,2"`, "{}", `[1,2,"a",4]`}},
	{"opt", []string{`{"deep":true}`, `{"deep":false}`, `{"deep":true,"more":1}`}, []string{"{}", `{"deep":"yes"}`, "[]", `"deep"`, `{"deep":null}`}},
	{"a/b~c", []string{"3", "-8"}, []string{`"s"`, "1.5", "{}"}},
}

// typedArgs is recipe n's arguments, from a generator of their own: each
// member absent, valid or (one time in ten) invalid, the required ones
// present nine times in ten, now and then a member the schema does not
// name, in a drawn order. Always an object: a provider delivers a call's
// arguments as one (the faux refuses anything else, as the reference's
// stream parser does), though the rule also reads a refusal of arguments
// that are not.
func typedArgs(n int) string {
	rng := seededRNG(uint64(n), "typed")
	var members []string
	for _, m := range typedMembers {
		required := m.name == "n" || m.name == "tag"
		switch {
		case rng.IntN(10) == 0:
			members = append(members, fmt.Sprintf("%q:%s", m.name, m.invalid[rng.IntN(len(m.invalid))]))
		case required && rng.IntN(10) != 0, !required && rng.IntN(2) == 0:
			members = append(members, fmt.Sprintf("%q:%s", m.name, m.valid[rng.IntN(len(m.valid))]))
		}
	}
	if rng.IntN(10) == 0 {
		members = append(members, []string{`"extra":true`, `"N":1`, `"":0`}[rng.IntN(3)])
	}
	rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, ",") + "}"
}

// typedNotObject is the verdict on arguments that are no object.
const typedNotObject = "not an object"

// typedFailures is where raw fails the typed tool's schema, judged by
// hand: the JSON pointers of the failing locations, sorted, each once;
// [typedNotObject] when raw is no object; none when raw is valid.
func typedFailures(raw json.RawMessage) []string {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return []string{typedNotObject}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return []string{typedNotObject}
	}
	var at []string
	fail := func(ptr string) { at = append(at, ptr) }
	if _, ok := obj["n"]; !ok {
		fail("/")
	}
	if _, ok := obj["tag"]; !ok {
		fail("/")
	}
	for name, val := range obj {
		switch name {
		case "n":
			if n, ok := integer(val); !ok || n.Sign() < 0 || n.Cmp(big.NewRat(99, 1)) > 0 {
				fail("/n")
			}
		case "tag":
			if s, ok := val.(string); !ok || len(s) < 1 || len(s) > 8 || !regexp.MustCompile(`^[a-z]+$`).MatchString(s) {
				fail("/tag")
			}
		case "mode":
			if val != "fast" && val != "slow" {
				fail("/mode")
			}
		case "items":
			items, ok := val.([]any)
			if !ok || len(items) > 3 {
				fail("/items")
			}
			for i, it := range items {
				if _, ok := integer(it); !ok {
					fail(fmt.Sprintf("/items/%d", i))
				}
			}
		case "opt":
			o, ok := val.(map[string]any)
			if !ok {
				fail("/opt")
				break
			}
			deep, has := o["deep"]
			if !has {
				fail("/opt")
			} else if _, ok := deep.(bool); !ok {
				fail("/opt/deep")
			}
		case "a/b~c":
			if _, ok := integer(val); !ok {
				fail("/a~1b~0c")
			}
		default:
			fail("/") // additionalProperties
		}
	}
	slices.Sort(at)
	return slices.Compact(at)
}

// integer is v as a rational when it is a JSON number with no fraction.
func integer(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	return r, ok && r.IsInt()
}

// invalidArgsPrefix begins the error of a call refused for its arguments.
func invalidArgsPrefix(tool string) string { return "invalid arguments for " + tool + ": " }

// refusalAt reads the failures an invalid-arguments error names, after
// its prefix: [typedNotObject] for arguments it says are no object, else
// the pointers of its "at POINTER: ..." parts, each as often as it
// appears; ordered reports whether the parts are in order, each once.
func refusalAt(text string) (at []string, ordered bool) {
	if strings.HasPrefix(text, "arguments are ") && strings.HasSuffix(text, ", not an object") {
		return []string{typedNotObject}, true
	}
	starts := refusalPart.FindAllStringIndex(text, -1)
	if len(starts) == 0 || starts[0][0] != 0 {
		return nil, false
	}
	var parts []string
	for i, s := range starts {
		end := len(text)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		part := strings.TrimPrefix(text[s[0]:end], "; ")
		parts = append(parts, part)
		ptr, _, _ := strings.Cut(strings.TrimPrefix(part, "at "), ": ")
		at = append(at, ptr)
	}
	ordered = slices.IsSorted(parts) && len(slices.Compact(slices.Clone(parts))) == len(parts)
	return at, ordered
}

// refusalPart finds where each part of a refusal starts.
var refusalPart = regexp.MustCompile(`(^|; )at /[^ :]*: `)

// typedCalls reports whether a program's answers call the typed tool.
func (p *program) typedCalls() bool {
	for _, l := range p.lines {
		if l.op == "respond" && len(l.args) > 1 && l.args[0] == "calls" && strings.Contains(l.args[1], typedTool+":") {
			return true
		}
	}
	return false
}

// typedToolFor is the typed tool, recording that it ran as the echo tools
// do, and failing the run when the arguments it is given are invalid.
func (e *env) typedToolFor() agent.Tool {
	return agent.Tool{
		Definition: ai.Tool{Name: typedTool, Description: "takes typed arguments", Parameters: typedSchema},
		Replay:     agent.ReplaySafe,
		Execute: func(ctx context.Context, call string, args json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			e.ran(typedTool, call, rt.TaskID(), agent.ReplaySafe)
			if at := typedFailures(args); len(at) > 0 {
				return e.oracle.fail(broke(ruleArgs, "tool %s ran call %s with arguments %s, which fail at %v", typedTool, call, args, at))
			}
			out.Write("typed " + string(args))
			return nil
		},
	}
}

// typedCall notes a typed call's verdict when its task is made.
func (o *oracle) typedCall(task storage.ID, call ai.Block) {
	if call.Name == typedTool {
		o.typedAt[task] = typedFailures(call.Arguments)
	}
}

// argsCall holds a typed call's write to the arguments rule: the commit
// that runs it, and the one that settles it.
func (o *oracle) argsCall(inv core.Invocation, ok bool, w storage.Write, by string, seq storage.ID) error {
	at, known := o.typedAt[w.ID]
	if !known {
		return nil
	}
	switch {
	case w.Type == storage.WritePatch && w.Status == "running":
		if len(at) > 0 {
			return o.fail(broke(ruleArgs, "%s ran call task %d of %s at %d; its arguments fail at %v", by, w.ID, typedTool, seq, at))
		}
		return nil
	case w.Type != storage.WriteSettle:
		return nil
	}
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil {
		return nil
	}
	text := outputText(st.Output)
	reason, refused := strings.CutPrefix(text, invalidArgsPrefix(typedTool))
	switch {
	case refused && len(at) == 0:
		return o.fail(broke(ruleArgs, "%s refused call task %d of %s at %d as invalid (%q); its arguments are valid", by, w.ID, typedTool, seq, reason))
	case refused:
		got, ordered := refusalAt(reason)
		slices.Sort(got)
		if !ordered || !slices.Equal(slices.Compact(got), at) || !st.Output.IsError {
			return o.fail(broke(ruleArgs, "%s refused call task %d of %s at %d with %q (an error: %v); its arguments fail at %v, each named once, in order",
				by, w.ID, typedTool, seq, reason, st.Output.IsError, at))
		}
	case len(at) > 0 && ok && inv.Task == w.ID && inv.Method == core.MethodExecute && o.hooks.offered[w.ID] &&
		!strings.Contains(text, "is not available") && !strings.Contains(text, "was not offered"):
		return o.fail(broke(ruleArgs, "%s settled call task %d of %s at %d with %q; its arguments fail at %v, so its execute refuses it", by, w.ID, typedTool, seq, text, at))
	}
	return nil
}

// typedSeeds is how often a drawn program's model also calls the typed
// tool: every fifth seed from 3, not the golden traces' seed 1.
const typedSeeds = 5

// drawTypedCalls gives the model of every typedSeeds-th seed's program one
// to three answers that call the typed tool once to three times, from a
// generator of their own, among its other answers.
func drawTypedCalls(p *program, seed uint64) {
	if seed%typedSeeds != 3 {
		return
	}
	rng := seededRNG(seed, "typed calls")
	for range 1 + rng.IntN(3) {
		var names []string
		for range 1 + rng.IntN(3) {
			names = append(names, fmt.Sprintf("%s:%d", typedTool, rng.IntN(10000)))
		}
		l := progLine{op: "respond", args: []string{"calls", strings.Join(names, ",")}}
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), l) // before the final drive
	}
}
