package main

import (
	"encoding/json"
	"reflect"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// ruleUsageRow: a generation's usage row is its current attempt's (§8.2):
// the attempt its last start (a patch to streaming) numbered, in its own
// conversation; a done attempt's row carries the usage and model of the
// answer its commit writes.
const ruleUsageRow oracleRule = "usage-row-is-its-attempts"

// attemptStarted notes the attempt a generation's patch to streaming
// starts.
func (o *oracle) attemptStarted(w storage.Write) {
	var st struct {
		Attempt int `json:"attempt"`
	}
	if w.Status == "streaming" && json.Unmarshal(w.State, &st) == nil && st.Attempt > 0 {
		o.attempts[w.ID] = st.Attempt
	}
}

// resyncAttempts reads the generations' current attempts from a restarted
// process's store, which may hold starts the oracle never saw commit.
func (o *oracle) resyncAttempts(tasks []*storage.Task) {
	for _, t := range tasks {
		if t.Kind == agent.GenerationKindName {
			o.attemptStarted(storage.Write{Status: "streaming", ID: t.ID, State: t.State})
		}
	}
}

// usageRow holds a generation's usage row, appended at seq in batch b, to
// the rule.
func (o *oracle) usageRow(row agent.UsageRow, b storage.CommitBatch, by string, seq storage.ID) error {
	if row.Kind != agent.GenerationKindName || o.kinds[row.TaskID] != agent.GenerationKindName {
		return nil
	}
	if attempt, known := o.attempts[row.TaskID]; known && row.Attempt != attempt {
		return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d as attempt %d; its current attempt is %d", by, row.TaskID, seq, row.Attempt, attempt))
	}
	if conv := o.convs[row.TaskID]; row.ConversationID != conv {
		return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d in conversation %d; it is conversation %d's", by, row.TaskID, seq, row.ConversationID, conv))
	}
	if row.Outcome != "done" {
		return nil
	}
	for _, w := range b.Writes {
		if w.Type != storage.WriteEntry || w.Entry == nil || w.Entry.ByTaskID != row.TaskID || w.Entry.Kind != "assistant" || len(w.Entry.Model) == 0 {
			continue
		}
		if m := w.Entry.Model[0]; !reflect.DeepEqual(m.Usage, row.Usage) || m.Model != row.Model {
			return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d as %+v of %q; its answer %d used %+v of %q",
				by, row.TaskID, seq, row.Usage, row.Model, w.Entry.ID, m.Usage, m.Model))
		}
		return nil
	}
	return o.fail(broke(ruleUsageRow, "%s recorded generation %d's usage at %d as done, in a commit without its answer", by, row.TaskID, seq))
}

// ruleToolUsage: a tool call's settlement records the usage its output
// holds (§9.3), whatever it ended as: one usage row of the call, in the
// same commit, with the settlement's status as its outcome and the
// output's usage, and none when the output holds none.
const ruleToolUsage oracleRule = "tool-usage-row-is-its-output"

// toolUsage holds w, a settlement of a tool call at seq in batch b, to
// the rule.
func (o *oracle) toolUsage(w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if o.kinds[w.ID] != agent.ToolKindName {
		return nil
	}
	var st struct {
		Output *agent.ToolOutputState `json:"output"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil {
		return nil
	}
	var rows []agent.UsageRow
	for _, x := range b.Writes {
		var row agent.UsageRow
		if x.Type == storage.WriteListAppend && x.Addr != nil && *x.Addr == agent.UsageList.Address &&
			json.Unmarshal(x.Value, &row) == nil && row.TaskID == w.ID {
			rows = append(rows, row)
		}
	}
	want := 0
	if st.Output.Usage != nil {
		want = 1
	}
	if len(rows) != want {
		return o.fail(broke(ruleToolUsage, "%s settled tool call %d %s at %d with usage %+v and %d usage rows of it in its commit; want %d",
			by, w.ID, w.Status, seq, st.Output.Usage, len(rows), want))
	}
	if want == 0 {
		return nil
	}
	if r := rows[0]; r.Kind != agent.ToolKindName || r.Outcome != w.Status || r.ConversationID != o.convs[w.ID] || !reflect.DeepEqual(r.Usage, st.Output.Usage) {
		return o.fail(broke(ruleToolUsage, "%s settled tool call %d %s at %d with usage %+v; its row says %s, %s, conversation %d, %+v",
			by, w.ID, w.Status, seq, st.Output.Usage, r.Kind, r.Outcome, r.ConversationID, r.Usage))
	}
	return nil
}
