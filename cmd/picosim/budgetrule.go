package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// The budget rule (DESIGN §11): a session's limits on turns, provider
// queries, output tokens, spend, wall-clock time and tool calls hold across every conversation, every provider
// clear and every restart, and a budget refuses only what is past its
// limit. It counts from what the run did, not from pi.budget.used: a turn
// is a generation's first attempt (its patch to streaming at attempt 1),
// a tool call a tool task's start (its patch to running), each counted
// once per task; a query is a request a generation sent the faux
// provider, and starts at a generation's patch to streaming whose state
// holds no deferred answer's handle (that is a fetch of it); output tokens and spend are the usage rows' sums; the
// wall clock runs from the first query or call.

// ruleBudget: no more turns, queries or tool calls than the session's
// limits allow, no query once its output, spend or time is spent, and no input
// ended by a budget that was not spent.
const ruleBudget oracleRule = "budget-holds"

// budgetCount is what the run has spent, task by task.
type budgetCount struct {
	turns map[storage.ID]bool // generations that started their first attempt
	calls map[storage.ID]bool // tool calls that started running
	// output is the output tokens of the usage rows committed before the
	// batch being checked, batchOutput those of its own: a query the
	// batch starts was judged against what was committed before it.
	output, batchOutput int64
	// cost and batchCost are the same of the usage rows' cost totals: what
	// the spend limit holds (the session's totals sum them in row order,
	// and so does the rule, so the two sums are the same number).
	cost, batchCost float64
	firstUse        time.Time // the first query's or call's start (to the ms)
}

// spend counts a patch of a generation or tool task against the limits.
func (o *oracle) spend(w storage.Write, by string, seq storage.ID) error {
	o.spent.init()
	switch o.kinds[w.ID] {
	case agent.GenerationKindName:
		// The patch carries the generation's whole state: one that still
		// holds a deferred answer's handle starts a fetch of it, not a
		// query.
		var st struct {
			Attempt  int             `json:"attempt"`
			Deferred json.RawMessage `json:"deferred"`
		}
		if w.Status != "streaming" || json.Unmarshal(w.State, &st) != nil || len(st.Deferred) > 0 && string(st.Deferred) != "null" {
			return nil
		}
		if err := o.query(w.ID, by, seq); err != nil {
			return err
		}
		if st.Attempt != 1 || o.spent.turns[w.ID] {
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
		o.used()
		if l := o.limits.ToolCalls; l > 0 && len(o.spent.calls) > l {
			return o.fail(broke(ruleBudget, "%s started tool call %d (%s) at %d, call %d of a session limited to %d", by, w.ID, o.tools[w.ID], seq, len(o.spent.calls), l))
		}
	}
	return nil
}

func (c *budgetCount) init() {
	if c.turns == nil {
		c.turns, c.calls = map[storage.ID]bool{}, map[storage.ID]bool{}
	}
}

// used notes a counted use: the first starts the wall clock, to the ms
// as the session keeps it.
func (o *oracle) used() {
	if o.spent.firstUse.IsZero() && o.now != nil {
		o.spent.firstUse = time.UnixMilli(o.now().UnixMilli())
	}
}

// query holds a generation's query to the output and wall-clock limits
// as they stand when it starts.
func (o *oracle) query(gen storage.ID, by string, seq storage.ID) error {
	if l := o.limits.OutputTokens; l > 0 && o.spent.output >= l {
		return o.fail(broke(ruleBudget, "%s started a query of generation %d at %d with %d output tokens spent of a session limited to %d", by, gen, seq, o.spent.output, l))
	}
	if l := o.limits.Spend; l > 0 && o.spent.cost >= l {
		return o.fail(broke(ruleBudget, "%s started a query of generation %d at %d with %v spent of a session limited to %v", by, gen, seq, o.spent.cost, l))
	}
	if l := o.limits.WallClock; l > 0 && o.exactClock && !o.spent.firstUse.IsZero() {
		if spent := o.now().Sub(o.spent.firstUse); spent >= l {
			return o.fail(broke(ruleBudget, "%s started a query of generation %d at %d, %s after the first use of a session limited to %s", by, gen, seq, spent, l))
		}
	}
	o.used()
	return nil
}

// usage adds a usage row's output tokens and cost to what its batch spent.
func (o *oracle) usage(row agent.UsageRow) {
	if row.Usage != nil {
		o.spent.batchOutput += row.Usage.Output
		o.spent.batchCost += row.Usage.Cost.Total
	}
}

// batchSpent takes in what the batch just checked spent.
func (o *oracle) batchSpent() {
	o.spent.output, o.spent.batchOutput = o.spent.output+o.spent.batchOutput, 0
	o.spent.cost, o.spent.batchCost = o.spent.cost+o.spent.batchCost, 0
}

// refused checks an input a budget ended: its axis has a limit, and it is
// spent as far as the run shows: that many turns started, that many
// output tokens used, that much time passed since the first use.
func (o *oracle) refused(res agent.InputResult, input, by string, seq storage.ID) error {
	axis := agent.BudgetAxisOf(res)
	if axis == "" {
		return nil
	}
	fail := func(format string, args ...any) error {
		return o.fail(broke(ruleBudget, "%s ended input %s at %d for its %s budget: "+format, append([]any{by, input, seq, axis}, args...)...))
	}
	l := o.limits
	switch axis {
	case agent.AxisTurns:
		if l.Turns == 0 || len(o.spent.turns) < l.Turns {
			return fail("%d turns started of %d", len(o.spent.turns), l.Turns)
		}
	case agent.AxisQueries:
		if l.Queries == 0 {
			return fail("the session has no limit on queries")
		}
	case agent.AxisToolCalls:
		if l.ToolCalls == 0 {
			return fail("the session has no limit on tool calls")
		}
	case agent.AxisOutputTokens:
		if l.OutputTokens == 0 || o.spent.output < l.OutputTokens {
			return fail("%d output tokens spent of %d", o.spent.output, l.OutputTokens)
		}
	case agent.AxisSpend:
		if l.Spend == 0 || o.spent.cost < l.Spend {
			return fail("%v spent of %v", o.spent.cost, l.Spend)
		}
	case agent.AxisWallClock:
		if l.WallClock == 0 || o.exactClock && (o.spent.firstUse.IsZero() || o.now().Sub(o.spent.firstUse) < l.WallClock) {
			return fail("first use at %s, limit %s", o.spent.firstUse.UTC().Format(time.StampMilli), l.WallClock)
		}
	default:
		return fail("the session has no limit on %s", axis)
	}
	return nil
}

// resyncBudget counts what a restarted process's store shows was spent: a
// commit that failed as the process stopped may have persisted a first
// attempt or a call's start the oracle never saw.
func (o *oracle) resyncBudget(ctx context.Context, store storage.Storage, tasks []*storage.Task) error {
	o.spent.init()
	rows, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return store.ReadList(ctx, agent.UsageList.Address, storage.ListQuery{Cursor: c})
	})
	if err != nil {
		return err
	}
	// The wall clock's start is the one thing the tasks do not show: a
	// first use in a commit the oracle missed is the session's own.
	v, ok, err := store.GetValue(ctx, agent.BudgetUsedValue.Address, 0)
	if err != nil {
		return err
	}
	var used agent.BudgetUsed
	if ok && json.Unmarshal(v.Value, &used) == nil && used.StartedAt != 0 && o.spent.firstUse.IsZero() {
		o.spent.firstUse = time.UnixMilli(used.StartedAt)
	}
	o.spent.output, o.spent.batchOutput = 0, 0
	o.spent.cost, o.spent.batchCost = 0, 0
	for _, el := range rows {
		var row agent.UsageRow
		if json.Unmarshal(el.Value, &row) == nil {
			o.usage(row)
		}
	}
	o.batchSpent()
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
	return nil
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

// drawBudgetTurns has half the limit seeds' programs (from a generator of
// their own) begin with three turns of the root, each driven without
// waiting (a drive waits in whole seconds), spaced so that the
// budget's edges fall between them: with a wall-clock limit W, a gap of W/2
// puts the third turn's query exactly at W (refused: the time has run
// out), a gap of 2W/3 puts it past W though within W of the second turn's
// (refused: the clock runs from the session's first use, not each turn's).
// With a query limit, each turn's answer comes after a rate limit half the
// time: the retried query counts as any other.
func drawBudgetTurns(p *program, seed uint64) {
	rng := seededRNG(seed, "budget turns")
	if seed%limitSeeds != 0 || rng.IntN(2) != 0 {
		return
	}
	gap := time.Duration(0)
	if w := p.limits.WallClock; w > 0 {
		gap = []time.Duration{w / 2, w * 2 / 3}[rng.IntN(2)]
	}
	var block []progLine
	for i := range 3 {
		if p.limits.Queries > 0 && rng.IntN(2) == 0 {
			block = append(block, progLine{op: "respond", args: []string{"rate-limited"}})
		}
		block = append(block, progLine{op: "respond", args: []string{"text", "ok"}},
			progLine{op: "accept", args: []string{"c0", "look"}}, progLine{op: "drive-async", args: []string{"c0"}})
		if gap > 0 && i < 2 {
			block = append(block, progLine{op: "sleep", args: []string{strconv.FormatInt(gap.Milliseconds(), 10)}})
		}
	}
	p.lines = append(block, p.lines...)
}
