package main

import (
	"encoding/json"
	"strings"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// The budget rule (DESIGN §11): a session's limits on turns, provider
// queries and tool calls hold across every conversation, every provider
// clear and every restart, and a budget refuses only what is past its
// limit. It counts from what the run did, not from pi.budget.used: a turn
// is a generation's first attempt (its patch to streaming at attempt 1),
// a tool call a tool task's start (its patch to running), each counted
// once per task; a query is a request a generation sent the faux
// provider.

// ruleBudget: no more turns, queries or tool calls than the session's
// limits allow, and no input ended by a budget that was not spent.
const ruleBudget oracleRule = "budget-holds"

// budgetCount is what the run has spent, task by task.
type budgetCount struct {
	turns map[storage.ID]bool // generations that started their first attempt
	calls map[storage.ID]bool // tool calls that started running
}

// spend counts a patch of a generation or tool task against the limits.
func (o *oracle) spend(w storage.Write, by string, seq storage.ID) error {
	if o.spent.turns == nil {
		o.spent = budgetCount{turns: map[storage.ID]bool{}, calls: map[storage.ID]bool{}}
	}
	switch o.kinds[w.ID] {
	case agent.GenerationKindName:
		var st struct {
			Attempt int `json:"attempt"`
		}
		if w.Status != "streaming" || json.Unmarshal(w.State, &st) != nil || st.Attempt != 1 || o.spent.turns[w.ID] {
			return nil
		}
		o.spent.turns[w.ID] = true
		if l := o.limits.Turns; l > 0 && len(o.spent.turns) > l {
			return o.fail(broke(ruleBudget, "%s started generation %d's first attempt at %d, turn %d of a session limited to %d", by, w.ID, seq, len(o.spent.turns), l))
		}
	case agent.ToolKindName:
		if w.Status != "running" || o.spent.calls[w.ID] {
			return nil
		}
		o.spent.calls[w.ID] = true
		if l := o.limits.ToolCalls; l > 0 && len(o.spent.calls) > l {
			return o.fail(broke(ruleBudget, "%s started tool call %d (%s) at %d, call %d of a session limited to %d", by, w.ID, o.tools[w.ID], seq, len(o.spent.calls), l))
		}
	}
	return nil
}

// refused checks an input a budget ended: its axis has a limit, and for
// turns the run has started that many.
func (o *oracle) refused(res agent.InputResult, input string, by string, seq storage.ID) error {
	axis := agent.BudgetAxisOf(res)
	if axis == "" {
		return nil
	}
	limit := map[string]int{agent.AxisTurns: o.limits.Turns, agent.AxisQueries: o.limits.Queries, agent.AxisToolCalls: o.limits.ToolCalls}[axis]
	switch {
	case limit == 0:
		return o.fail(broke(ruleBudget, "%s ended input %s at %d for its %s budget; the session has no limit on %s", by, input, seq, axis, axis))
	case axis == agent.AxisTurns && len(o.spent.turns) < limit:
		return o.fail(broke(ruleBudget, "%s ended input %s at %d for its turns budget after %d turns of %d", by, input, seq, len(o.spent.turns), limit))
	}
	return nil
}

// resyncBudget counts what a restarted process's store shows was spent: a
// commit that failed as the process stopped may have persisted a first
// attempt or a call's start the oracle never saw.
func (o *oracle) resyncBudget(tasks []*storage.Task) {
	if o.spent.turns == nil {
		o.spent = budgetCount{turns: map[storage.ID]bool{}, calls: map[storage.ID]bool{}}
	}
	for _, t := range tasks {
		var st struct {
			Attempt int    `json:"attempt"`
			Replay  string `json:"replay"`
		}
		if json.Unmarshal(t.State, &st) != nil {
			continue
		}
		switch {
		case t.Kind == agent.GenerationKindName && st.Attempt >= 1:
			o.spent.turns[t.ID] = true
		case t.Kind == agent.ToolKindName && st.Replay != "":
			o.spent.calls[t.ID] = true
		}
	}
}

// queries holds the requests generations sent the provider to the
// session's query limit. A generation's request names its conversation
// as its session; a collapse's names none.
func (o *oracle) queries(p *faux.Provider) error {
	l := o.limits.Queries
	if l == 0 {
		return nil
	}
	n := 0
	for _, req := range p.Requests() {
		if strings.HasPrefix(req.SessionID, "conversation-") {
			n++
		}
	}
	if n > l {
		return o.fail(broke(ruleBudget, "generations sent the provider %d requests; the session is limited to %d queries", n, l))
	}
	return nil
}
