package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

func TestPromptAnswersWithOneTurn(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("hello there"))
		c := a.h.Root()
		got := must(c.Prompt(ctx, userText("hi"), agent.AcceptOptions{}))
		if got == nil || got.Model[0].Content.TextOf() != "hello there" {
			t.Fatalf("answer = %+v", got)
		}
		want := []string{"user:hi", "system:system", "assistant:hello there"}
		if diff := cmp.Diff(want, a.transcript(ctx, c.ID)); diff != "" {
			t.Fatalf("transcript (-want +got):\n%s", diff)
		}
		if len(a.reports) != 0 {
			t.Fatalf("reports: %v", a.reports)
		}
		must(0, a.h.Close(ctx))
	})
}

func TestToolTurnRunsToolsThenAnswers(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a", "b"), answer("after tools"))
		c := a.h.Root()
		got := must(c.Prompt(ctx, userText("tool:a,b"), agent.AcceptOptions{}))
		if got == nil || got.Model[0].Content.TextOf() != "after tools" {
			t.Fatalf("answer = %+v", got)
		}
		tr := a.transcript(ctx, c.ID)
		if len(tr) != 6 || tr[2] != "assistant:call a,call b" || tr[5] != "assistant:after tools" {
			t.Fatalf("transcript = %v", tr)
		}
		reqs := a.faux.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d requests; want 2", len(reqs))
		}
		var roles []ai.Role
		for _, m := range reqs[1].Messages {
			roles = append(roles, m.Role)
		}
		if diff := cmp.Diff([]ai.Role{ai.RoleSystem, ai.RoleUser, ai.RoleAssistant, ai.RoleToolResult, ai.RoleToolResult}, roles); diff != "" {
			t.Fatalf("second request roles (-want +got):\n%s", diff)
		}
		if r := reqs[1].Messages[3]; r.ToolCallID != "call-a-0" || r.Content.TextOf() != "a(a)" {
			t.Fatalf("first tool result = %+v", r)
		}
		must(0, a.h.Close(ctx))
	})
}

func TestDeferredResponseIsPolledWithSleepsUntilItAnswers(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{faux: faux.Options{Deferred: faux.DeferredOptions{PendingFetches: 1, PollAfterMs: 500}}})
		a.faux.SetResponses(faux.Reply().WithStop(ai.StopDeferred), answer("later"))
		c := a.h.Root()
		start := s.Runtime().Now()
		got := must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		if got == nil || got.Model[0].Content.TextOf() != "later" {
			t.Fatalf("answer = %+v; want the deferred answer", got)
		}
		if n := a.faux.DeferredFetches(); n != 2 {
			t.Fatalf("%d fetches; want 2 (one still pending, one answering)", n)
		}
		if waited := s.Runtime().Now().Sub(start); waited < time.Second {
			t.Fatalf("polled after %v of virtual time; want two waits of pollAfterMs", waited)
		}
		if calls := a.faux.Calls(); calls != 1 {
			t.Fatalf("%d provider calls; a poll is a fetch, not a new request", calls)
		}
		p := must(a.h.Store().ReadList(ctx, agent.UsageList.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}}))
		var outcomes []string
		for _, e := range p.Items {
			var row agent.UsageRow
			must(0, json.Unmarshal(e.Value, &row))
			outcomes = append(outcomes, row.Outcome)
		}
		if diff := cmp.Diff([]string{"deferred", "deferred", "done"}, outcomes); diff != "" {
			t.Fatalf("usage outcomes (-want +got):\n%s", diff)
		}
		if len(a.entriesOf(ctx, c.ID, "assistant")) != 1 {
			t.Fatal("a deferred poll left an assistant entry; only the answer belongs in the transcript")
		}
		must(0, a.h.Close(ctx))
	})
}

// A provider's in-band stopReason "aborted" is not a durable mark: without
// one, the kind commits its own failure outcome and the run ends.
func TestInBandProviderAbortWithoutAMarkFailsTheTurn(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(faux.Reply(faux.Text("half an ans")).WithStop(ai.StopAborted))
		c := a.h.Root()
		input := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		r := a.result(ctx, c, input)
		if r.Status != agent.InputFailed {
			t.Fatalf("input = %+v; want failed", r)
		}
		gens := a.tasksOf(ctx, agent.GenerationKindName)
		if len(gens) != 1 || gens[0].Status != "failed" || gens[0].Abort {
			t.Fatalf("generations = %+v; want one failed and unmarked", gens)
		}
		// The aborted output is kept for display and excluded from requests.
		if tr := a.transcript(ctx, c.ID); tr[len(tr)-1] != "assistant:half an ans,aborted" {
			t.Fatalf("transcript = %v", tr)
		}
		must(0, a.h.Close(ctx))
	})
}

// An invariant the agent loop relies on (every input of a group is running
// until its owner resolves it) is not a domain outcome: breaking it faults
// the session, naming the task, and writes nothing.
func TestABrokenInputGroupFaultsTheSession(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		store := simtest.Reopenable{Store: memory.New()}
		a := openAgent(t, ctx, s, agentOptions{store: store})
		a.faux.SetResponses(answer("orphan answer"))
		c := a.h.Root()
		gen := simtest.CreateTask(t, ctx, c, agent.GenerationKind, core.TaskSpec{State: agent.GenerationState{Inputs: []storage.ID{999}, MaxAttempts: 1}})
		_, err := c.Drive(ctx)
		var fe *core.FaultError
		if !errors.As(err, &fe) || fe.Task != gen || fe.Kind != agent.GenerationKindName || fe.Method != "execute" {
			t.Fatalf("drive error = %v; want a fault of generation %d's execute", err, gen)
		}
		p := must(store.ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: 10}, ConversationID: c.ID, Kind: "assistant"}))
		if len(p.Items) != 0 {
			t.Fatalf("%d assistant entries; the rejected settlement must write nothing", len(p.Items))
		}
		_ = a.h.Close(ctx)
	})
}

func TestSettingsRoundTripTheGenerationsDeclaredValues(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := openAgent(t, ctx, s, agentOptions{}).h
		settings := must(h.Root().Settings())
		if err := settings.Set(ctx, map[string]any{"model": agent.ModelRef{ModelID: "faux-1"}, "budgetMs": 120000}); err != nil {
			t.Fatal(err)
		}
		got := must(settings.Get(ctx))
		if string(got["model"]) != `{"modelId":"faux-1"}` || string(got["budgetMs"]) != "120000" {
			t.Fatalf("settings = %v", got)
		}
		if err := settings.Set(ctx, map[string]any{"colour": "red"}); err == nil {
			t.Fatal("setting an undeclared value was accepted")
		}
		h.Close(ctx)
	})
}

func TestAcceptanceReturnsTheStoredReceipt(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := openAgent(t, ctx, s, agentOptions{}).h
		want := agent.Receipt{RequestID: "req-42", ConversationID: h.Root().ID, InputID: 400}
		must(h.Commit(ctx, func(tx *core.Tx) error {
			core.TxValue(tx, agent.RequestValue.WithKey("req-42")).Set(want)
			return nil
		}))
		got, ok, err := h.Acceptance(ctx, "req-42")
		if err != nil || !ok || got != want {
			t.Fatalf("acceptance = %+v, %v, %v; want %+v", got, ok, err, want)
		}
		if _, ok, _ := h.Acceptance(ctx, "req-0"); ok {
			t.Fatal("an unknown request id was found")
		}
		h.Close(ctx)
	})
}

// The built-in kinds are plain values a host can wrap, so they can also be
// registered on a kernel harness by mistake: they find no agent
// configuration there and fault the session, naming why.
func TestABuiltInKindOnAKernelHarnessFaultsWithErrNotAgentHarness(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		h := must(core.Open(ctx, memory.New(), core.Options{Runtime: s.Runtime(), TaskKinds: []core.TaskKind{agent.GenerationKind}}))
		simtest.CreateTask(t, ctx, h.Root(), agent.GenerationKind, core.TaskSpec{State: agent.GenerationState{MaxAttempts: 1}})
		_, err := h.Root().Drive(ctx)
		var fe *core.FaultError
		if !errors.As(err, &fe) || !errors.Is(err, agent.ErrNotAgentHarness) || fe.Kind != agent.GenerationKindName {
			t.Fatalf("drive = %v; want the generation's fault wrapping ErrNotAgentHarness", err)
		}
		h.Close(ctx)
	})
}

func TestUsageOfDecodesOnlyUsageEvents(t *testing.T) {
	row, totals, err := agent.UsageOf(core.SessionEvent{Type: core.SessionEventUsage,
		Row: json.RawMessage(`{"conversationId":1,"taskId":2,"kind":"generation","attempt":1,"outcome":"done","usage":{"input":3,"totalTokens":3}}`)})
	if err != nil || row.TaskID != 2 || row.Usage == nil || row.Usage.Input != 3 || totals != (ai.Usage{}) {
		t.Fatalf("UsageOf = %+v, %+v, %v; want the row and zero totals", row, totals, err)
	}
	if _, _, err := agent.UsageOf(core.SessionEvent{Type: core.SessionEventValue}); err == nil {
		t.Fatal("a value event decoded as usage")
	}
	if _, _, err := agent.UsageOf(core.SessionEvent{Type: core.SessionEventUsage, Row: json.RawMessage(`[`)}); err == nil {
		t.Fatal("a broken row decoded")
	}
}
