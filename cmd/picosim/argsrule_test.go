package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The hand-written judge of the typed tool's arguments agrees with a
// maintained validator on every recipe a run may draw and on arguments
// that are no object, and the recipes are a mix: about half valid, every
// member's invalid values drawn.
func TestTypedFailuresAgreeWithAValidator(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(typedSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("typed.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("typed.json")
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	failing := map[string]bool{}
	const recipes = 5000
	notObjects := []string{"[1,2]", `"text"`, "null", "7", "true", "[]"}
	for n := range recipes + len(notObjects) {
		args := ""
		if n < recipes {
			args = typedArgs(n)
		} else {
			args = notObjects[n-recipes]
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			t.Fatalf("recipe %d: %s is not JSON: %v", n, args, err)
		}
		_, object := v.(map[string]any)
		at := typedFailures(json.RawMessage(args))
		if libValid := object && schema.Validate(v) == nil; libValid != (len(at) == 0) {
			t.Fatalf("recipe %d: %s fails at %v by hand; the validator says valid %v", n, args, at, libValid)
		}
		if len(at) == 0 {
			valid++
		}
		for _, p := range at {
			failing[p] = true
		}
	}
	if valid < recipes*3/10 || valid > recipes*7/10 {
		t.Fatalf("%d of %d recipes valid; want about half", valid, recipes)
	}
	for _, p := range []string{"/", "/n", "/tag", "/mode", "/items", "/items/1", "/opt", "/opt/deep", "/a~1b~0c", typedNotObject} {
		if !failing[p] {
			t.Errorf("no recipe fails at %s", p)
		}
	}
}

// A refusal's failures are read from its text, parts in order or not.
func TestRefusalAtReadsTheLocations(t *testing.T) {
	cases := []struct {
		text    string
		at      []string
		ordered bool
	}{
		{"at /: missing property 'tag'", []string{"/"}, true},
		{"at /a~1b~0c: got string, want integer; at /items/1: got string, want integer; at /items: maxItems: got 4, want 3",
			[]string{"/a~1b~0c", "/items/1", "/items"}, true},
		{"at /n: got boolean, want integer; at /mode: value must be one of 'fast', 'slow'", []string{"/n", "/mode"}, false},
		{"at /n: minimum; at /n: minimum", []string{"/n", "/n"}, false},
		{"arguments are array, not an object", []string{typedNotObject}, true},
		{"something else", nil, false},
	}
	for _, tc := range cases {
		at, ordered := refusalAt(tc.text)
		if !slices.Equal(at, tc.at) || ordered != tc.ordered {
			t.Errorf("refusalAt(%q) = %v, %v; want %v, %v", tc.text, at, ordered, tc.at, tc.ordered)
		}
	}
}

// A typed call runs only with valid arguments; its execute refuses one
// with invalid arguments, naming each failing location once, in order;
// valid arguments are never refused.
func TestACallRunsOnlyWithValidArguments(t *testing.T) {
	const bad = `{"n":-1,"tag":"AB","items":[1,"x"]}` // fails at /items/1, /n, /tag
	refusal := func(reason string) storage.Write {
		st, _ := json.Marshal(map[string]any{"output": agent.ToolOutputState{
			Content: []ai.Block{ai.Text(invalidArgsPrefix(typedTool) + reason)}, ToolResultData: agent.ToolResultData{IsError: true}}})
		return storage.Write{Type: storage.WriteSettle, ID: 7, Status: "done", State: st}
	}
	result := func(text string, isError bool) storage.Write {
		st, _ := json.Marshal(map[string]any{"output": agent.ToolOutputState{
			Content: []ai.Block{ai.Text(text)}, ToolResultData: agent.ToolResultData{IsError: isError}}})
		return storage.Write{Type: storage.WriteSettle, ID: 7, Status: "done", State: st}
	}
	running := storage.Write{Type: storage.WritePatch, ID: 7, Status: "running"}
	named := "at /items/1: got string, want integer; at /n: minimum: got -1, want 0; at /tag: 'AB' does not match pattern '^[a-z]+$'"
	cases := []struct {
		name    string
		args    string
		offered bool
		method  core.Method
		w       storage.Write
		broken  bool
	}{
		{name: "valid runs", args: `{"n":1,"tag":"ab"}`, offered: true, w: running},
		{name: "invalid runs", args: bad, offered: true, w: running, broken: true},
		{name: "no object runs", args: `[1]`, offered: true, w: running, broken: true},
		{name: "invalid refused naming each", args: bad, offered: true, w: refusal(named)},
		{name: "invalid refused, one location missing", args: bad, offered: true,
			w: refusal("at /items/1: got string, want integer; at /n: minimum: got -1, want 0"), broken: true},
		{name: "invalid refused out of order", args: bad, offered: true,
			w: refusal("at /n: minimum: got -1, want 0; at /items/1: got string, want integer; at /tag: 'AB' does not match pattern '^[a-z]+$'"), broken: true},
		{name: "invalid refused, a location twice", args: bad, offered: true,
			w: refusal(named + "; " + named), broken: true},
		{name: "invalid refused, not an error", args: bad, offered: true,
			w: func() storage.Write {
				w := refusal(named)
				w.State = bytes.Replace(w.State, []byte(`"isError":true`), []byte(`"isError":false`), 1)
				return w
			}(), broken: true},
		{name: "no object refused", args: `"text"`, offered: true, w: refusal("arguments are string, not an object")},
		{name: "valid refused", args: `{"n":1,"tag":"ab"}`, offered: true, w: refusal("at /n: minimum"), broken: true},
		{name: "invalid settled otherwise by its execute", args: bad, offered: true, w: result("typed ok", false), broken: true},
		{name: "invalid settled not offered", args: bad, w: result(`tool "typed" was not offered to the model`, true)},
		{name: "invalid settled by an abort", args: bad, offered: true, method: core.MethodAbort, w: result("aborted", true)},
		{name: "valid settled with its output", args: `{"n":1,"tag":"ab"}`, offered: true, w: result("typed ok", false)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			state, _ := json.Marshal(agent.ToolState{Call: ai.Block{Type: ai.BlockToolCall, ID: "c1", Name: typedTool, Arguments: json.RawMessage(tc.args)}, Offered: tc.offered})
			created := main1(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 7, ConversationID: 1, Kind: agent.ToolKindName, Status: "planned", State: state}})
			if err := o.commit(core.Invocation{}, false, storage.Range{First: 1, Last: 1}, created); err != nil {
				t.Fatal(err)
			}
			method := tc.method
			if method == "" {
				method = core.MethodExecute
			}
			inv := core.Invocation{Task: 7, ConversationID: 1, Method: method}
			holdsOrBreaks(t, o.argsCall(inv, true, tc.w, "a test", 20), ruleArgs, tc.broken)
		})
	}
}

// Programs of every typedSeeds-th seed call the typed tool, from a
// generator of their own, and register it; no other program does.
func TestTypedCallsAreDrawnForTheirSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		p := drawProgram(seed)
		if want := seed%typedSeeds == 3; p.typedCalls() != want {
			t.Fatalf("seed %d: typed calls %v; want %v:\n%s", seed, p.typedCalls(), want, p)
		}
	}
}
