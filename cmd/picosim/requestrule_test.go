package main

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The rule's projection of a hand-written transcript: the baseline first,
// older system entries and a failed answer left out, results in call
// order (the first of two, and one supplied for a call without any), an
// orphan result dropped; after a head, the old epoch's system entries
// count for nothing.
func TestTheRequestRuleProjectsAContext(t *testing.T) {
	sys := func(id storage.ID, baseline bool, text string) *storage.Entry {
		data, _ := json.Marshal(map[string]bool{"baseline": baseline})
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "system", Data: data, Model: []ai.Message{{Role: ai.RoleSystem, Content: ai.Blocks(ai.Text(text))}}}
	}
	user := func(id storage.ID, text string) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText(text, 1)}}
	}
	calls := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("c1", "a", nil), ai.ToolCall("c2", "b", nil), ai.ToolCall("c3", "a", nil)), StopReason: ai.StopToolUse, Timestamp: 7}
	failed := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("half"), ai.ToolCall("c9", "a", nil)), StopReason: ai.StopError}
	result := func(call, text string) ai.Message {
		return ai.Message{Role: ai.RoleToolResult, ToolCallID: call, ToolName: "a", Content: ai.Blocks(ai.Text(text)), IsError: ai.Bool(false)}
	}
	tr := newTranscripts()
	tr.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}})
	for _, e := range []*storage.Entry{
		sys(2, false, "a delta before any baseline"),
		user(3, "hello"),
		sys(4, true, "the baseline"),
		{ID: 5, ConversationID: 1, Kind: "assistant", Model: []ai.Message{calls}},
		{ID: 6, ConversationID: 1, Kind: "tool_result", Model: []ai.Message{result("c2", "two")}},
		{ID: 7, ConversationID: 1, Kind: "tool_result", Model: []ai.Message{result("c1", "one")}},
		{ID: 8, ConversationID: 1, Kind: "tool_result", Model: []ai.Message{result("c1", "one again")}},
		{ID: 9, ConversationID: 1, Kind: "tool_result", Model: []ai.Message{result("c8", "an orphan")}},
		{ID: 10, ConversationID: 1, Kind: "assistant", Model: []ai.Message{failed}},
		sys(11, false, "a delta"),
	} {
		tr.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: e}}})
	}
	missing := ai.Message{Role: ai.RoleToolResult, ToolCallID: "c3", ToolName: "a", Content: ai.Blocks(ai.Text(noResultText)), IsError: ai.Bool(true), Timestamp: 7}
	want := []ai.Message{tr.own[1][2].Model[0], ai.UserText("hello", 1), calls, result("c1", "one"), result("c2", "two"), missing, tr.own[1][9].Model[0]}
	got, _, ok := tr.projectRequest(1, 11)
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("projected %s; want %s", describeMessages(got), describeMessages(want))
	}
	if got := harnessRequest(t, tr, nil); !reflect.DeepEqual(got, want) {
		t.Fatalf("the harness projects %s; the test wants %s", describeMessages(got), describeMessages(want))
	}

	// A head (a summary of everything so far) starts a new epoch: the
	// baseline before it no longer counts, and nothing moves to the front.
	head := &storage.Entry{ID: 12, ConversationID: 1, Kind: "summary", Head: 12, Model: []ai.Message{ai.UserText("the summary", 1)}}
	tr.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteEntry, Entry: head}, {Type: storage.WriteEntry, Entry: user(13, "next")}}})
	got, _, _ = tr.projectRequest(1, 13)
	want = []ai.Message{ai.UserText("the summary", 1), ai.UserText("next", 1)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the head: projected %s; want %s", describeMessages(got), describeMessages(want))
	}
	if got := harnessRequest(t, tr, head); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the head: the harness projects %s; the test wants %s", describeMessages(got), describeMessages(want))
	}
}

// harnessRequest is core's projection of conversation 1's context, as the
// rule derives it: the test's expectations are the harness's too.
func harnessRequest(t *testing.T, tr *transcripts, head *storage.Entry) []ai.Message {
	t.Helper()
	cx, _ := tr.derive(1, 1<<40)
	c := core.Context{ConversationID: 1, Head: head}
	for _, ce := range cx {
		c.Entries = append(c.Entries, core.ContextEntry{Entry: tr.entry(1, ce.ID), Messages: ce.Messages, Replaced: ce.Replaced})
	}
	msgs, err := c.Request()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A request that is not the projection of its attempt's context breaks the
// rule; the projection itself, or a request of no conversation's, does not.
func TestTheRequestRuleHoldsWhatTheProviderIsSent(t *testing.T) {
	o := newOracle()
	o.kinds[5], o.convs[5] = "generation", 1
	o.transcripts.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("hi", 1)}}},
	}})
	o.attemptStarts(storage.Write{Type: storage.WritePatch, ID: 5, Status: "streaming", State: json.RawMessage(`{"attempt":1}`)}, storage.Range{First: 6, Last: 6})
	if err := o.request(ai.Request{SessionID: "conversation-1", Messages: []ai.Message{ai.UserText("hi", 1)}}); err != nil {
		t.Fatalf("the projection itself: %v", err)
	}
	if err := o.request(ai.Request{SessionID: "summarizer", Messages: nil}); err != nil {
		t.Fatalf("a request of no conversation's: %v", err)
	}
	var oe *oracleError
	if err := o.request(ai.Request{SessionID: "conversation-1", Messages: []ai.Message{ai.UserText("hi", 1), ai.UserText("hi", 1)}}); !errors.As(err, &oe) || oe.Rule != ruleRequest {
		t.Fatalf("a request with a message twice: %v; want a %s violation", err, ruleRequest)
	}
	// A deferred answer's fetch sends no request: it leaves the attempt's.
	o.attemptStarts(storage.Write{Type: storage.WritePatch, ID: 5, Status: "streaming", State: json.RawMessage(`{"attempt":2,"deferred":{"id":"d"}}`)}, storage.Range{First: 9, Last: 9})
	if o.requests[1].at != 6 {
		t.Fatalf("a fetch replaced the attempt's request (at %d)", o.requests[1].at)
	}
}

// The rule's tools are the baseline's and the later system entries':
// removals before additions, a tool added again in its place; the
// harness folds the same.
func TestTheRequestRuleFoldsTheTools(t *testing.T) {
	tool := func(name, desc string) ai.Tool {
		return ai.Tool{Name: name, Description: desc, Parameters: json.RawMessage(`{"type":"object"}`)}
	}
	sys := func(id storage.ID, d core.SystemData) *storage.Entry {
		data, _ := json.Marshal(d)
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "system", Data: data, Model: []ai.Message{{Role: ai.RoleSystem, Content: ai.Blocks(ai.Text("s"))}}}
	}
	tr := newTranscripts()
	tr.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteEntry, Entry: sys(2, core.SystemData{ToolsAdded: []ai.Tool{tool("z", "before any baseline")}})},
		{Type: storage.WriteEntry, Entry: sys(3, core.SystemData{Baseline: true, ToolsAdded: []ai.Tool{tool("a", "1"), tool("b", "1"), tool("c", "1")}})},
		{Type: storage.WriteEntry, Entry: sys(4, core.SystemData{ToolsRemoved: []ai.Tool{tool("a", "")}, ToolsAdded: []ai.Tool{tool("d", "1"), tool("b", "2"), tool("a", "2")}})},
		{Type: storage.WriteEntry, Entry: sys(5, core.SystemData{ToolsRemoved: []ai.Tool{tool("c", "")}})},
	}})
	want := []ai.Tool{tool("b", "2"), tool("d", "1"), tool("a", "2")}
	_, got, _ := tr.projectRequest(1, 5)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tools %v; want %v", got, want)
	}
	cx, _ := tr.derive(1, 5)
	c := core.Context{ConversationID: 1}
	for _, ce := range cx {
		c.Entries = append(c.Entries, core.ContextEntry{Entry: tr.entry(1, ce.ID), Messages: ce.Messages})
	}
	fold, err := c.System()
	if err != nil || !reflect.DeepEqual(fold.Tools, want) {
		t.Fatalf("the harness folds %v (%v); the test wants %v", fold.Tools, err, want)
	}
}

// Messages are the same as a provider receives them: a list one side reads
// back empty and the other nil is the same; another text is not, and the
// failure shows the first message that differs, whole.
func TestRequestMessagesCompareAsTheProviderReceivesThem(t *testing.T) {
	sys := func(tools []ai.Tool) ai.Message {
		return ai.Message{Role: ai.RoleSystem, Content: ai.PlainText("be brief"), ToolsAdded: tools}
	}
	if !sameMessages([]ai.Message{sys(nil)}, []ai.Message{sys([]ai.Tool{})}) {
		t.Error("a system message without tools differs from one with an empty list of them")
	}
	other := ai.UserText("bye", 0)
	if sameMessages([]ai.Message{sys(nil), ai.UserText("hi", 0)}, []ai.Message{sys(nil), other}) {
		t.Error("two user messages of different texts are the same")
	}
	if d := firstDifference([]ai.Message{sys(nil), ai.UserText("hi", 0)}, []ai.Message{sys(nil), other}); !strings.Contains(d, "message 1") || !strings.Contains(d, "bye") {
		t.Errorf("the difference shown: %q", d)
	}
}
