package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// PostToolsState is a post_tools task's state: the exchange it closes and
// the input group it carries.
type PostToolsState struct {
	Assistant storage.ID   `json:"assistant"`
	Tools     []storage.ID `json:"tools"`
	Inputs    []storage.ID `json:"inputs"`
	// Set at settlement.
	Stopped bool   `json:"stopped,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// PostToolsKind is the built-in post_tools kind (§5.5): it starts once
// every tool of an exchange is terminal and decides what happens next, in
// one commit.
var PostToolsKind core.TaskKind = postToolsKind{core.Statuses{Name: PostToolsKindName, Initial: "pending", Roles: map[string]storage.TaskRole{
	"pending": storage.RoleStart, "done": storage.RoleTerminal, "failed": storage.RoleTerminal, "aborted": storage.RoleTerminal,
}}}

type postToolsKind struct{ core.Statuses }

func (k postToolsKind) Execute(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[PostToolsState](task)
	if err != nil {
		return err
	}
	cfg, err := configOf(rt.Harness())
	if err != nil {
		return err
	}
	conv := task.ConversationID
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		tasks, err := tx.GetTasks(st.Tools)
		if err != nil {
			return err
		}
		var outs []toolOutcome
		for _, id := range st.Tools {
			t, ok := tasks[id]
			if !ok || t.Live() {
				return fmt.Errorf("agent: post_tools %d: tool task %d is missing or not terminal", task.ID, id)
			}
			ts, err := decodeState[toolOutcomeView](t)
			if err != nil {
				return err
			}
			if ts.Output != nil {
				outs = append(outs, *ts.Output)
			}
		}
		stop := func(status InputStatus, reason string) error {
			if err := resolveInputs(tx.Tx, conv, st.Inputs, func(r InputResult) InputResult {
				r.Status, r.Reason = status, reason
				return r
			}); err != nil {
				return err
			}
			if _, err := placeAtBoundary(tx.Tx, conv, []InputMode{ModeWrite}); err != nil {
				return err
			}
			settled := "done"
			if status == InputFailed && !plant.On("posttools-conflict-settles-done") {
				settled = "failed"
			}
			tx.Settle(task.ID, settled, map[string]any{"stopped": true, "reason": reason})
			return nil
		}
		terminate := slices.ContainsFunc(outs, func(o toolOutcome) bool { return o.Terminate })
		if plant.On("posttools-terminate-last-only") {
			terminate = len(outs) > 0 && outs[len(outs)-1].Terminate
		}
		if terminate {
			return stop(InputStopped, "a tool terminated the turn")
		}
		var handoff string
		for _, o := range outs {
			if o.Handoff == "" || o.Handoff == handoff {
				continue
			}
			if handoff != "" {
				// Two resets in one exchange have no order to pick.
				return stop(InputFailed, "conflicting handoffs in one exchange")
			}
			handoff = o.Handoff
		}
		var added []string
		for _, o := range outs {
			added = append(added, o.AddedTools...)
		}
		var selected []string
		if len(added) > 0 {
			gen, err := readConfig(tx.Tx, conv)
			if err != nil {
				return err
			}
			selected = gen.SelectedTools
			if selected == nil && !plant.On("addtools-from-empty") || plant.On("addtools-from-catalog") {
				selected = cfg.tools.order
			}
			selected = slices.Clone(selected)
			for _, n := range added {
				if !slices.Contains(selected, n) {
					selected = append(selected, n)
				}
			}
			// Rewindable state precedes every entry of the commit (§3.2).
			tx.SetValue(SelectedToolsValue.Address, selected)
		}
		late := plant.On("posttools-handoff-after-input")
		if handoff != "" && !late || plant.On("posttools-hands-off-unasked") {
			core.AppendHandoff(tx.Tx, conv, handoff, ai.UserText(handoff, rt.Now().UnixMilli()))
		}
		joins := []InputMode{ModeSteer}
		if plant.On("posttools-joins-followup") {
			joins = append(joins, ModeFollowUp)
		}
		joined, err := placeAtBoundary(tx.Tx, conv, []InputMode{ModeWrite}, joins)
		if err != nil {
			return err
		}
		if handoff != "" && late {
			core.AppendHandoff(tx.Tx, conv, handoff, ai.UserText(handoff, rt.Now().UnixMilli()))
		}
		if _, err := cfg.createGeneration(tx.Tx, conv, append(slices.Clone(st.Inputs), joined...), func(c *GenerationConfig) {
			if selected != nil {
				c.SelectedTools = selected
			}
		}); err != nil {
			return err
		}
		if plant.On("posttools-two-successors") && len(joined) > 0 {
			if _, err := cfg.createGeneration(tx.Tx, conv, joined, nil); err != nil {
				return err
			}
		}
		tx.Settle(task.ID, "done", nil)
		return nil
	})
	return err
}

// Recover never runs: post_tools has no inflight status.
func (k postToolsKind) Recover(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	return fmt.Errorf("agent: post_tools %d has no inflight status to recover from", task.ID)
}

// Abort resolves the carried group as cancelled and settles with no
// successor.
func (k postToolsKind) Abort(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[PostToolsState](task)
	if err != nil {
		return err
	}
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if err := resolveInputs(tx.Tx, task.ConversationID, st.Inputs, func(r InputResult) InputResult {
			r.Status, r.Reason = InputCancelled, "aborted"
			return r
		}); err != nil {
			return err
		}
		tx.Settle(task.ID, "aborted", map[string]any{"reason": "aborted"})
		return nil
	})
	return err
}
