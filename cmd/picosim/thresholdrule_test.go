package main

import (
	"encoding/json"
	"testing"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// thresholdOracle is an oracle of conversation 1 whose entries are msgs,
// one entry each from id 10 on, with the threshold written at 1 and a
// faux window of 1,000 tokens.
func thresholdOracle(threshold float64, entries ...*storage.Entry) *oracle {
	o := newOracle()
	o.window = 1000
	b := storage.CommitBatch{Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}}
	for _, e := range entries {
		e.ConversationID = 1
		b.Writes = append(b.Writes, storage.Write{Type: storage.WriteEntry, Entry: e})
	}
	o.transcripts.record(b)
	v, _ := json.Marshal(threshold)
	key := settingKey{agent.CollapseThresholdValue.Namespace, 1}
	o.settings[key] = append(o.settings[key], settingWrite{seq: 1, value: v})
	return o
}

func textEntry(id storage.ID, role ai.Role, text string) *storage.Entry {
	return &storage.Entry{ID: id, Kind: "user", Model: []ai.Message{{Role: role, Content: ai.Blocks(ai.Text(text))}}}
}

// The estimate is a quarter of the characters, rounded up, of every
// message but a failed answer's, counted from the newest answer after the
// head whose usage the provider reported, plus that usage.
func TestThresholdEstimateByTheRule(t *testing.T) {
	answer := func(id storage.ID, text string, total int64) *storage.Entry {
		e := textEntry(id, ai.RoleAssistant, text)
		e.Kind, e.Model[0].Usage = "assistant", &ai.Usage{Input: total}
		return e
	}
	failed := textEntry(14, ai.RoleAssistant, "a long answer that failed midway")
	failed.Model[0].StopReason = ai.StopError
	call := &storage.Entry{ID: 15, Kind: "assistant", Model: []ai.Message{{Role: ai.RoleAssistant,
		Content: ai.Blocks(ai.Block{Type: ai.BlockToolCall, Name: "a", Arguments: json.RawMessage(`{"x":1}`)}), StopReason: ai.StopToolUse}}}
	head := textEntry(20, ai.RoleUser, "summary")
	head.Kind, head.Head = "summary", 12
	for _, tc := range []struct {
		name    string
		entries []*storage.Entry
		want    int64
	}{
		{"characters throughout", []*storage.Entry{textEntry(10, ai.RoleUser, "12345678"), textEntry(11, ai.RoleToolResult, "123")}, 3},
		{"from the newest usage", []*storage.Entry{textEntry(10, ai.RoleUser, "1234"), answer(11, "ok", 100), textEntry(12, ai.RoleToolResult, "12345")}, 102},
		{"a failed answer left out", []*storage.Entry{answer(11, "ok", 100), failed}, 100},
		{"a call's name and arguments", []*storage.Entry{call}, 2},
		{"no usage from before the head", []*storage.Entry{textEntry(10, ai.RoleUser, "1234"), answer(12, "okay", 500), head}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := thresholdOracle(0.5, tc.entries...)
			if got, ok := o.transcripts.estimate(1, 30); !ok || got != tc.want {
				t.Fatalf("estimate = %d, %v; want %d", got, ok, tc.want)
			}
		})
	}
}

// A first attempt over the threshold without a collapse breaks the rule,
// unless a collapse of the conversation is live or there is nothing to
// cut; a threshold collapse of a context within it breaks it too.
func TestThresholdCollapsesWhenOver(t *testing.T) {
	long := func(id storage.ID, role ai.Role) *storage.Entry {
		text := make([]byte, 400)
		for i := range text {
			text[i] = 'x'
		}
		e := textEntry(id, role, string(text))
		if role == ai.RoleAssistant {
			e.Kind = "assistant"
		}
		return e
	}
	history := []*storage.Entry{long(10, ai.RoleUser), long(11, ai.RoleAssistant), long(12, ai.RoleUser), long(13, ai.RoleAssistant), long(14, ai.RoleUser)}
	inv := core.Invocation{Task: 9, ConversationID: 1, Method: core.MethodExecute}
	streaming := storage.Write{Type: storage.WritePatch, ID: 9, Status: "streaming"}
	start := func(o *oracle) error {
		o.kinds[9], o.convs[9] = agent.GenerationKindName, 1
		o.firstAttemptMade(&storage.Task{ID: 9, ConversationID: 1, Kind: agent.GenerationKindName, Status: "pending", State: json.RawMessage(`{}`)})
		return o.thresholdStreaming(inv, true, streaming, storage.Range{First: 31, Last: 31}, "a test")
	}
	t.Run("within", func(t *testing.T) {
		holdsOrBreaks(t, start(thresholdOracle(0.5, history...)), ruleThreshold, false)
	})
	t.Run("over", func(t *testing.T) {
		holdsOrBreaks(t, start(thresholdOracle(0.2, history...)), ruleThreshold, true)
	})
	t.Run("over, a collapse live", func(t *testing.T) {
		o := thresholdOracle(0.2, history...)
		o.kinds[5], o.convs[5] = agent.CollapseKindName, 1
		holdsOrBreaks(t, start(o), ruleThreshold, false)
	})
	t.Run("over, nothing to cut", func(t *testing.T) {
		holdsOrBreaks(t, start(thresholdOracle(0.05, history[0])), ruleThreshold, false)
	})
	collapse := func(o *oracle) error {
		st, _ := json.Marshal(agent.CollapseState{Reason: agent.CollapseThreshold})
		return o.thresholdCollapse(storage.Write{Type: storage.WriteTask, Task: &storage.Task{ID: 6, ConversationID: 1, Kind: agent.CollapseKindName, State: st}}, "a test", 31, 30)
	}
	t.Run("a collapse over", func(t *testing.T) {
		holdsOrBreaks(t, collapse(thresholdOracle(0.2, history...)), ruleThreshold, false)
	})
	t.Run("a collapse within", func(t *testing.T) {
		holdsOrBreaks(t, collapse(thresholdOracle(0.5, history...)), ruleThreshold, true)
	})
}
