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
