package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A generation that fails after its request keeps its model's answer in
// the settling commit and names it; one that fails before any request, or
// hands an overflow to a collapse, keeps none.
func TestAFailedGenerationKeepsItsAnswer(t *testing.T) {
	answer := func(id, conv storage.ID) storage.Write {
		return storage.Write{Type: storage.WriteEntry, Entry: &storage.Entry{ID: id, ConversationID: conv, Kind: "assistant", ByTaskID: 6,
			Model: []ai.Message{{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: "boom"}}}}
	}
	settle := func(state string) storage.Write {
		return storage.Write{Type: storage.WriteSettle, ID: 6, Status: "failed", State: json.RawMessage(state)}
	}
	execute := core.Invocation{Task: 6, ConversationID: 1, Method: core.MethodExecute}
	check := func(inv core.Invocation, status string, writes ...storage.Write) error {
		o := newOracle()
		o.kinds[6], o.convs[6], o.statuses[6] = agent.GenerationKindName, 1, status
		return o.failedAnswers(inv, true, storage.CommitBatch{Kind: storage.BatchMain, Writes: writes}, "task 6's execute", storage.Range{First: 20, Last: 20 + storage.ID(len(writes)) - 1})
	}
	for name, tc := range map[string]struct {
		status string
		writes []storage.Write
	}{
		"a provider's error, kept":           {"streaming", []storage.Write{answer(20, 1), settle(`{"reason":"boom","assistant":20}`)}},
		"a model nobody serves":              {"pending", []storage.Write{settle(`{"reason":"no model faux-9"}`)}},
		"a spent budget, on a retry":         {"retry_wait", []storage.Write{settle(`{"reason":"budget"}`)}},
		"an overflow handed to a collapse":   {"streaming", []storage.Write{settle(`{"reason":"overflow: too long","collapse":25}`)}},
		"a settlement that is not a failure": {"streaming", []storage.Write{answer(20, 1), {Type: storage.WriteSettle, ID: 6, Status: "done", State: json.RawMessage(`{}`)}}},
	} {
		if err := check(execute, tc.status, tc.writes...); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := check(core.Invocation{Task: 6, Method: core.MethodAbort}, "streaming", settle(`{"reason":"aborted"}`)); err != nil {
		t.Errorf("an abort, which the abort rows hold: %v", err)
	}
	for name, tc := range map[string]struct {
		status string
		writes []storage.Write
	}{
		"a provider's error, dropped":       {"streaming", []storage.Write{settle(`{"reason":"boom"}`)}},
		"an answer the state does not name": {"streaming", []storage.Write{answer(20, 1), settle(`{"reason":"boom"}`)}},
		"a state naming another entry":      {"streaming", []storage.Write{answer(20, 1), settle(`{"reason":"boom","assistant":19}`)}},
		"an answer in another conversation": {"streaming", []storage.Write{answer(20, 2), settle(`{"reason":"boom","assistant":20}`)}},
		"an answer kept before any request": {"pending", []storage.Write{answer(20, 1), settle(`{"reason":"no model","assistant":20}`)}},
		"a state that does not decode":      {"streaming", []storage.Write{answer(20, 1), settle(`{"assistant":"twenty"}`)}},
	} {
		var oe *oracleError
		if err := check(execute, tc.status, tc.writes...); !errors.As(err, &oe) || oe.Rule != ruleFailedAnswer {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleFailedAnswer)
		}
	}
}
