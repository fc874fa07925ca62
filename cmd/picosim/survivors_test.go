package main

// The rules here were added for mutants of the harness that no run caught
// (docs/faults.md names them): each test holds a rule to what it says.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// A collapse recovered with its candidate durable must publish it: its
// recover may neither go back to retry_wait nor settle interrupted; with
// no candidate, or by another method, it may.
func TestARecoveredCollapsePublishesItsCandidate(t *testing.T) {
	addr := agent.CollapseCandidateAddress
	addr.Scope.ID = 5
	scratch := func(typ storage.WriteType) storage.CommitBatch {
		w := storage.Write{Type: typ, Addr: &addr}
		if typ == storage.WriteValueSet {
			w.Value = json.RawMessage(`{"summary":"s"}`)
		}
		return storage.CommitBatch{Kind: storage.BatchScratch, Task: 5, Writes: []storage.Write{w}}
	}
	main := func(w storage.Write) storage.CommitBatch {
		return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{w}}
	}
	retry := main(storage.Write{Type: storage.WritePatch, ID: 5, Status: "retry_wait", Role: storage.RoleStart})
	interrupted := main(storage.Write{Type: storage.WriteSettle, ID: 5, Status: agent.CollapseInterrupted, Role: storage.RoleTerminal})
	published := main(storage.Write{Type: storage.WriteSettle, ID: 5, Status: "done", Role: storage.RoleTerminal})
	recover := core.Invocation{Task: 5, Method: core.MethodRecover}
	for _, tc := range []struct {
		name    string
		batches []storage.CommitBatch
		inv     core.Invocation
		broken  bool
	}{
		{"published", []storage.CommitBatch{scratch(storage.WriteValueSet), published}, recover, false},
		{"sent back to retry_wait", []storage.CommitBatch{scratch(storage.WriteValueSet), retry}, recover, true},
		{"settled interrupted", []storage.CommitBatch{scratch(storage.WriteValueSet), interrupted}, recover, true},
		{"no candidate", []storage.CommitBatch{retry}, recover, false},
		{"a candidate deleted", []storage.CommitBatch{scratch(storage.WriteValueSet), scratch(storage.WriteValueDelete), retry}, recover, false},
		{"by its execute", []storage.CommitBatch{scratch(storage.WriteValueSet), retry}, core.Invocation{Task: 5, Method: core.MethodExecute}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOracle()
			o.kinds[5] = agent.CollapseKindName
			var err error
			for i, b := range tc.batches {
				if err = o.candidateSeen(tc.inv, true, b, "a test", storage.Range{First: storage.ID(10 + i), Last: storage.ID(10 + i)}); err != nil {
					break
				}
			}
			holdsOrBreaks(t, err, ruleCandidate, tc.broken)
		})
	}
}

// A host verb that returns no error returns the task its commit made: of
// its kind, in its conversation.
func TestAHostVerbReturnsWhatItMade(t *testing.T) {
	o := newOracle()
	o.kinds[4], o.convs[4] = agent.CollapseKindName, 1
	o.kinds[6], o.convs[6] = agent.JobKindName, 1
	for _, tc := range []struct {
		name   string
		kind   string
		conv   storage.ID
		id     storage.ID
		broken bool
	}{
		{"its collapse", agent.CollapseKindName, 1, 4, false},
		{"its job", agent.JobKindName, 1, 6, false},
		{"no task", agent.CollapseKindName, 1, 0, true},
		{"a task of another kind", agent.CollapseKindName, 1, 6, true},
		{"a task of another conversation", agent.CollapseKindName, 2, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, o.hostMade("a verb", tc.kind, tc.conv, tc.id), ruleHostMade, tc.broken)
		})
	}
}

// A host's Write returns the entry that placed its input when the commit
// that accepted it placed it, and 0 when it queued: an entry of the
// conversation, of the kind asked for, heading the context from itself
// when it is a reset.
func TestAWriteReturnsTheEntryThatPlacedIt(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	notice, reset := core.NoticeKind.Kind(), core.ResetKind.Kind()
	result := func(entry storage.ID) []byte {
		return []byte(fmt.Sprintf(`{"status":"placed","placementEntryId":%d}`, entry))
	}
	addr := func(input string) *storage.Address {
		a := agent.InputResultValue.In(1).WithKey(input).Address
		return &a
	}
	if _, err := store.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: notice}},
		{Type: storage.WriteValueSet, Addr: addr("3"), Value: result(2)},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: reset, Head: 4}},
		{Type: storage.WriteValueSet, Addr: addr("5"), Value: result(4)},
	}}); err != nil {
		t.Fatal(err)
	}
	o := newOracle()
	o.placedAtOnce[3], o.placedAtOnce[5] = 2, 4
	for _, tc := range []struct {
		name         string
		input, entry storage.ID
		kind         string
		broken       bool
	}{
		{"a notice placed at once", 3, 2, notice, false},
		{"a reset placed at once", 5, 4, reset, false},
		{"a queued write", 7, 0, notice, false},
		{"a placed write said queued", 3, 0, notice, true},
		{"a queued write said placed", 7, 2, notice, true},
		{"another kind", 3, 2, reset, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, o.writeMade(ctx, store, 1, tc.input, tc.entry, tc.kind), ruleHostMade, tc.broken)
		})
	}
}

// A watch lags only past its bound: a lag after no more commits than the
// bound since its view was read breaks the rule; one after more holds.
func TestAWatchLagsOnlyPastItsBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queue  int
		made   storage.ID
		broken bool
	}{
		{"the default bound, not reached", 0, 1024, true},
		{"the default bound, passed", 0, 1025, false},
		{"a drawn bound, not reached", 3, 3, true},
		{"a drawn bound, passed", 3, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, lagChecked("a watch", 10, 10+tc.made, tc.queue), ruleWatchLag, tc.broken)
		})
	}
}

// A placed input is the entry the host gave: its kind, a user entry's
// text, a written notice's data, a reset's or a handoff's head at itself
// and a handoff's message.
func TestAPlacedInputIsWhatTheHostGave(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	result := func(input, entry storage.ID) storage.Write {
		a := agent.InputResultValue.In(1).WithKey(strconv.FormatInt(int64(input), 10)).Address
		raw, _ := json.Marshal(agent.InputResult{Status: agent.InputDone, PlacementEntryID: entry})
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: raw}
	}
	user, _ := json.Marshal(map[string]string{})
	notice, _ := json.Marshal(map[string]string{"text": "w"})
	handoff, _ := json.Marshal(core.HandoffData{Text: "go"})
	if _, err := store.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 2, ConversationID: 1, Kind: core.UserKind.Kind(), Data: user, Model: []ai.Message{ai.UserText("hi", 0)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 3, ConversationID: 1, Kind: core.NoticeKind.Kind(), Data: notice}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 4, ConversationID: 1, Kind: core.ResetKind.Kind(), Head: 4}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 5, ConversationID: 1, Kind: core.ResetKind.Kind()}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 6, ConversationID: 1, Kind: core.HandoffKind.Kind(), Head: 6, Data: handoff, Model: []ai.Message{ai.UserText("go", 0)}}},
		{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 7, ConversationID: 1, Kind: core.HandoffKind.Kind(), Head: 7, Data: handoff, Model: []ai.Message{ai.UserText("stop", 0)}}},
		result(10, 2), result(11, 3), result(12, 4), result(13, 5), result(14, 6), result(15, 7),
	}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		given  map[storage.ID]hostInput
		broken bool
	}{
		{"as given", map[storage.ID]hostInput{10: {1, core.UserKind.Kind(), "hi"}, 11: {1, core.NoticeKind.Kind(), "w"},
			12: {1, core.ResetKind.Kind(), ""}, 14: {1, core.HandoffKind.Kind(), "go"}}, false},
		{"a user entry saying something else", map[storage.ID]hostInput{10: {1, core.UserKind.Kind(), "bye"}}, true},
		{"a notice with other data", map[storage.ID]hostInput{11: {1, core.NoticeKind.Kind(), "x"}}, true},
		{"an entry of another kind", map[storage.ID]hostInput{11: {1, core.UserKind.Kind(), "w"}}, true},
		{"a reset without its head", map[storage.ID]hostInput{13: {1, core.ResetKind.Kind(), ""}}, true},
		{"a handoff saying something else", map[storage.ID]hostInput{15: {1, core.HandoffKind.Kind(), "go"}}, true},
		{"a handoff with other data", map[storage.ID]hostInput{14: {1, core.HandoffKind.Kind(), "stop"}}, true},
		{"an input the host did not give", map[storage.ID]hostInput{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{inputs: map[storage.ID][]storage.ID{1: {10, 11}}, given: tc.given}
			holdsOrBreaks(t, e.placedAsGiven(ctx, store), rulePlacedAsGiven, tc.broken)
		})
	}
}
