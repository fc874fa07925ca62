package boundary_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/boundary"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

func openBudgeted(t testing.TB, ctx context.Context, s *sim.Sim, limits agent.BudgetLimits, tools ...agent.Tool) *session {
	p := must(faux.New(s.Runtime(), s.Rand(), faux.Options{}))
	h := must(agent.Open(ctx, memory.New(), agent.Options{Runtime: s.Runtime(), CheckInvariants: true, Budget: limits, Tools: tools,
		Models: agent.NewModels(agent.ModelSource{Provider: p, Models: p.Models()})}))
	return &session{h: h, faux: p}
}

// prompt runs one turn in conv and returns its input's result.
func (x *session) prompt(t testing.TB, ctx context.Context, conv storage.ID, text string) agent.InputResult {
	t.Helper()
	c := must(x.h.Conversation(ctx, conv))
	id := must(c.Accept(ctx, ai.PlainText(text), agent.AcceptOptions{}))
	must(c.Drive(ctx))
	r, _ := must2(c.Result(ctx, id))
	return r
}

var goalValue = storage.ConversationValue[string]("plugin.goal", storage.Sticky)

// The carry table: turns spent before a clear stay spent after it (a clear
// cannot buy a new allowance), while the new conversation starts with an
// empty context and none of the old one's conversation state; the old
// conversation and its entries stay readable.
func TestTurnsCarryAcrossAClearAndTheNextTurnIsStillRefused(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		x := openBudgeted(t, ctx, s, agent.BudgetLimits{Turns: 2})
		root := x.h.Root()
		x.apply(t, ctx, boundary.Startup, "startup", P)
		must(root.Commit(ctx, func(tx *core.ConversationTx) error { tx.SetValue(goalValue.Address, "ship it"); return nil }))
		x.faux.SetResponses(faux.Reply(faux.Text("one")), faux.Reply(faux.Text("two")), faux.Reply(faux.Text("never")))
		for _, text := range []string{"first", "second"} {
			if r := x.prompt(t, ctx, root.ID, text); r.Status != agent.InputDone {
				t.Fatalf("turn %q = %+v; want done within the budget", text, r)
			}
		}
		if r := x.prompt(t, ctx, root.ID, "third"); r.Status != agent.InputFailed || agent.BudgetAxisOf(r) != agent.AxisTurns {
			t.Fatalf("the third turn = %+v; want failed on the turns axis", r)
		}
		usedBefore, _ := must2(x.h.Store().GetValue(ctx, agent.BudgetUsedValue.Address, 0))
		totalsBefore, _ := must2(x.h.Store().GetValue(ctx, agent.UsageTotals.Address, 0))
		next := x.apply(t, ctx, boundary.Clear, "clear", N).Binding.Conversation
		usedAfter, _ := must2(x.h.Store().GetValue(ctx, agent.BudgetUsedValue.Address, 0))
		totalsAfter, _ := must2(x.h.Store().GetValue(ctx, agent.UsageTotals.Address, 0))
		if string(usedBefore.Value) != string(usedAfter.Value) || string(totalsBefore.Value) != string(totalsAfter.Value) {
			t.Fatalf("the clear changed what the budget counts: %s → %s, %s → %s", usedBefore.Value, usedAfter.Value, totalsBefore.Value, totalsAfter.Value)
		}
		if r := x.prompt(t, ctx, next, "after the clear"); r.Status != agent.InputFailed || agent.BudgetAxisOf(r) != agent.AxisTurns {
			t.Fatalf("the first turn after the clear = %+v; want still refused: turns carry", r)
		}
		if _, ok := must2(x.h.Store().GetValue(ctx, goalValue.In(next).Address, 0)); ok {
			t.Fatal("the old conversation's goal was copied into the new one")
		}
		if _, ok := must2(x.h.Store().GetValue(ctx, goalValue.In(root.ID).Address, 0)); !ok {
			t.Fatal("the old conversation lost its goal")
		}
		cx := must(core.DeriveContext(ctx, x.h.Store(), next, x.h.Store().LastSeq()))
		if len(cx.Messages()) > 1 {
			t.Fatalf("the new conversation's context holds %d messages; want it fresh", len(cx.Messages()))
		}
		if n := len(must(x.h.Entries(ctx, root.ID, storage.Cursor{Limit: 100})).Items); n < 4 {
			t.Fatalf("the old conversation keeps %d entries; want its turns readable", n)
		}
		must(0, x.h.Close(ctx))
	})
}

// Each axis refuses what goes past it with its name: tool calls, queries
// (a rate-limited attempt is a query), output tokens, spend and
// wall-clock time.
func TestEachBudgetAxisRefusesWithItsName(t *testing.T) {
	usage := func(out int64, cost float64) ai.Usage {
		return ai.Usage{Output: out, TotalTokens: out, Cost: ai.Cost{Output: cost, Total: cost}}
	}
	for _, tc := range []struct {
		name   string
		limits agent.BudgetLimits
		steps  []faux.Step
		sleep  time.Duration
		axis   string
	}{
		{"queries", agent.BudgetLimits{Queries: 2}, []faux.Step{faux.RateLimited(), faux.Reply(faux.Text("ok")), faux.Reply(faux.Text("never"))}, 0, agent.AxisQueries},
		{"output tokens", agent.BudgetLimits{OutputTokens: 50}, []faux.Step{faux.Reply(faux.Text("ok")).WithUsage(usage(80, 0.01)), faux.Reply(faux.Text("never"))}, 0, agent.AxisOutputTokens},
		{"spend", agent.BudgetLimits{Spend: 0.5}, []faux.Step{faux.Reply(faux.Text("ok")).WithUsage(usage(10, 0.75)), faux.Reply(faux.Text("never"))}, 0, agent.AxisSpend},
		{"wall clock", agent.BudgetLimits{WallClock: time.Hour}, []faux.Step{faux.Reply(faux.Text("ok")), faux.Reply(faux.Text("never"))}, 2 * time.Hour, agent.AxisWallClock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				x := openBudgeted(t, ctx, s, tc.limits)
				x.faux.SetResponses(tc.steps...)
				if r := x.prompt(t, ctx, x.h.Root().ID, "first"); r.Status != agent.InputDone {
					t.Fatalf("the first turn = %+v; want done", r)
				}
				must(0, s.Runtime().Sleep(ctx, tc.sleep))
				if r := x.prompt(t, ctx, x.h.Root().ID, "second"); r.Status != agent.InputFailed || agent.BudgetAxisOf(r) != tc.axis {
					t.Fatalf("the second turn = %+v; want failed on the %s axis", r, tc.axis)
				}
				must(0, x.h.Close(ctx))
			})
		})
	}
}

// A tool call past the limit gets its own error result naming the axis,
// and the turn goes on.
func TestToolCallsPastTheLimitAreRefused(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		tool := func(name string) agent.Tool {
			return agent.Tool{Definition: ai.Tool{Name: name, Description: name}, Replay: agent.ReplaySafe,
				Execute: func(ctx context.Context, _ string, _ json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
					out.Write("ran")
					return nil
				}}
		}
		x := openBudgeted(t, ctx, s, agent.BudgetLimits{ToolCalls: 1}, tool("a"), tool("b"))
		x.faux.SetResponses(faux.Reply(faux.ToolCall("c1", "a", "{}")).WithStop(ai.StopToolUse), faux.Reply(faux.ToolCall("c2", "b", "{}")).WithStop(ai.StopToolUse), faux.Reply(faux.Text("done")))
		if r := x.prompt(t, ctx, x.h.Root().ID, "go"); r.Status != agent.InputDone {
			t.Fatalf("the turn = %+v; want done: a refused call is a result, not an end", r)
		}
		texts := map[string]string{}
		for _, e := range must(x.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: x.h.Root().ID, Kind: "tool_result"})).Items {
			texts[e.Key] = e.Model[0].Content.TextOf()
		}
		if texts["c1"] != "ran" || !strings.Contains(texts["c2"], "budget exhausted: tool calls") {
			t.Fatalf("results %v; want the first call run and the second refused on the tool calls axis", texts)
		}
		must(0, x.h.Close(ctx))
	})
}
