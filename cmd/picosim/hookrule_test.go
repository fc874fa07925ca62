package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// hookedOracle is an oracle of a root (1) whose call task 5 made a child
// (2), and a fork of the root (3), with the catalog a, b.
func hookedOracle() *oracle {
	o := newOracle()
	o.created = []storage.ID{1, 2, 3}
	o.owners[2] = 5
	o.convs[5] = 1
	o.hooks.catalogTools = []ai.Tool{{Name: "a", Description: "echo a"}, {Name: "b", Description: "echo b"}}
	return o
}

// A conversation's handlers are the session's, then its owners' with
// their subtree, outermost first, then its own, each in registration
// order; a fork's are never its parent's.
func TestHookHandlersFollowScopeAndOrder(t *testing.T) {
	o := hookedOracle()
	o.hookOn(hookSpan{id: 1, conv: 2, effect: "section"})
	o.hookOn(hookSpan{id: 2, conv: 1, effect: "section", subtree: true})
	o.hookOn(hookSpan{id: 3, conv: 1, effect: "section"})
	o.hookOn(hookSpan{id: 4, effect: "section"})
	o.hookOn(hookSpan{id: 5, conv: 3, effect: "section"})
	from := o.hooks.tick + 1
	for _, tc := range []struct {
		conv storage.ID
		want []int
	}{{1, []int{4, 2, 3}}, {2, []int{4, 2, 1}}, {3, []int{4, 5}}} {
		spans, sure := o.handlers(tc.conv, from, func(hookSpan) bool { return true })
		if got := spanIDs(spans); !slices.Equal(got, tc.want) || slices.Contains(sure, false) {
			t.Errorf("conversation %d: handlers %v (sure %v), want %v all sure", tc.conv, got, sure, tc.want)
		}
	}
}

// A hook registered after the invocation started, or removed after it,
// may have run; one removed before it cannot have.
func TestHookRunsSurelyOnlyThroughTheWindow(t *testing.T) {
	o := hookedOracle()
	o.hookOn(hookSpan{id: 1, conv: 1, effect: "section"}) // before, kept: sure
	o.hookOn(hookSpan{id: 2, conv: 1, effect: "section"}) // before, removed before: out
	o.hookOn(hookSpan{id: 3, conv: 1, effect: "section"}) // before, removed during: maybe
	o.hookOff(2)
	o.hooks.tick++
	from := o.hooks.tick
	o.hookOff(3)
	o.hookOn(hookSpan{id: 4, conv: 1, effect: "section"}) // during: maybe
	spans, sure := o.handlers(1, from, func(hookSpan) bool { return true })
	if got := spanIDs(spans); !slices.Equal(got, []int{1, 3, 4}) || !slices.Equal(sure, []bool{true, false, false}) {
		t.Fatalf("handlers %v sure %v; want [1 3 4] sure [true false false]", got, sure)
	}
	var sets [][]int
	possibleRuns(spans, sure, func(run []hookSpan) bool { sets = append(sets, spanIDs(run)); return false })
	if want := [][]int{{1}, {1, 3}, {1, 4}, {1, 3, 4}}; !slices.EqualFunc(sets, want, slices.Equal) {
		t.Fatalf("weighed %v; want %v", sets, want)
	}
}

// The hooks' answer: sections in handler order; the selection less
// dropped tools, with described ones redescribed.
func TestHookedSystemFoldsItsHooks(t *testing.T) {
	o := hookedOracle()
	sel := &[]string{"b", "a", "b", "zz"}
	sections, tools := o.hookedSystem([]hookSpan{{id: 3, effect: "describe", tool: "a"}, {id: 1, effect: "section"}, {id: 4, effect: "drop", tool: "b"}}, sel)
	if len(sections) != 1 || sections[0].Key != "hook-1" || len(tools) != 1 || tools[0].Name != "a" || tools[0].Description != hookDescription(3, "a") {
		t.Fatalf("got %s", describeSystem(sections, tools))
	}
	if _, tools := o.hookedSystem(nil, sel); !slices.Equal(toolNames(tools), []string{"b", "a"}) {
		t.Fatalf("no hooks: tools %v; want the selection's, b then a", toolNames(tools))
	}
	if _, tools := o.hookedSystem(nil, nil); !slices.Equal(toolNames(tools), []string{"a", "b"}) {
		t.Fatalf("no selection: tools %v; want the catalog's", toolNames(tools))
	}
}

// A generation's attempt start holds when its context folds to what the
// hooks that may have run ask for, and breaks when a sure one is missing,
// one that cannot have run is there, or the sections are out of order.
func TestSystemFollowsItsHooks(t *testing.T) {
	section := func(id int) core.SystemSection {
		key, text := hookSection(id, nil)
		return core.SystemSection{Key: key, Text: &text}
	}
	catalog := []ai.Tool{{Name: "a", Description: "echo a"}, {Name: "b", Description: "echo b"}}
	cases := []struct {
		name     string
		sections []core.SystemSection
		tools    []ai.Tool
		broken   bool
	}{
		{name: "the sure one", sections: []core.SystemSection{section(1)}, tools: catalog},
		{name: "the sure one and the maybe one", sections: []core.SystemSection{section(1), section(3)}, tools: catalog},
		{name: "tools in another order", sections: []core.SystemSection{section(1)}, tools: []ai.Tool{catalog[1], catalog[0]}},
		{name: "the sure one missing", sections: []core.SystemSection{section(3)}, tools: catalog, broken: true},
		{name: "the removed one", sections: []core.SystemSection{section(1), section(2)}, tools: catalog, broken: true},
		{name: "out of order", sections: []core.SystemSection{section(3), section(1)}, tools: catalog, broken: true},
		{name: "a tool dropped by no hook", sections: []core.SystemSection{section(1)}, tools: catalog[:1], broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := hookedOracle()
			data, _ := json.Marshal(core.SystemData{Baseline: true, Sections: tc.sections, ToolsAdded: tc.tools})
			o.transcripts.record(storage.CommitBatch{Writes: []storage.Write{
				{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
				{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 10, ConversationID: 1, Kind: "system", Data: data}},
			}})
			o.kinds[9], o.convs[9] = agent.GenerationKindName, 1
			o.hookOn(hookSpan{id: 1, conv: 1, effect: "section"})
			o.hookOn(hookSpan{id: 2, conv: 1, effect: "section"})
			o.hookOn(hookSpan{id: 3, conv: 1, effect: "section"})
			o.hookOff(2)
			inv := core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}
			_ = o.invocation(inv, false)
			o.hookOff(3)
			w := storage.Write{Type: storage.WritePatch, ID: 9, Status: "streaming"}
			holdsOrBreaks(t, o.hookStreaming(inv, true, w, storage.Range{First: 11, Last: 11}, "a test", 11), ruleSystemHooks, tc.broken)
		})
	}
}

// A generation whose creation the oracle never saw (its commit left
// uncertain by a restart) is held to the selection its attempt's patch
// carries: a section that counts the selected tools holds, one that counts
// every tool breaks.
func TestSystemHooksReadAnUnseenGenerationsSelection(t *testing.T) {
	sel := []string{"b"}
	for _, tc := range []struct {
		name   string
		sel    *[]string
		broken bool
	}{{"the patch's selection", &sel, false}, {"no selection", nil, true}} {
		t.Run(tc.name, func(t *testing.T) {
			o := hookedOracle()
			key, text := hookSection(1, tc.sel)
			data, _ := json.Marshal(core.SystemData{Baseline: true, Sections: []core.SystemSection{{Key: key, Text: &text}}, ToolsAdded: []ai.Tool{{Name: "b", Description: "echo b"}}})
			o.transcripts.record(storage.CommitBatch{Writes: []storage.Write{
				{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
				{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 10, ConversationID: 1, Kind: "system", Data: data}},
			}})
			o.kinds[9], o.convs[9] = agent.GenerationKindName, 1
			o.hookOn(hookSpan{id: 1, conv: 1, effect: "section"})
			inv := core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}
			_ = o.invocation(inv, false)
			state, _ := json.Marshal(map[string]any{"config": map[string]any{"selectedTools": sel}})
			w := storage.Write{Type: storage.WritePatch, ID: 9, Status: "streaming", State: state}
			holdsOrBreaks(t, o.hookStreaming(inv, true, w, storage.Range{First: 11, Last: 11}, "a test", 11), ruleSystemHooks, tc.broken)
		})
	}
}

// A call runs only when no block hook of its tool surely ran, and is
// blocked only by one that may have; a call not offered never runs; a
// call is offered as its generation's request offered its tool.
func TestCallsFollowTheirBlockHooksAndOffers(t *testing.T) {
	blocked := func(id string) storage.Write {
		st, _ := json.Marshal(map[string]any{"output": agent.ToolOutputState{Content: []ai.Block{ai.Text("blocked: hook " + id)}}})
		return storage.Write{Type: storage.WriteSettle, ID: 7, Status: "done", State: st}
	}
	running := storage.Write{Type: storage.WritePatch, ID: 7, Status: "running"}
	unseen := func(w storage.Write) storage.Write {
		st := map[string]any{"call": ai.Block{Type: ai.BlockToolCall, ID: "c1", Name: "a"}}
		if len(w.State) > 0 {
			_ = json.Unmarshal(w.State, &st)
		}
		w.State, _ = json.Marshal(st)
		return w
	}
	cases := []struct {
		name    string
		block   []int // block hooks of a on conversation 1 registered before the call started
		offered bool
		w       storage.Write
		broken  bool
	}{
		{name: "runs unhooked", offered: true, w: running},
		{name: "runs though hooked", block: []int{1}, offered: true, w: running, broken: true},
		{name: "blocked by its hook", block: []int{1}, offered: true, w: blocked("1")},
		{name: "blocked by the second of two", block: []int{1, 2}, offered: true, w: blocked("2"), broken: true},
		{name: "blocked by no hook", offered: true, w: blocked("4"), broken: true},
		{name: "runs not offered", w: running, broken: true},
		// Created unseen (an uncertain commit before a restart): the
		// call's own state names its tool (generated seed 21618).
		{name: "unseen, blocked by its hook", block: []int{1}, offered: true, w: unseen(blocked("1"))},
		{name: "unseen, runs though hooked", block: []int{1}, offered: true, w: unseen(running), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := hookedOracle()
			o.kinds[7], o.convs[7], o.tools[7] = agent.ToolKindName, 1, "a"
			if strings.HasPrefix(tc.name, "unseen") {
				delete(o.tools, 7)
			}
			o.hooks.offered[7] = tc.offered
			for _, id := range tc.block {
				o.hookOn(hookSpan{id: id, conv: 1, effect: "block", tool: "a"})
			}
			o.hookOn(hookSpan{id: 3, conv: 1, effect: "block", tool: "b"})
			inv := core.Invocation{Task: 7, ConversationID: 1, Method: core.MethodExecute}
			_ = o.invocation(inv, false)
			rule := ruleBlockHooks
			if !tc.offered {
				rule = ruleOffered
			}
			holdsOrBreaks(t, o.hookCall(inv, true, tc.w, "a test", 20), rule, tc.broken)
		})
	}
	for _, offered := range []bool{true, false} {
		o := hookedOracle()
		o.kinds[9], o.convs[9] = agent.GenerationKindName, 1
		o.hooks.offers[9] = []string{"b"}
		st, _ := json.Marshal(agent.ToolState{Call: ai.Block{Type: ai.BlockToolCall, ID: "c1", Name: "a"}, Offered: offered})
		err := o.hookTask(core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}, true,
			&storage.Task{ID: 7, ConversationID: 1, Kind: agent.ToolKindName, State: st}, "a test", 21)
		holdsOrBreaks(t, err, ruleOffered, offered)
	}
}

// A call runs with what its tool's args hooks made of the model's
// arguments: the hooks that surely ran, and any that may have, in handler
// order, and nothing else changed; an echo tool writes what it ran with.
func TestCallsRunWithWhatTheirArgsHooksMade(t *testing.T) {
	running := func(args string) storage.Write {
		st, _ := json.Marshal(map[string]any{"args": json.RawMessage(args)})
		return storage.Write{Type: storage.WritePatch, ID: 7, Status: "running", State: st}
	}
	settled := func(text string, isError bool) storage.Write {
		out := agent.ToolOutputState{Content: []ai.Block{ai.Text(text)}}
		out.IsError = isError
		st, _ := json.Marshal(map[string]any{"output": out})
		return storage.Write{Type: storage.WriteSettle, ID: 7, Status: "done", State: st}
	}
	cases := []struct {
		name   string
		late   bool // hook 2 is registered after the call's execute started: it may have run
		ws     []storage.Write
		broken bool
	}{
		{name: "the session's hook, then the conversation's", ws: []storage.Write{running(`{"n":1,"hooks":[3,2]}`)}},
		{name: "the conversation's first", ws: []storage.Write{running(`{"n":1,"hooks":[2,3]}`)}, broken: true},
		{name: "one left out", ws: []storage.Write{running(`{"n":1,"hooks":[3]}`)}, broken: true},
		{name: "one left out that may not have run", late: true, ws: []storage.Write{running(`{"n":1,"hooks":[3]}`)}},
		{name: "a hook of another tool", ws: []storage.Write{running(`{"n":1,"hooks":[3,2,4]}`)}, broken: true},
		{name: "unhooked", ws: []storage.Write{running(`{"n":1}`)}, broken: true},
		{name: "the model's arguments changed", ws: []storage.Write{running(`{"n":2,"hooks":[3,2]}`)}, broken: true},
		{name: "no arguments", ws: []storage.Write{running(`null`)}, broken: true},
		{name: "echoes what it ran with", ws: []storage.Write{running(`{"n":1,"hooks":[3,2]}`), settled(`a{"hooks":[3,2],"n":1}`, false)}},
		{name: "echoes the model's", ws: []storage.Write{running(`{"n":1,"hooks":[3,2]}`), settled(`a{"n":1}`, false)}, broken: true},
		{name: "fails", ws: []storage.Write{running(`{"n":1,"hooks":[3,2]}`), settled(`cut short`, true)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := hookedOracle()
			o.kinds[7], o.convs[7], o.tools[7] = agent.ToolKindName, 1, "a"
			o.hooks.offered[7] = true
			o.hooks.callArgs[7] = json.RawMessage(`{"n": 1}`)
			o.hookOn(hookSpan{id: 3, effect: "args", tool: "a"})
			o.hookOn(hookSpan{id: 4, conv: 1, effect: "args", tool: "b"})
			if !tc.late {
				o.hookOn(hookSpan{id: 2, conv: 1, effect: "args", tool: "a"})
			}
			inv := core.Invocation{Task: 7, ConversationID: 1, Method: core.MethodExecute}
			_ = o.invocation(inv, false)
			if tc.late {
				o.hookOn(hookSpan{id: 2, conv: 1, effect: "args", tool: "a"})
			}
			var err error
			for _, w := range tc.ws {
				if err = o.hookCall(inv, true, w, "a test", 20); err != nil {
					break
				}
			}
			holdsOrBreaks(t, err, ruleArgsHooks, tc.broken)
		})
	}
}

// hookArgs adds its hook to the end of the arguments' list, and refuses
// arguments that are not an object, naming its hook.
func TestHookArgsAppendsItsNumber(t *testing.T) {
	got, err := hookArgs(2, json.RawMessage(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = hookArgs(5, got); err != nil || string(got) != `{"hooks":[2,5],"n":1}` {
		t.Fatalf("hookArgs twice = %s, %v; want {\"hooks\":[2,5],\"n\":1}", got, err)
	}
	if _, err := hookArgs(3, json.RawMessage(`[1]`)); err == nil || !strings.Contains(err.Error(), "hook 3") {
		t.Fatalf("hookArgs of an array: %v; want an error naming hook 3", err)
	}
}

// A collapse declines only when a decline hook may have run; it publishes
// the summary of the last summary hook of a set that may have run, or the
// summarizer's when none did; its summarizer request carries the last
// instructions an instruct hook gave, or the collapse's own.
func TestCollapseFollowsItsHooks(t *testing.T) {
	settle := func(declined bool, text string) (storage.Write, storage.CommitBatch) {
		if declined {
			return storage.Write{Type: storage.WriteSettle, ID: 8, Status: "failed", State: json.RawMessage(`{"failure":"declined"}`)}, storage.CommitBatch{}
		}
		w := storage.Write{Type: storage.WriteSettle, ID: 8, Status: "done", State: json.RawMessage(`{"summary":30}`)}
		return w, storage.CommitBatch{Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 30, ConversationID: 1, Kind: "summary",
			Model: []ai.Message{{Role: ai.RoleUser, Content: ai.Blocks(ai.Text("Summary: " + text))}}}}, w}}
	}
	cases := []struct {
		name     string
		effects  []string // hooks 1, 2, … of conversation 1, registered before the collapse started
		declined bool
		text     string
		broken   bool
	}{
		{name: "declined by its hook", effects: []string{"decline"}, declined: true},
		{name: "declined by none", effects: []string{"summary"}, declined: true, broken: true},
		{name: "a decline is final", effects: []string{"decline", "summary"}, text: hookSummary(2), broken: true},
		{name: "the last summary", effects: []string{"summary", "summary"}, text: hookSummary(2)},
		{name: "the first summary", effects: []string{"summary", "summary"}, text: hookSummary(1), broken: true},
		{name: "the summarizer's, no summary hook", effects: []string{"instruct"}, text: "what happened"},
		{name: "the summarizer's past a summary hook", effects: []string{"summary"}, text: "what happened", broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := hookedOracle()
			o.kinds[8], o.convs[8] = agent.CollapseKindName, 1
			for i, e := range tc.effects {
				o.hookOn(hookSpan{id: i + 1, conv: 1, effect: e})
			}
			inv := core.Invocation{Task: 8, ConversationID: 1, Method: core.MethodExecute}
			_ = o.invocation(inv, false)
			w, b := settle(tc.declined, tc.text)
			holdsOrBreaks(t, o.hookCollapse(inv, true, w, b, "a test", 31), ruleCollapseHooks, tc.broken)
		})
	}
	o := hookedOracle()
	o.kinds[8], o.convs[8] = agent.CollapseKindName, 1
	o.hookOn(hookSpan{id: 1, conv: 1, effect: "instruct"})
	o.hookOn(hookSpan{id: 2, conv: 1, effect: "instruct"})
	_ = o.invocation(core.Invocation{Task: 8, ConversationID: 1, Method: core.MethodExecute}, false)
	o.hookOn(hookSpan{id: 3, effect: "summary"}) // may have run: then no request goes out
	if got, known := o.collapseInstructions(8, "own"); !known || !slices.Equal(got, []string{hookInstructions(2)}) {
		t.Fatalf("instructions %q, %v; want hook 2's alone", got, known)
	}
	o.hookOn(hookSpan{id: 4, conv: 1, effect: "decline"})
	o.hookOff(1)
	o.hookOff(2)
	// Removed while the collapse ran, each may have run or not.
	got, known := o.collapseInstructions(8, "own")
	slices.Sort(got)
	if want := []string{hookInstructions(1), hookInstructions(2), "own"}; !known || !slices.Equal(got, want) {
		t.Fatalf("after removals: instructions %q, %v; want %q", got, known, want)
	}
	if got, known := hookedOracle().collapseInstructions(8, "own"); !known || !slices.Equal(got, []string{"own"}) {
		t.Fatalf("no hooks: instructions %q, %v; want the collapse's own", got, known)
	}
	unseen := hookedOracle()
	unseen.hookOn(hookSpan{id: 1, conv: 1, effect: "instruct"})
	if got, known := unseen.collapseInstructions(8, "own"); known {
		t.Fatalf("a hook, and an invocation not seen: instructions %q; want none known", got)
	}
}

// A generation's request is its projected context followed by the notes
// of the request hooks that may have run, in handler order, every sure
// one among them.
func TestRequestCarriesItsHooksNotes(t *testing.T) {
	o := hookedOracle()
	user := ai.UserText("hello", 1)
	want := expectedRequest{task: 9, messages: []ai.Message{user}}
	o.hookOn(hookSpan{id: 1, conv: 1, effect: "request"})
	_ = o.invocation(core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}, false)
	o.hookOn(hookSpan{id: 2, effect: "request"}) // registered while it ran: may have run
	for _, tc := range []struct {
		name string
		msgs []ai.Message
		ok   bool
	}{
		{"the sure note", []ai.Message{user, hookNote(1)}, true},
		{"both notes, the session's first", []ai.Message{user, hookNote(2), hookNote(1)}, true},
		{"without the sure note", []ai.Message{user}, false},
		{"the maybe note alone", []ai.Message{user, hookNote(2)}, false},
		{"both, out of order", []ai.Message{user, hookNote(1), hookNote(2)}, false},
	} {
		if got := o.requestHooked(tc.msgs, 1, want); got != tc.ok {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.ok)
		}
	}
}

// A generation's settlement with its answer showed that answer, usage
// included, last to every after_response hook registered throughout its
// execute, and nothing to a hook that cannot have run for it; a hook
// registered or removed during the execute may have seen anything.
func TestResponsesAreShownToTheirHooks(t *testing.T) {
	usage := &ai.Usage{Input: 10, Output: 2}
	answer := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("done")), StopReason: ai.StopStop, Usage: usage}
	earlier := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(), StopReason: ai.StopError, Usage: usage}
	type sight struct {
		hook int
		m    ai.Message
		u    *ai.Usage
	}
	cases := []struct {
		name   string
		before []hookSpan // registered before the execute started
		during []hookSpan // registered after it started
		seen   []sight
		broken bool
	}{
		{name: "seen by its hook", before: []hookSpan{{id: 1, conv: 1}}, seen: []sight{{1, answer, usage}}},
		{name: "seen after an earlier attempt", before: []hookSpan{{id: 1}}, seen: []sight{{1, earlier, usage}, {1, answer, usage}}},
		{name: "never seen", before: []hookSpan{{id: 1, conv: 1}}, broken: true},
		{name: "seen last an earlier attempt", before: []hookSpan{{id: 1}}, seen: []sight{{1, answer, usage}, {1, earlier, usage}}, broken: true},
		{name: "seen without its usage", before: []hookSpan{{id: 1}}, seen: []sight{{1, answer, nil}}, broken: true},
		{name: "unseen by a hook registered during it", during: []hookSpan{{id: 2, conv: 1}}},
		{name: "seen by a hook of the fork", before: []hookSpan{{id: 1, conv: 1}, {id: 3, conv: 3}}, seen: []sight{{1, answer, usage}, {3, answer, usage}}, broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := hookedOracle()
			o.kinds[9], o.convs[9] = agent.GenerationKindName, 1
			for _, s := range tc.before {
				s.effect = "observe"
				o.hookOn(s)
			}
			inv := core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}
			_ = o.invocation(inv, false)
			for _, s := range tc.during {
				s.effect = "observe"
				o.hookOn(s)
			}
			for _, s := range tc.seen {
				o.responseSeen(s.hook, agent.AfterResponseInput{ConversationID: 1, Response: s.m, Usage: s.u})
			}
			w := storage.Write{Type: storage.WriteSettle, ID: 9, Status: "done"}
			b := storage.CommitBatch{Writes: []storage.Write{{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 30, ConversationID: 1, Kind: "assistant", Model: []ai.Message{answer}}}, w}}
			holdsOrBreaks(t, o.hookResponse(inv, true, w, b, "a test", 31), ruleResponseHooks, tc.broken)
			if len(o.hooks.seen[1]) != 0 {
				t.Errorf("the conversation's sights outlive its settlement: %v", o.hooks.seen[1])
			}
		})
	}
}
