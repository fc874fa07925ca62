package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// subagentRun is an oracle that has seen conversation 1's subagent child 20
// made by run call 10 with its prompt, input 22, answered by entry 25, and
// then sent input 48 by call 30, answered by entry 52; calls 40 (wait), 41
// (status) and 42 (send) were made at 60, after all of it, and 42 gave
// input 65, still queued.
func subagentRun() *oracle {
	o := newOracle()
	o.created, o.owners = []storage.ID{1, 20}, map[storage.ID]storage.ID{20: 10}
	o.convs = map[storage.ID]storage.ID{10: 1, 30: 1, 40: 1, 41: 1, 42: 1}
	for _, task := range []storage.ID{10, 30, 40, 41, 42} {
		o.tools[task] = agent.SubagentToolName
	}
	calls := map[storage.ID]string{10: `{"command":"run","prompt":"look"}`, 30: `{"command":"send","id":20,"text":"go on"}`,
		40: `{"command":"wait","id":20}`, 41: `{"command":"status","id":20}`, 42: `{"command":"send","id":20,"text":"more"}`}
	made := map[storage.ID]storage.ID{10: 10, 30: 30, 40: 60, 41: 60, 42: 60}
	for task, args := range calls {
		o.subagentMade(task, ai.Block{Type: ai.BlockToolCall, Name: agent.SubagentToolName, Arguments: json.RawMessage(args)}, made[task])
	}
	result := func(input storage.ID, res agent.InputResult, by storage.ID, seq storage.ID) {
		addr := agent.InputResultValue.In(20).WithKey(input.String()).Address
		o.subagentInput(core.Invocation{Task: by}, by != 0, addr, res, seq)
	}
	result(22, agent.InputResult{Status: agent.InputRunning}, 10, 22)
	result(22, agent.InputResult{Status: agent.InputDone, ResultEntryID: 25}, 0, 25)
	result(48, agent.InputResult{Status: agent.InputQueued}, 30, 48)
	result(48, agent.InputResult{Status: agent.InputRunning}, 0, 50) // placed by the child's generation: given once
	result(48, agent.InputResult{Status: agent.InputDone, ResultEntryID: 52}, 0, 52)
	result(65, agent.InputResult{Status: agent.InputQueued}, 42, 65)
	entry := func(id storage.ID, kind string, role ai.Role, text string) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 20, Kind: kind, Model: []ai.Message{{Role: role, Content: ai.PlainText(text)}}}
	}
	o.transcripts.own[20] = []*storage.Entry{
		entry(21, core.SystemKind.Kind(), ai.RoleSystem, "be brief"), entry(23, "user", ai.RoleUser, "look"),
		entry(25, "assistant", ai.RoleAssistant, "found it"), entry(49, "user", ai.RoleUser, "go on"),
		entry(51, "assistant", ai.RoleAssistant, "still looking"), entry(52, "assistant", ai.RoleAssistant, "fixed"),
		entry(70, "user", ai.RoleUser, "later"),
	}
	return o
}

// subagentSettlement is call task's settlement with text and the details
// the tool writes.
func subagentSettlement(task, child, input storage.ID, status agent.InputStatus, text string) storage.Write {
	details, _ := json.Marshal(map[string]any{"subagent": map[string]any{"id": child, "input": input, "status": status}})
	out := agent.ToolOutputState{Content: []ai.Block{ai.Text(text)}, ToolResultData: agent.ToolResultData{Details: details}}
	state, _ := json.Marshal(map[string]any{"output": out})
	return storage.Write{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal, State: state}
}

// Each command's answer is held to the child it names: run to its own
// child and prompt, send to the input its commit gave, wait to the child's
// latest input as of the call or a newer one, run's and wait's text to the
// entry that ended the input, status to the child's newest entries from
// the call on.
func TestTheSubagentRuleHoldsEachCommandToItsChild(t *testing.T) {
	status := func(state string, entries ...string) string {
		s := fmt.Sprintf("Subagent 20 is %s.", state)
		for _, e := range entries {
			s += "\n" + e
		}
		return s
	}
	newest := []string{"user 23: look", "assistant 25: found it", "user 49: go on", "assistant 51: still looking", "assistant 52: fixed"}
	cases := []struct {
		name      string
		w         storage.Write
		uncertain bool // the child lived through a restart
		broken    bool
	}{
		{name: "run answers its prompt", w: subagentSettlement(10, 20, 22, agent.InputDone, "found it")},
		{name: "run with a later answer", w: subagentSettlement(10, 20, 22, agent.InputDone, "fixed"), broken: true},
		{name: "run naming another child", w: subagentSettlement(10, 21, 22, agent.InputDone, "found it"), broken: true},
		{name: "run naming a sent input", w: subagentSettlement(10, 20, 48, agent.InputDone, "fixed"), broken: true},
		{name: "run still working says no answer", w: subagentSettlement(10, 20, 22, agent.InputRunning, "Subagent 20 is still working")},
		{name: "send names its input", w: subagentSettlement(30, 20, 48, agent.InputQueued, "Sent to subagent 20 as input 48 (queued).")},
		{name: "send reporting its queued input running", w: subagentSettlement(30, 20, 48, agent.InputRunning, "Sent to subagent 20 as input 48 (running)."), broken: true},
		{name: "send saying another status than its details", w: subagentSettlement(30, 20, 48, agent.InputQueued, "Sent to subagent 20 as input 48 (running)."), broken: true},
		{name: "send naming the prompt", w: subagentSettlement(30, 20, 22, agent.InputQueued, "Sent"), broken: true},
		{name: "wait for the latest input", w: subagentSettlement(40, 20, 48, agent.InputDone, "fixed")},
		{name: "wait for an older input", w: subagentSettlement(40, 20, 22, agent.InputDone, "found it"), broken: true},
		{name: "wait answering with the input's placement", w: subagentSettlement(40, 20, 48, agent.InputDone, "go on"), broken: true},
		{name: "wait for an input no call gave", w: subagentSettlement(40, 20, 77, agent.InputRunning, "still working"), broken: true},
		{name: "wait for an input a missed commit gave", w: subagentSettlement(40, 20, 77, agent.InputRunning, "still working"), uncertain: true},
		{name: "wait for an input given after the call", w: subagentSettlement(40, 20, 65, agent.InputRunning, "still working")},
		{name: "wait done before its input ended", w: subagentSettlement(40, 20, 65, agent.InputDone, "fixed"), broken: true},
		{name: "status of the newest entries", w: subagentSettlement(41, 20, 0, "", status("idle", newest...))},
		{name: "status of the entries through a later one", w: subagentSettlement(41, 20, 0, "", status("idle", append(newest[1:], "user 70: later")...))},
		{name: "status while working", w: subagentSettlement(41, 20, 0, "", status("working", append([]string{"live: generation 53 (streaming)"}, newest...)...))},
		{name: "status of the oldest entries", w: subagentSettlement(41, 20, 0, "", status("idle", newest[:4]...)), broken: true},
		{name: "status idle with a live task", w: subagentSettlement(41, 20, 0, "", status("idle", append([]string{"live: generation 53 (streaming)"}, newest...)...)), broken: true},
		{name: "status working with none", w: subagentSettlement(41, 20, 0, "", status("working", newest...)), broken: true},
		{name: "status of another child", w: subagentSettlement(41, 21, 0, "", status("idle", newest...)), broken: true},
		{name: "a second send names its own input", w: subagentSettlement(42, 20, 65, agent.InputQueued, "Sent (queued)")},
		{name: "a second send naming the first's", w: subagentSettlement(42, 20, 48, agent.InputQueued, "Sent"), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := subagentRun()
			if tc.uncertain {
				o.subagentRestarted()
			}
			holdsOrBreaks(t, o.subagentSettled(tc.w, "a test", 80), ruleSubagent, tc.broken)
		})
	}
}

// A refusal is the subagent tool's to make, but not of the caller's own
// child as not its own, nor of a wait for a child given input as having
// none.
func TestTheSubagentToolRefusesOnlyWhatItMay(t *testing.T) {
	refusal := func(task storage.ID, text string, status ...agent.InputStatus) storage.Write {
		out := agent.ToolOutputState{Content: []ai.Block{ai.Text(text)}, ToolResultData: agent.ToolResultData{IsError: true}}
		if len(status) > 0 {
			out.Details, _ = json.Marshal(map[string]any{"subagent": map[string]any{"id": 20, "input": 48, "status": status[0]}})
		}
		state, _ := json.Marshal(map[string]any{"output": out})
		return storage.Write{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal, State: state}
	}
	cases := []struct {
		name   string
		w      storage.Write
		broken bool
	}{
		{name: "a budget", w: refusal(40, "tool call budget spent")},
		{name: "an own child as another's", w: refusal(30, "20 is not a subagent of this conversation"), broken: true},
		{name: "an own child given input as having none", w: refusal(40, "subagent 20 has no input to wait for"), broken: true},
		{name: "an input that ended failed", w: refusal(40, "subagent 20's input 48 ended failed: the model failed", agent.InputFailed)},
		{name: "an input that ended done", w: refusal(40, "subagent 20's answer 52 cannot be read", agent.InputDone), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, subagentRun().subagentSettled(tc.w, "a test", 90), ruleSubagent, tc.broken)
		})
	}
}

// A host spawn is refused for a context mode that is none, with a
// SpawnError naming its conversation, and only then.
func TestASpawnIsRefusedOnlyForBadOptions(t *testing.T) {
	refusal := &agent.SpawnError{ConversationID: 1, Err: errors.New("context: want fresh or inherit")}
	for _, tc := range []struct {
		mode agent.SpawnContext
		err  error
		ok   bool
	}{
		{"", nil, true}, {agent.SpawnFresh, nil, true}, {agent.SpawnInherit, nil, true},
		{agent.SpawnInherit, core.ErrClosed, true}, // refused, but not for its options
		{"everything", refusal, true},
		{"everything", nil, false},
		{"everything", &agent.SpawnError{ConversationID: 2, Err: errors.New("context")}, false},
		{"everything", core.ErrClosed, false},
		{agent.SpawnInherit, refusal, false},
		{"", refusal, false},
	} {
		o := newOracle()
		err := o.spawnRefusal(1, tc.mode, tc.err)
		var oe *oracleError
		if tc.ok && err != nil || !tc.ok && (!errors.As(err, &oe) || oe.Rule != ruleSpawnOptions) {
			t.Errorf("spawn with context %q returning %v: %v; want a violation: %v", tc.mode, tc.err, err, !tc.ok)
		}
	}
}

// A run is refused for depth exactly when its conversation is at the
// bound: a refusal under it and a child made at it break the rule.
func TestARunIsRefusedForDepthOnlyAtTheBound(t *testing.T) {
	const task = storage.ID(900)
	deep := func(depth int) *oracle {
		o := newOracle()
		conv := storage.ID(1)
		o.created = []storage.ID{1}
		for k := 1; k <= depth; k++ {
			owner, child := storage.ID(100+k), storage.ID(200+k)
			o.convs[owner], o.owners[child] = conv, owner
			o.created = append(o.created, child)
			conv = child
		}
		o.convs[task], o.tools[task] = conv, agent.SubagentToolName
		o.subagentMade(task, ai.Block{Type: ai.BlockToolCall, Name: agent.SubagentToolName, Arguments: json.RawMessage(`{"command":"run","prompt":"look"}`)}, task)
		return o
	}
	out := agent.ToolOutputState{Content: []ai.Block{ai.Text(fmt.Sprintf("subagents nest at most %d deep", agent.SubagentDepthMax))}, ToolResultData: agent.ToolResultData{IsError: true}}
	state, _ := json.Marshal(map[string]any{"output": out})
	refused := storage.Write{Type: storage.WriteSettle, ID: task, Status: "done", Role: storage.RoleTerminal, State: state}
	ran := subagentSettlement(task, 999, 1000, agent.InputDone, "done")
	for _, tc := range []struct {
		name   string
		depth  int
		w      storage.Write
		broken bool
	}{
		{"refused at the bound", agent.SubagentDepthMax, refused, false},
		{"refused under it", agent.SubagentDepthMax - 1, refused, true},
		{"refused at the top", 0, refused, true},
		{"a child made at the bound", agent.SubagentDepthMax, ran, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, deep(tc.depth).subagentSettled(tc.w, "a test", 950), ruleSubagent, tc.broken)
		})
	}
}

// A subagent call makes its child once: a second conversation owned by the
// run call that made child 20 breaks the rule; a first one of another call,
// or one a task of another tool owns, does not.
func TestASubagentCallMakesItsChildOnce(t *testing.T) {
	o := subagentRun()
	o.tools[77] = "work"
	o.owners[78] = 77
	o.created = append(o.created, 78)
	for _, tc := range []struct {
		name   string
		owner  storage.ID
		broken bool
	}{
		{"another child of the run call", 10, true},
		{"a first child of another call", 30, false},
		{"a second conversation of another tool's task", 77, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, o.madeOnce(&storage.Conversation{ID: 99, Owner: tc.owner}, "a test", 99), ruleSubagent, tc.broken)
		})
	}
}
