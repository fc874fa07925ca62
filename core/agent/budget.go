package agent

import (
	"fmt"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// Budgets (DESIGN §11): limits a session is opened with, on turns, provider
// queries, output tokens, spend, tool calls and wall-clock time. What they
// count is session state, not conversation state, so it carries across a
// provider clear (which starts a new conversation) by construction: a clear
// cannot buy a new allowance. Output tokens and spend are read from the
// usage totals; turns, queries, tool calls and the start time are kept in
// pi.budget.used, which is written only when the session has limits. The
// context budget is per conversation: a new conversation starts empty.

// BudgetLimits are a session's limits; zero means no limit on that axis.
// Turns counts model turns: generations, each counted at its first
// attempt (an answer after tool results is a turn of its own); Queries
// counts every provider request, retries included.
type BudgetLimits struct {
	Turns        int
	Queries      int
	OutputTokens int64
	Spend        float64
	ToolCalls    int
	WallClock    time.Duration
}

func (l BudgetLimits) set() bool { return l != BudgetLimits{} }

// The budget axes, as BudgetError names them.
const (
	AxisTurns        = "turns"
	AxisQueries      = "queries"
	AxisOutputTokens = "output tokens"
	AxisSpend        = "spend"
	AxisToolCalls    = "tool calls"
	AxisWallClock    = "wall clock"
)

// BudgetUsed is pi.budget.used: what the counted axes have used.
type BudgetUsed struct {
	Turns     int   `json:"turns"`
	Queries   int   `json:"queries"`
	ToolCalls int   `json:"toolCalls"`
	StartedAt int64 `json:"startedAt"` // Unix ms of the first counted use
}

// BudgetUsedValue is pi.budget.used.
var BudgetUsedValue = storage.SessionValue[BudgetUsed]("pi.budget.used")

// BudgetError is a turn, query or tool call refused because an axis of the
// session's budget is spent; Error names the axis.
type BudgetError struct {
	Axis  string
	Limit string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget exhausted: %s (limit %s)", e.Axis, e.Limit)
}

// budgetReasonPrefix starts the reason of every input a budget ended, so
// that BudgetAxisOf can read the axis back.
const budgetReasonPrefix = "budget exhausted: "

// BudgetAxisOf reports the axis whose exhaustion ended an input, from its
// result's reason ("" when a budget did not end it).
func BudgetAxisOf(r InputResult) string {
	for _, axis := range []string{AxisTurns, AxisQueries, AxisOutputTokens, AxisSpend, AxisToolCalls, AxisWallClock} {
		if len(r.Reason) >= len(budgetReasonPrefix)+len(axis) && r.Reason[:len(budgetReasonPrefix)+len(axis)] == budgetReasonPrefix+axis {
			return axis
		}
	}
	return ""
}

// spendQuery counts one provider query (a turn as well when turn is set)
// against the budget in tx, or returns the BudgetError of the first spent
// axis and writes nothing.
func (l BudgetLimits) spendQuery(tx *core.Tx, now time.Time, turn bool) (*BudgetError, error) {
	if !l.set() {
		return nil, nil
	}
	used, _, err := core.TxValue(tx, BudgetUsedValue).Get(0)
	if err != nil {
		return nil, err
	}
	totals, _, err := core.TxValue(tx, UsageTotals).Get(0)
	if err != nil {
		return nil, err
	}
	turns := used.Turns
	switch {
	case plant.On("budget-turns-off-by-one"):
		turns--
	case plant.On("budget-turns-refused-early"):
		turns++
	}
	switch {
	case turn && l.Turns > 0 && turns >= l.Turns:
		return &BudgetError{Axis: AxisTurns, Limit: fmt.Sprint(l.Turns)}, nil
	case l.Queries > 0 && used.Queries >= l.Queries:
		return &BudgetError{Axis: AxisQueries, Limit: fmt.Sprint(l.Queries)}, nil
	case l.OutputTokens > 0 && totals.Output >= l.OutputTokens && !(plant.On("budget-output-off-by-one") && totals.Output == l.OutputTokens):
		return &BudgetError{Axis: AxisOutputTokens, Limit: fmt.Sprint(l.OutputTokens)}, nil
	case l.Spend > 0 && spent(totals) >= l.Spend && !(plant.On("budget-spend-retries-free") && !turn):
		return &BudgetError{Axis: AxisSpend, Limit: fmt.Sprint(l.Spend)}, nil
	case l.WallClock > 0 && used.StartedAt != 0 && now.Sub(time.UnixMilli(used.StartedAt)) >= l.WallClock &&
		!(plant.On("budget-wall-clock-at-limit") && now.Sub(time.UnixMilli(used.StartedAt)) == l.WallClock):
		return &BudgetError{Axis: AxisWallClock, Limit: l.WallClock.String()}, nil
	}
	if turn || !plant.On("budget-retries-free") {
		used.Queries++
	}
	if turn {
		used.Turns++
	}
	if used.StartedAt == 0 || turn && plant.On("budget-wall-clock-restarts") {
		used.StartedAt = now.UnixMilli()
	}
	core.TxValue(tx, BudgetUsedValue).Set(used)
	return nil, nil
}

// spendToolCall counts one tool call, or refuses it.
func (l BudgetLimits) spendToolCall(tx *core.Tx, now time.Time) (*BudgetError, error) {
	if l.ToolCalls <= 0 {
		return nil, nil
	}
	used, _, err := core.TxValue(tx, BudgetUsedValue).Get(0)
	if err != nil {
		return nil, err
	}
	if used.ToolCalls >= l.ToolCalls && !(plant.On("budget-tool-calls-off-by-one") && used.ToolCalls == l.ToolCalls) {
		return &BudgetError{Axis: AxisToolCalls, Limit: fmt.Sprint(l.ToolCalls)}, nil
	}
	used.ToolCalls++
	if used.StartedAt == 0 {
		used.StartedAt = now.UnixMilli()
	}
	core.TxValue(tx, BudgetUsedValue).Set(used)
	return nil, nil
}

func spent(u ai.Usage) float64 {
	if plant.On("budget-spend-output-only") {
		return u.Cost.Output
	}
	return u.Cost.Total
}
