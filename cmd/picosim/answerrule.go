package main

import (
	"encoding/json"
	"slices"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// ruleAnswer: an input is done with its answer (§8.1, §9.1): the result
// that ends it done names an assistant entry its own commit writes, in the
// input's conversation, a final answer (neither calls nor a failure), by
// the generation that settles in that commit with the input in its group.
const ruleAnswer oracleRule = "done-names-its-answer"

// answered holds an input result set done at seq, in batch b at r, to the
// rule.
func (o *oracle) answered(input string, conv storage.ID, res agent.InputResult, b storage.CommitBatch, r storage.Range, by string, seq storage.ID) error {
	if res.Status != agent.InputDone {
		return nil
	}
	id := res.ResultEntryID
	if id < r.First || id > r.Last || b.Writes[id-r.First].Type != storage.WriteEntry || b.Writes[id-r.First].Entry == nil {
		return o.fail(broke(ruleAnswer, "%s set input %s done at %d naming entry %d, which its commit %d–%d does not write", by, input, seq, id, r.First, r.Last))
	}
	e := b.Writes[id-r.First].Entry
	final := e.Kind == "assistant" && len(e.Model) == 1 && e.Model[0].Role == ai.RoleAssistant &&
		!slices.ContainsFunc(e.Model[0].Content.Blocks, func(bl ai.Block) bool { return bl.Type == ai.BlockToolCall }) &&
		e.Model[0].StopReason != ai.StopError && e.Model[0].StopReason != ai.StopAborted
	if !final || e.ConversationID != conv {
		return o.fail(broke(ruleAnswer, "%s set input %s of conversation %d done at %d naming entry %d, a %s entry of conversation %d, not a final answer of its own",
			by, input, conv, seq, id, e.Kind, e.ConversationID))
	}
	for _, w := range b.Writes {
		if w.Type != storage.WriteSettle || w.ID != e.ByTaskID || o.kinds[w.ID] != agent.GenerationKindName {
			continue
		}
		var st struct {
			Inputs []storage.ID `json:"inputs"`
		}
		if json.Unmarshal(w.State, &st) == nil && slices.ContainsFunc(st.Inputs, func(in storage.ID) bool { return in.String() == input }) {
			return nil
		}
	}
	return o.fail(broke(ruleAnswer, "%s set input %s done at %d with answer %d, by task %d, which its commit does not settle as a generation answering the input",
		by, input, seq, id, e.ByTaskID))
}
