package core_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

func text(s string) *string { return &s }

func userMsg(s string) ai.Message { return ai.UserText(s, 0) }

func assistantMsg(s string, calls ...ai.Block) ai.Message {
	m := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text(s)), StopReason: ai.StopStop}
	if len(calls) > 0 {
		m.Content.Blocks = append(m.Content.Blocks, calls...)
		m.StopReason = ai.StopToolUse
	}
	return m
}

func toolResult(callID, body string) ai.Message {
	return ai.Message{Role: ai.RoleToolResult, ToolCallID: callID, ToolName: "read",
		Content: ai.Blocks(ai.Text(body)), IsError: ai.Bool(false)}
}

func call(id string) ai.Block { return ai.ToolCall(id, "read", json.RawMessage(`{"path":"a"}`)) }

// at commits one entry so that it lands exactly on id.
func (f *fixture) at(id ID, write func(tx *core.Tx) ID) ID {
	f.t.Helper()
	f.advanceTo(id)
	var got ID
	f.commit(func(tx *core.Tx) { got = write(tx) })
	if got != id {
		f.t.Fatalf("entry landed at %d; want %d", got, id)
	}
	return got
}

func userAt(conv ID, s string) func(tx *core.Tx) ID {
	return func(tx *core.Tx) ID { return core.AppendUser(tx, conv, userMsg(s)) }
}

func assistantAt(conv ID, s string) func(tx *core.Tx) ID {
	return func(tx *core.Tx) ID { return core.AppendAssistant(tx, conv, assistantMsg(s)) }
}

func summaryAt(conv ID, through, firstRetained ID) func(tx *core.Tx) ID {
	return func(tx *core.Tx) ID {
		return core.AppendSummary(tx, conv, core.SummaryData{SummarizedThrough: through}, userMsg("summary"), firstRetained)
	}
}

func wantContext(t *testing.T, c *core.Context, want ...ID) {
	t.Helper()
	if got := c.IDs(); !slices.Equal(got, want) {
		t.Fatalf("context = %v; want %v", got, want)
	}
}

func messageTexts(msgs []ai.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ":" + m.Content.TextOf()
		if m.Role == ai.RoleToolResult {
			out[i] += "@" + m.ToolCallID
		}
	}
	return out
}

func TestSummaryKeepsTheTail(t *testing.T) {
	// §2.3: [10 user, 20 asst, 30 user, 40 asst] + 50 summary{head 30} → [50, 30, 40].
	f := newFixture(t)
	conv := f.conversation()
	f.at(10, userAt(conv, "u10"))
	f.at(20, assistantAt(conv, "a20"))
	f.at(30, userAt(conv, "u30"))
	f.at(40, assistantAt(conv, "a40"))
	wantContext(t, f.context(conv, 0), 10, 20, 30, 40)
	f.at(50, summaryAt(conv, 20, 30))
	c := f.context(conv, 0)
	wantContext(t, c, 50, 30, 40)
	if got, want := messageTexts(c.Messages()), []string{"user:summary", "user:u30", "assistant:a40"}; !slices.Equal(got, want) {
		t.Fatalf("messages = %v; want %v", got, want)
	}
	// The context at an earlier target is derived independently.
	wantContext(t, f.context(conv, 45), 10, 20, 30, 40)
}

func TestDataOnlyAndModelOnlyEntries(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	u := f.user(conv, "hi")
	var note ID
	f.commit(func(tx *core.Tx) {
		note = tx.Entry(noteKind, conv, core.EntryDraft{Data: map[string]string{"plan": "x"}})
	})
	c := f.context(conv, 0)
	wantContext(t, c, u, note)
	if got := messageTexts(c.Messages()); !slices.Equal(got, []string{"user:hi"}) {
		t.Fatalf("messages = %v; a data-only entry must contribute none", got)
	}
	e, _, _ := f.line.Store().NewestHead(f.ctx, conv, 0)
	if e != nil {
		t.Fatalf("newest head = %v; neither entry is a head", e)
	}
}

func TestHandoffAndResetStoreTheirOwnID(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.user(conv, "old")
	f.assistant(conv, "old answer")
	var handoff ID
	f.commit(func(tx *core.Tx) { handoff = core.AppendHandoff(tx, conv, "carry on", userMsg("carry on")) })
	u := f.user(conv, "new")
	h, _, _ := f.store.NewestHead(f.ctx, conv, 0)
	if h.ID != handoff || h.Head != handoff {
		t.Fatalf("handoff head = %d (boundary %d); want %d storing itself", h.ID, h.Head, handoff)
	}
	wantContext(t, f.context(conv, 0), handoff, u)

	var reset ID
	f.commit(func(tx *core.Tx) { reset = core.AppendReset(tx, conv) })
	c := f.context(conv, 0)
	wantContext(t, c, reset)
	if len(c.Messages()) != 0 {
		t.Fatalf("messages after reset = %v; want none", messageTexts(c.Messages()))
	}
	if e, _ := f.store.GetEntries(f.ctx, ids(reset)); e[reset].Head != reset {
		t.Fatalf("reset head = %d; want %d", e[reset].Head, reset)
	}
}

func TestRepeatedCompactionSubsumes(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.at(10, userAt(conv, "u10"))
	f.at(20, assistantAt(conv, "a20"))
	f.at(30, userAt(conv, "u30"))
	f.at(40, assistantAt(conv, "a40"))
	f.at(50, summaryAt(conv, 20, 30))
	f.at(60, userAt(conv, "u60"))
	f.at(70, assistantAt(conv, "a70"))
	f.at(80, summaryAt(conv, 40, 60))
	wantContext(t, f.context(conv, 0), 80, 60, 70)
	// Through 75 the first summary is still the newest head.
	wantContext(t, f.context(conv, 75), 50, 30, 40, 60, 70)
}

func TestHeadRules(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	other := f.conversation()
	f.at(10, userAt(conv, "u10"))
	f.at(20, assistantAt(conv, "a20"))
	f.at(30, userAt(conv, "u30"))
	foreign := f.user(other, "elsewhere")
	f.at(50, summaryAt(conv, 20, 30))

	ce := f.reject(core.RuleHeadBackwards, func(tx *core.Tx) {
		core.AppendSummary(tx, conv, core.SummaryData{SummarizedThrough: 10}, userMsg("s"), 20)
	})
	if ce.ID != 20 {
		t.Fatalf("error names %d; want the head 20", ce.ID)
	}
	f.reject(core.RuleHeadNotVisible, func(tx *core.Tx) {
		core.AppendSummary(tx, conv, core.SummaryData{}, userMsg("s"), foreign)
	})
	// Two heads in one commit: the second is checked against the first.
	f.reject(core.RuleHeadBackwards, func(tx *core.Tx) {
		core.AppendReset(tx, conv)
		core.AppendSummary(tx, conv, core.SummaryData{}, userMsg("s"), 30)
	})
	// A head at the previous boundary is allowed.
	f.commit(func(tx *core.Tx) { core.AppendSummary(tx, conv, core.SummaryData{}, userMsg("again"), 30) })
}

func TestEditsOmitAndReplaceAndPersistAcrossTurns(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	u1 := f.user(conv, "u1")
	a1 := f.assistant(conv, "a1")
	u2 := f.user(conv, "u2")
	var edit ID
	f.commit(func(tx *core.Tx) {
		edit = tx.Entry(noteKind, conv, core.EntryDraft{Edits: []storage.ContextEdit{
			{Target: a1, Action: storage.EditOmit},
			{Target: u2, Action: storage.EditReplace, Messages: []ai.Message{userMsg("u2 (shortened)")}},
		}})
	})
	want := []string{"user:u1", "user:u2 (shortened)"}
	c := f.context(conv, 0)
	wantContext(t, c, u1, u2, edit)
	if got := messageTexts(c.Messages()); !slices.Equal(got, want) {
		t.Fatalf("messages = %v; want %v", got, want)
	}
	// Later turns keep the edits; a newer edit of the same target wins.
	a2 := f.assistant(conv, "a2")
	f.commit(func(tx *core.Tx) {
		tx.Entry(noteKind, conv, core.EntryDraft{Edits: []storage.ContextEdit{
			{Target: u2, Action: storage.EditReplace, Messages: []ai.Message{userMsg("u2 (v2)")}},
		}})
	})
	if got, want := messageTexts(f.context(conv, 0).Messages()), []string{"user:u1", "user:u2 (v2)", "assistant:a2"}; !slices.Equal(got, want) {
		t.Fatalf("messages after another turn = %v; want %v", got, want)
	}
	// An edit whose target is before the head is a no-op.
	var reset ID
	f.commit(func(tx *core.Tx) { reset = core.AppendReset(tx, conv) })
	u3 := f.user(conv, "u3")
	f.commit(func(tx *core.Tx) {
		tx.Entry(noteKind, conv, core.EntryDraft{Edits: []storage.ContextEdit{{Target: a2, Action: storage.EditOmit}}})
	})
	if got := messageTexts(f.context(conv, 0).Messages()); !slices.Equal(got, []string{"user:u3"}) {
		t.Fatalf("messages after reset %d = %v; want [user:u3]", reset, got)
	}
	_ = u3
	// An edit of an entry that is not an earlier visible entry rejects.
	other := f.conversation()
	foreign := f.user(other, "x")
	ce := f.reject(core.RuleEditTarget, func(tx *core.Tx) {
		tx.Entry(noteKind, conv, core.EntryDraft{Edits: []storage.ContextEdit{{Target: foreign, Action: storage.EditOmit}}})
	})
	if ce.ID != foreign {
		t.Fatalf("error names %d; want %d", ce.ID, foreign)
	}
}

func TestContextIsIdenticalWithAPluginKindUnregistered(t *testing.T) {
	// A plugin entry kind stores a head and a model; reading needs no kind.
	pin := storage.DefineEntryKind[map[string]int]("pin_context")
	f := newFixture(t)
	f.kinds.AddEntry(pin)
	conv := f.conversation()
	f.user(conv, "u1")
	u2 := f.user(conv, "u2")
	var p ID
	f.commit(func(tx *core.Tx) {
		p = tx.Entry(pin, conv, core.EntryDraft{Data: map[string]int{"from": int(u2)}, Model: []ai.Message{userMsg("pinned")}, Head: u2})
	})
	with := f.context(conv, 0)
	wantContext(t, with, p, u2)

	// A harness that never registered pin_context reports it and derives the same context.
	kinds := core.NewKinds()
	stored, _ := f.store.EntryKinds(f.ctx)
	if got := kinds.UnregisteredEntryKinds(stored); !slices.Equal(got, []string{"pin_context"}) {
		t.Fatalf("unregistered = %v; want [pin_context]", got)
	}
	line := core.NewLine(core.RealRuntime(), f.store, kinds, core.LineOptions{})
	without, err := core.DeriveContext(f.ctx, line.Store(), conv, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(with, without); diff != "" {
		t.Fatalf("context differs without the kind (-with +without):\n%s", diff)
	}
}

func systemAt(conv ID, data core.SystemData, msg string) func(tx *core.Tx) ID {
	return func(tx *core.Tx) ID {
		return core.AppendSystem(tx, conv, data, ai.Message{Role: ai.RoleSystem, Content: ai.PlainText(msg)})
	}
}

func TestSystemFoldSubsumesDeltasAKeptCompactionLeftBehind(t *testing.T) {
	tool := func(name, desc string) ai.Tool {
		return ai.Tool{Name: name, Description: desc, Parameters: json.RawMessage(`{"type":"object"}`)}
	}
	f := newFixture(t)
	conv := f.conversation()
	f.at(10, systemAt(conv, core.SystemData{Baseline: true,
		Sections:   []core.SystemSection{{Key: "identity", Text: text("you are pico")}, {Key: "cwd", Text: text("/a")}},
		ToolsAdded: []ai.Tool{tool("read", "v1")}}, "B1"))
	f.at(20, userAt(conv, "u20"))
	f.at(30, assistantAt(conv, "a30"))
	f.at(40, systemAt(conv, core.SystemData{Sections: []core.SystemSection{{Key: "cwd", Text: text("/b")}},
		ToolsAdded: []ai.Tool{tool("write", "v1")}}, "D1"))
	f.at(50, userAt(conv, "u50"))
	f.at(60, assistantAt(conv, "a60"))
	fold, err := f.context(conv, 0).System()
	if err != nil {
		t.Fatal(err)
	}
	if fold.Baseline.ID != 10 || len(fold.Deltas) != 1 || fold.Deltas[0].ID != 40 {
		t.Fatalf("fold = baseline %v, deltas %v; want 10 and [40]", fold.Baseline.ID, fold.Deltas)
	}
	wantSections := []core.SystemSection{{Key: "identity", Text: text("you are pico")}, {Key: "cwd", Text: text("/b")}}
	if diff := cmp.Diff(wantSections, fold.Sections); diff != "" {
		t.Fatalf("sections (-want +got):\n%s", diff)
	}

	// A summary keeps the old delta 40 in its tail; the next turn writes a
	// fresh baseline 80 and a delta 90. The fold is 80 + [90]; 40 is subsumed.
	f.at(70, summaryAt(conv, 30, 40))
	c := f.context(conv, 0)
	if fold, _ := c.System(); fold.Baseline != nil {
		t.Fatalf("a context with no baseline after the head folds to baseline %d; want none", fold.Baseline.ID)
	}
	f.at(80, systemAt(conv, core.SystemData{Baseline: true,
		Sections:   []core.SystemSection{{Key: "identity", Text: text("you are pico")}, {Key: "cwd", Text: text("/c")}},
		ToolsAdded: []ai.Tool{tool("read", "v2"), tool("write", "v1")}}, "B2"))
	f.at(90, systemAt(conv, core.SystemData{Sections: []core.SystemSection{{Key: "cwd", Text: nil}},
		ToolsRemoved: []ai.Tool{tool("write", "v1")}, ToolsAdded: []ai.Tool{tool("write", "v2")}}, "D2"))
	c = f.context(conv, 0)
	wantContext(t, c, 70, 40, 50, 60, 80, 90)
	fold, err = c.System()
	if err != nil {
		t.Fatal(err)
	}
	if fold.Baseline.ID != 80 || len(fold.Deltas) != 1 || fold.Deltas[0].ID != 90 {
		t.Fatalf("fold = baseline %d, %d deltas; want 80 and [90]", fold.Baseline.ID, len(fold.Deltas))
	}
	if diff := cmp.Diff([]core.SystemSection{{Key: "identity", Text: text("you are pico")}}, fold.Sections); diff != "" {
		t.Fatalf("sections (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ai.Tool{tool("read", "v2"), tool("write", "v2")}, fold.Tools); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	req, err := c.Request()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"system:B2", "user:summary", "user:u50", "assistant:a60", "system:D2"}
	if got := messageTexts(req); !slices.Equal(got, want) {
		t.Fatalf("request = %v; want %v (D1 subsumed, baseline first)", got, want)
	}
}

func TestToolResultsFollowTheirCallInCallOrder(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.user(conv, "go")
	f.commit(func(tx *core.Tx) { core.AppendAssistant(tx, conv, assistantMsg("calling", call("A"), call("B"))) })
	// The tools settled in the other order.
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("B", "b")) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("A", "a")) })
	// A failed attempt and an orphan result never reach a request.
	f.commit(func(tx *core.Tx) {
		core.AppendAssistant(tx, conv, ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(ai.Text("boom"), call("C")), StopReason: ai.StopError})
	})
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("C", "orphan")) })
	f.assistant(conv, "done")
	req, err := f.context(conv, 0).Request()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:go", "assistant:calling", "toolResult:a@A", "toolResult:b@B", "assistant:done"}
	if got := messageTexts(req); !slices.Equal(got, want) {
		t.Fatalf("request = %v; want %v", got, want)
	}
	// The stored order is untouched.
	if got := messageTexts(f.context(conv, 0).Messages()); got[2] != "toolResult:b@B" {
		t.Fatalf("stored messages = %v; want the results in stored order", got)
	}
}

// Providers may number their calls per answer, so a call id comes back in
// later answers: a result answers the newest call of its id before it, and
// an answer still waiting for its result gets the missing one, never an
// older answer's.
func TestAToolCallIDUsedAgainIsAnsweredByTheResultsAfterItsAnswer(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.user(conv, "go")
	f.commit(func(tx *core.Tx) { core.AppendAssistant(tx, conv, assistantMsg("first", call("A"), call("B"))) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("B", "b1")) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("A", "a1")) })
	f.commit(func(tx *core.Tx) { core.AppendAssistant(tx, conv, assistantMsg("second", call("A"))) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("A", "a2")) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("A", "a2 again")) })
	f.commit(func(tx *core.Tx) { core.AppendAssistant(tx, conv, assistantMsg("twice", call("D"), call("D"))) })
	f.commit(func(tx *core.Tx) { core.AppendToolResult(tx, conv, nil, toolResult("D", "d")) })
	f.commit(func(tx *core.Tx) { core.AppendAssistant(tx, conv, assistantMsg("third", call("A"), call("B"))) })
	req, err := f.context(conv, 0).Request()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user:go", "assistant:first", "toolResult:a1@A", "toolResult:b1@B",
		"assistant:second", "toolResult:a2@A",
		"assistant:twice", "toolResult:d@D", "toolResult:No result provided@D",
		"assistant:third", "toolResult:No result provided@A", "toolResult:No result provided@B"}
	if got := messageTexts(req); !slices.Equal(got, want) {
		t.Fatalf("request = %v\nwant      %v", got, want)
	}
}

// A head starts a new epoch (§8.2) even when a summary keeps the old
// baseline in its tail: that baseline was the old epoch's, so the fold has
// none until the next turn writes one, and no request carries the old one.
func TestASummaryThatKeepsTheOldBaselineStartsANewEpoch(t *testing.T) {
	f := newFixture(t)
	conv := f.conversation()
	f.at(10, userAt(conv, "u10"))
	f.at(20, systemAt(conv, core.SystemData{Baseline: true, Sections: []core.SystemSection{{Key: "identity", Text: text("you are pico")}}}, "B1"))
	f.at(30, assistantAt(conv, "a30"))
	f.at(40, userAt(conv, "u40"))
	f.at(50, systemAt(conv, core.SystemData{Sections: []core.SystemSection{{Key: "cwd", Text: text("/a")}}}, "D1"))
	f.at(60, assistantAt(conv, "a60"))
	f.at(70, summaryAt(conv, 10, 20))
	c := f.context(conv, 0)
	wantContext(t, c, 70, 20, 30, 40, 50, 60)
	if fold, err := c.System(); err != nil || fold.Baseline != nil || len(fold.Sections) != 0 {
		t.Fatalf("fold after the summary = %+v, %v; want nothing: B1 and D1 are the old epoch's", fold, err)
	}
	req, err := c.Request()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"user:summary", "assistant:a30", "user:u40", "assistant:a60"}; !slices.Equal(messageTexts(req), want) {
		t.Fatalf("request = %v; want %v (no old system message)", messageTexts(req), want)
	}
	f.at(80, systemAt(conv, core.SystemData{Baseline: true, Sections: []core.SystemSection{{Key: "identity", Text: text("you are pico")}}}, "B2"))
	c = f.context(conv, 0)
	if fold, _ := c.System(); fold.Baseline == nil || fold.Baseline.ID != 80 || len(fold.Deltas) != 0 {
		t.Fatalf("fold = %+v; want the new baseline 80 alone", fold)
	}
}
