package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A child inherits its parent's context at the last complete exchange
// before the launching one: a failed answer cuts nothing, the launching
// exchange and all after it are left out, system entries too; one handoff
// head holds it; a fresh child holds none.
func TestAChildInheritsTheLastCompleteExchange(t *testing.T) {
	user := func(id storage.ID, text string) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText(text, 1)}}
	}
	assistant := func(id storage.ID, stop ai.StopReason, blocks ...ai.Block) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "assistant", Model: []ai.Message{{Role: ai.RoleAssistant, Content: ai.Blocks(blocks...), StopReason: stop}}}
	}
	result := func(id storage.ID, call string) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "tool_result", Key: call,
			Model: []ai.Message{{Role: ai.RoleToolResult, ToolCallID: call, ToolName: "a", Content: ai.Blocks(ai.Text("ok")), IsError: ai.Bool(false)}}}
	}
	baseline, _ := json.Marshal(map[string]bool{"baseline": true})
	parent := []*storage.Entry{
		{ID: 2, ConversationID: 1, Kind: "system", Data: baseline, Model: []ai.Message{{Role: ai.RoleSystem, Content: ai.Blocks(ai.Text("be brief"))}}},
		user(3, "one"),
		assistant(4, ai.StopToolUse, ai.ToolCall("c1", "a", nil)),
		result(5, "c1"),
		assistant(6, ai.StopStop, ai.Text("re: one")),
		user(7, "two"),
		assistant(8, ai.StopError, ai.ToolCall("c2", "a", nil)), // failed: no exchange
		user(9, "three"),
		assistant(10, ai.StopToolUse, ai.ToolCall("c3", "subagent", nil)), // the launching one
	}
	want := []ai.Message{parent[1].Model[0], parent[2].Model[0], parent[3].Model[0], parent[4].Model[0], parent[5].Model[0], parent[7].Model[0]}
	launch := func(context string) json.RawMessage {
		st, _ := json.Marshal(agent.ToolState{Call: ai.Block{Type: ai.BlockToolCall, ID: "c3", Name: agent.SubagentToolName,
			Arguments: json.RawMessage(`{"command":"run","prompt":"go","context":"` + context + `"}`)}, Assistant: 10, Offered: true})
		return st
	}
	handoff := func(msgs []ai.Message) *storage.Entry {
		return &storage.Entry{ID: 14, ConversationID: 12, Kind: core.HandoffKind.Kind(), Head: 14, Model: msgs}
	}
	cases := []struct {
		name    string
		context string
		host    bool // a host's spawn, not the call's
		handoff *storage.Entry
		broken  bool
	}{
		{name: "inherits the last complete exchange", context: "inherit", handoff: handoff(want)},
		{name: "inherits nothing", context: "inherit", broken: true},
		{name: "cut at the failed answer", context: "inherit", handoff: handoff(want[:5]), broken: true},
		{name: "keeps the system entry", context: "inherit", handoff: handoff(append([]ai.Message{parent[0].Model[0]}, want...)), broken: true},
		{name: "not a head", context: "inherit", handoff: func() *storage.Entry { e := handoff(want); e.Head = 0; return e }(), broken: true},
		{name: "fresh", context: "fresh"},
		{name: "fresh with a handoff", context: "fresh", handoff: handoff(want), broken: true},
		// A host's spawn has no launching exchange: the call in flight is
		// the newest answer, cut as not complete.
		{name: "a host's, cut at the call in flight", host: true, handoff: handoff(want)},
		{name: "a host's, keeping the call in flight", host: true, handoff: handoff(append(append([]ai.Message{}, want...), parent[8].Model[0])), broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			seq := storage.ID(1)
			commit := func(inv core.Invocation, byInv bool, ws ...storage.Write) error {
				r := storage.Range{First: seq, Last: seq + storage.ID(len(ws)) - 1}
				seq = r.Last + 1
				return o.commit(inv, byInv, r, main1(ws...))
			}
			if err := commit(core.Invocation{}, false, storage.Write{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}); err != nil {
				t.Fatal(err)
			}
			for _, e := range parent {
				if err := commit(core.Invocation{}, false, storage.Write{Type: storage.WriteEntry, Entry: e}); err != nil {
					t.Fatal(err)
				}
			}
			if err := commit(core.Invocation{}, false, storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 11, ConversationID: 1, Kind: agent.ToolKindName, Status: "planned", State: launch(tc.context)}}); err != nil {
				t.Fatal(err)
			}
			inv, byInv, owner := core.Invocation{Task: 11, ConversationID: 1, Method: core.MethodExecute}, true, storage.ID(11)
			if tc.host {
				inv, byInv, owner = core.Invocation{}, false, 0
				o.hostSpawns(1, agent.SpawnInherit)
			}
			ws := []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 12, Owner: owner}}}
			if tc.handoff != nil {
				ws = append(ws, storage.Write{Type: storage.WriteEntry, Entry: tc.handoff})
			}
			seq = 12
			holdsOrBreaks(t, commit(inv, byInv, ws...), ruleInherit, tc.broken)
		})
	}
}

// Programs of every inheritSeeds-th seed launch children that inherit,
// from a generator of their own; no other program does.
func TestInheritsAreDrawnForTheirSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		p := drawProgram(seed)
		text := p.String()
		inherits := strings.Contains(text, "subagent:run:inherit") || strings.Contains(text, "subagent:spawn:inherit")
		if want := seed%inheritSeeds == 3; inherits != want {
			t.Fatalf("seed %d: children inherit %v; want %v:\n%s", seed, inherits, want, text)
		}
		back, err := parseProgram(text)
		if err != nil || back.String() != text {
			t.Fatalf("seed %d: the program does not parse back (%v):\n%s", seed, err, text)
		}
	}
}
