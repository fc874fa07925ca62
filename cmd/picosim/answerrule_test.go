package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A done result names its commit's final answer by the generation that
// settles with the input in its group; anything else breaks the rule.
func TestTheAnswerRuleTakesOnlyTheGenerationsFinalAnswer(t *testing.T) {
	final := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("done")), StopReason: ai.StopStop}
	calls := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.ToolCall("c1", "a", nil)), StopReason: ai.StopToolUse}
	batch := func(answer ai.Message, conv storage.ID, inputs string, resultAt storage.ID) (storage.CommitBatch, agent.InputResult) {
		return storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{
			{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 20, ConversationID: conv, Kind: "assistant", ByTaskID: 6, Model: []ai.Message{answer}}},
			{Type: storage.WriteSettle, ID: 6, Status: "done", Role: storage.RoleTerminal, State: json.RawMessage(`{"inputs":` + inputs + `}`)},
		}}, agent.InputResult{Status: agent.InputDone, PlacementEntryID: 3, ResultEntryID: resultAt}
	}
	check := func(b storage.CommitBatch, res agent.InputResult) error {
		o := newOracle()
		o.kinds[6] = agent.GenerationKindName
		return o.answered("2", 1, res, b, storage.Range{First: 20, Last: 21}, "task 6's execute", 22)
	}
	if err := check(batch(final, 1, "[2]", 20)); err != nil {
		t.Fatalf("the final answer: %v", err)
	}
	for name, tc := range map[string]struct {
		answer   ai.Message
		conv     storage.ID
		inputs   string
		resultAt storage.ID
	}{
		"an answer with calls":        {calls, 1, "[2]", 20},
		"another conversation's":      {final, 4, "[2]", 20},
		"the placement entry":         {final, 1, "[2]", 3},
		"a generation of other input": {final, 1, "[5]", 20},
	} {
		var oe *oracleError
		if err := check(batch(tc.answer, tc.conv, tc.inputs, tc.resultAt)); !errors.As(err, &oe) || oe.Rule != ruleAnswer {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleAnswer)
		}
	}
}
