package main

import (
	"encoding/json"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// ruleFailedAnswer: a generation that fails once its model answered keeps
// the answer (pico-v3 §8.2): the settlement's commit appends the
// provider's final message as an assistant entry of the generation, in its
// conversation, and the settled state names it; the transcript shows what
// went wrong. A failure before any request (a model nobody serves, a spent
// budget, a deferred handle its provider cannot fetch) has no answer to
// keep, and names none; nor does an overflow that hands the turn to a
// collapse, whose successor asks again.
const ruleFailedAnswer oracleRule = "a-failed-generation-keeps-its-answer"

// failedAnswers holds batch b's settlements of a generation by its own
// execute to the rule. It runs before abortRows notes the statuses b
// leaves: a generation was streaming at its settlement exactly when its
// attempt's request went out.
func (o *oracle) failedAnswers(inv core.Invocation, byTask bool, b storage.CommitBatch, by string, r storage.Range) error {
	if !byTask || inv.Method != core.MethodExecute || o.kinds[inv.Task] != agent.GenerationKindName {
		return nil
	}
	for i, w := range b.Writes {
		status, known := o.statuses[w.ID]
		if w.Type != storage.WriteSettle || w.ID != inv.Task || w.Status != "failed" || !known {
			continue
		}
		var st struct {
			Assistant storage.ID `json:"assistant"`
			Collapse  storage.ID `json:"collapse"`
		}
		if err := json.Unmarshal(w.State, &st); len(w.State) > 0 && err != nil {
			return o.fail(broke(ruleFailedAnswer, "%s settled generation %d failed at %d with a state that does not decode: %v", by, w.ID, r.First+storage.ID(i), err))
		}
		var answers []*storage.Entry
		for _, x := range b.Writes {
			if x.Type == storage.WriteEntry && core.AssistantKind.Is(x.Entry) && x.Entry.ByTaskID == w.ID {
				answers = append(answers, x.Entry)
			}
		}
		if st.Collapse != 0 {
			continue
		}
		streamed := status == "streaming"
		switch {
		case streamed && len(answers) != 1:
			return o.fail(broke(ruleFailedAnswer, "%s settled generation %d failed at %d after its request, with %d answers in its commit; want its model's, one",
				by, w.ID, r.First+storage.ID(i), len(answers)))
		case streamed && (st.Assistant != answers[0].ID || answers[0].ConversationID != o.convs[w.ID] || len(answers[0].Model) != 1):
			return o.fail(broke(ruleFailedAnswer, "%s settled generation %d failed at %d naming answer %d; its commit appended answer %d to conversation %d with %d messages (the generation is conversation %d's)",
				by, w.ID, r.First+storage.ID(i), st.Assistant, answers[0].ID, answers[0].ConversationID, len(answers[0].Model), o.convs[w.ID]))
		case !streamed && (len(answers) != 0 || st.Assistant != 0):
			return o.fail(broke(ruleFailedAnswer, "%s settled generation %d failed at %d, %s, before any request, with %d answers, naming answer %d; want none",
				by, w.ID, r.First+storage.ID(i), status, len(answers), st.Assistant))
		}
	}
	return nil
}
