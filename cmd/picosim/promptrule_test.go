package main

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// A Prompt answers as its input ended: the done input's result entry, or
// an InputError naming the input and its stored result; anything else
// breaks the rule.
func TestAPromptAnswersAsItsInputEnded(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	result := func(input storage.ID, r agent.InputResult) storage.Write {
		a := agent.InputResultValue.In(1).WithKey(strconv.FormatInt(int64(input), 10)).Address
		raw, _ := json.Marshal(r)
		return storage.Write{Type: storage.WriteValueSet, Addr: &a, Value: raw}
	}
	done := agent.InputResult{Status: agent.InputDone, RequestID: "prompt-1", PlacementEntryID: 3, ResultEntryID: 9}
	failed := agent.InputResult{Status: agent.InputFailed, RequestID: "prompt-2", PlacementEntryID: 11, Reason: "no model"}
	if _, err := store.Commit(ctx, storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
		{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}},
		result(4, done), result(10, failed),
	}}); err != nil {
		t.Fatal(err)
	}
	answer := &storage.Entry{ID: 9, ConversationID: 1, Kind: "assistant"}
	cases := []struct {
		name   string
		req    string
		answer *storage.Entry
		ie     *agent.InputError
		broken bool
	}{
		{name: "the result entry", req: "prompt-1", answer: answer},
		{name: "the placement entry", req: "prompt-1", answer: &storage.Entry{ID: 3, ConversationID: 1, Kind: "user"}, broken: true},
		{name: "an answer for a failed input", req: "prompt-2", answer: answer, broken: true},
		{name: "the failure as stored", req: "prompt-2", ie: &agent.InputError{Input: 10, Result: failed}},
		{name: "another input's failure", req: "prompt-2", ie: &agent.InputError{Input: 4, Result: failed}, broken: true},
		{name: "a failure for a done input", req: "prompt-1", ie: &agent.InputError{Input: 4, Result: done}, broken: true},
		{name: "no input with its request id", req: "prompt-3", answer: answer, broken: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			holdsOrBreaks(t, newOracle().prompted(ctx, store, 1, tc.req, tc.answer, tc.ie), rulePrompt, tc.broken)
		})
	}
}

// Programs of every promptSeeds-th seed prompt, and parse back; no other
// program does.
func TestPromptsAreDrawnForTheirSeeds(t *testing.T) {
	drawnForSeeds(t, "prompt", 40, func(seed uint64) bool { return seed%promptSeeds == 0 })
}
