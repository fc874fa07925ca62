package agent

import (
	"context"
	"strconv"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// RuleInputResult is the rule a batch breaks when an input result moves
// backwards, a terminal one changes, or an inbox element leaves without its
// result.
const RuleInputResult core.Rule = "input-result-transition" // §7.3, §8.1

// checkInputResults is the agent's batch rule (§7.3, §8.1): input results
// move forward only (terminal ones never change), and removing an inbox
// element writes its result in the same batch. before is committed state.
func checkInputResults(ctx context.Context, before storage.Storage, batch storage.CommitBatch) error {
	type input struct{ conv, id storage.ID }
	results := map[input]InputResult{} // as this batch leaves them
	var removed []input
	for _, w := range batch.Writes {
		if w.Addr == nil || w.Addr.Scope.Kind != storage.ScopeConversation {
			continue
		}
		a := *w.Addr
		switch {
		case a.Namespace == InputResultValue.Namespace:
			if w.Type != storage.WriteValueSet {
				return core.Rejectf(RuleInputResult, 0, "%s: input results are never deleted", a)
			}
			id, err := strconv.ParseInt(a.Key, 10, 64)
			if err != nil || id <= 0 {
				return core.Rejectf(RuleInputResult, 0, "%s: the key is not an input id", a)
			}
			next, err := core.Unmarshal[InputResult](w.Value)
			if err != nil {
				return &core.CommitError{Rule: RuleInputResult, Detail: a.String(), Err: err}
			}
			in := input{a.Scope.ID, storage.ID(id)}
			prev, had := results[in]
			if !had {
				v, ok, err := before.GetValue(ctx, a, 0)
				if err != nil {
					return err
				}
				if ok {
					if prev, err = core.Unmarshal[InputResult](v.Value); err != nil {
						return &core.CommitError{Rule: RuleInputResult, Detail: a.String(), Err: err}
					}
					had = true
				}
			}
			if !inputTransition(prev.Status, had, next.Status) {
				from := "nothing"
				if had {
					from = string(prev.Status)
				}
				return core.Rejectf(RuleInputResult, in.id, "%s: an input result cannot go from %s to %s", a, from, next.Status)
			}
			results[in] = next
		case a.Namespace == InboxList.Namespace && w.Type == storage.WriteListRemove && !plant.On("inbox-remove-unresulted"):
			removed = append(removed, input{a.Scope.ID, w.Element})
		case a.Namespace == InboxList.Namespace && w.Type == storage.WriteListClear:
			return core.Rejectf(RuleInputResult, 0, "%s: clearing the inbox would drop inputs without results; cancel them one by one", a)
		}
	}
	for _, in := range removed {
		if r, ok := results[in]; !ok || r.Status == InputQueued {
			return core.Rejectf(RuleInputResult, in.id, "inbox element %d of conversation %d is removed without writing its result", in.id, in.conv)
		}
	}
	return nil
}

// inputTransition is the input-result state machine.
func inputTransition(from InputStatus, had bool, to InputStatus) bool {
	if !had {
		return to == InputQueued || to == InputRunning || to == InputPlaced
	}
	switch from {
	case InputQueued:
		if plant.On("input-queued-skips-to-done") && to == InputDone {
			return true
		}
		return to == InputRunning || to == InputPlaced || to == InputCancelled
	case InputRunning:
		return to == InputDone || to == InputFailed || to == InputCancelled || to == InputStopped
	}
	return false
}
