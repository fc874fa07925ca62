package main

import (
	"errors"
	"testing"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// A summary that keeps a result but not its call, or one that summarized a
// call whose result lands after it, breaks the rule; a summary that keeps
// or summarizes both does not.
func TestTheCutRuleKeepsExchangesWhole(t *testing.T) {
	assistant := func(id storage.ID, calls ...string) *storage.Entry {
		var blocks []ai.Block
		for _, c := range calls {
			blocks = append(blocks, ai.ToolCall(c, "a", nil))
		}
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "assistant", Model: []ai.Message{{Role: ai.RoleAssistant, Content: ai.Blocks(blocks...)}}}
	}
	result := func(id storage.ID, call string) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "tool_result", Key: call,
			Model: []ai.Message{{Role: ai.RoleToolResult, ToolCallID: call, Content: ai.Blocks(ai.Text("r"))}}}
	}
	summary := func(id, keepsFrom storage.ID) *storage.Entry {
		return &storage.Entry{ID: id, ConversationID: 1, Kind: "summary", Head: keepsFrom, Model: []ai.Message{ai.UserText("summary", 1)}}
	}
	history := []*storage.Entry{
		{ID: 2, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("go", 1)}},
		assistant(3, "c1"), result(4, "c1"),
		{ID: 5, ConversationID: 1, Kind: "user", Model: []ai.Message{ai.UserText("more", 1)}},
		assistant(6, "c2"),
	}
	run := func(batches ...[]*storage.Entry) error {
		o := newOracle()
		o.transcripts.record(storage.CommitBatch{Kind: storage.BatchMain, Writes: []storage.Write{{Type: storage.WriteCreateConversation, Conversation: &storage.Conversation{ID: 1}}}})
		for _, es := range batches {
			b := storage.CommitBatch{Kind: storage.BatchMain}
			for _, e := range es {
				b.Writes = append(b.Writes, storage.Write{Type: storage.WriteEntry, Entry: e})
			}
			o.transcripts.record(b)
			if err := o.cutChecked(b, storage.Range{First: es[0].ID, Last: es[len(es)-1].ID}, "a collapse"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run(history, []*storage.Entry{result(7, "c2")}, []*storage.Entry{summary(8, 5)}); err != nil {
		t.Fatalf("a summary of the first exchange: %v", err)
	}
	if err := run(history, []*storage.Entry{summary(7, 5)}, []*storage.Entry{result(8, "c2")}); err != nil {
		t.Fatalf("a result of a kept call after the summary: %v", err)
	}
	// An answer naming c3 twice: the first result is the call's, and a
	// second one kept past the summary splits nothing (§2.2).
	paired := []*storage.Entry{history[0], assistant(3, "c3", "c3"), result(4, "c3"), result(5, "c3")}
	if err := run(paired, []*storage.Entry{summary(6, 5)}); err != nil {
		t.Fatalf("a second result of an answered id kept past the summary: %v", err)
	}
	for name, batches := range map[string][][]*storage.Entry{
		"a kept first result of a summarized call under an id named twice": {paired, {summary(6, 4)}},
		"a kept result of a summarized call":                               {history, {summary(7, 4)}},
		"a result after the summary of its call":                           {history, {summary(7, 7)}, {result(8, "c2")}},
	} {
		var oe *oracleError
		if err := run(batches...); !errors.As(err, &oe) || oe.Rule != ruleCut {
			t.Errorf("%s: %v; want a %s violation", name, err, ruleCut)
		}
	}
}
