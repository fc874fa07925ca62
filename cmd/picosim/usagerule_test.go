package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A generation's usage row is its current attempt's, in its conversation,
// and a done row carries its answer's usage and model.
func TestTheUsageRuleHoldsARowToItsAttempt(t *testing.T) {
	used := &ai.Usage{Input: 10, Output: 2, TotalTokens: 12}
	answer := storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: 20, ConversationID: 1, Kind: "assistant", ByTaskID: 6,
		Model: []ai.Message{{Role: ai.RoleAssistant, Model: "faux-1", Usage: used, Content: ai.Blocks(ai.Text("done"))}}}}
	check := func(row agent.UsageRow, writes ...storage.Write) error {
		o := newOracle()
		o.kinds[6], o.convs[6] = agent.GenerationKindName, 1
		o.attemptStarted(storage.Write{Type: storage.WritePatch, ID: 6, Status: "streaming", State: json.RawMessage(`{"attempt":2}`)})
		return o.usageRow(row, storage.CommitBatch{Kind: storage.BatchMain, Writes: writes}, "task 6's execute", 21)
	}
	good := agent.UsageRow{ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 2, Outcome: "done", Usage: used}
	if err := check(good, answer); err != nil {
		t.Fatalf("the attempt's own row: %v", err)
	}
	retry := good
	retry.Outcome, retry.Usage = "retry", nil
	if err := check(retry); err != nil {
		t.Fatalf("a retry's row: %v", err)
	}
	other := *used
	other.Output = 3
	for name, row := range map[string]agent.UsageRow{
		"another attempt":      {ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 1, Outcome: "done", Usage: used},
		"another conversation": {ConversationID: 2, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 2, Outcome: "done", Usage: used},
		"other usage":          {ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-1", Attempt: 2, Outcome: "done", Usage: &other},
		"another model":        {ConversationID: 1, TaskID: 6, Kind: agent.GenerationKindName, Model: "faux-2", Attempt: 2, Outcome: "done", Usage: used},
	} {
		var oe *oracleError
		if err := check(row, answer); !errors.As(err, &oe) || oe.Rule != ruleUsageRow {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleUsageRow)
		}
	}
	var oe *oracleError
	if err := check(good); !errors.As(err, &oe) || oe.Rule != ruleUsageRow {
		t.Errorf("a done row without its answer: %v; want a %s violation", err, ruleUsageRow)
	}
}
