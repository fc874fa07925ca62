package agent_test

// The generation kind (reference §8.2; usage guide "System Prompt and Tool
// Loadout"): system entries that carry only what changed, fresh baselines
// after a head, forks and restarts, retries and their budget, crash recovery
// and abort of a streaming attempt, usage records, and regressions an earlier
// prototype's tests caught.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// --- helpers ---

// genIdentity is the host's identity section every trace starts with.
const genIdentity = "You are pico, a coding agent."

// genPlanMode is the plugin's conversation value that turns plan_mode on.
var genPlanMode = storage.ConversationValue[bool]("plan.mode", storage.Rewind)

// genFrames is where a generation streams its frames (§4.6).
var genFrames = storage.ScratchList[ai.Frame]("pi.frames")

// genCatalogue is the tool catalogue of the loadout tests: echo tools, a
// calculator nobody selects at first, and a discovery tool that adds it.
func genCatalogue() []agent.Tool {
	discover := toolFunc("discover", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, _ *agent.ToolRuntime) error {
		out.AddTools([]string{"calc"})
		out.Write("found calc")
		return nil
	})
	return []agent.Tool{echoTool("read"), echoTool("write"), echoTool("bash"), echoTool("grep"), echoTool("calc"), discover}
}

// genDefs returns the catalogue's definitions of the named tools, in order.
func genDefs(names ...string) []ai.Tool {
	var out []ai.Tool
	for _, n := range names {
		for _, t := range genCatalogue() {
			if t.Definition.Name == n {
				out = append(out, t.Definition)
			}
		}
	}
	return out
}

func genSection(key, text string) core.SystemSection {
	return core.SystemSection{Key: key, Text: &text}
}

// genIdentityHook registers the host's harness-wide identity section.
func genIdentityHook(h *agent.Harness) {
	h.Hooks().On(agent.GenerationKind, agent.HookSystemInstructions,
		core.Hook(func(ctx context.Context, in agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
			return agent.SystemInstructionsOutput{Sections: []core.SystemSection{genSection("identity", genIdentity)}}, nil
		}), core.HookOptions{})
}

func genSelect(t testing.TB, ctx context.Context, c *agent.Conversation, names ...string) {
	t.Helper()
	cfg, err := c.Settings()
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Set(ctx, map[string]any{"selectedTools": names}); err != nil {
		t.Fatal(err)
	}
}

func genSelected(t testing.TB, ctx context.Context, c *agent.Conversation) []string {
	t.Helper()
	cfg := must(c.Settings())
	raw, ok := must(cfg.Get(ctx))["selectedTools"]
	if !ok {
		return nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		t.Fatal(err)
	}
	return names
}

// genSystemEntries returns conv's system entries with ids after after.
func genSystemEntries(ctx context.Context, h *agent.Harness, conv, after storage.ID) []*storage.Entry {
	p := must(h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv, Kind: "system"}))
	var out []*storage.Entry
	for _, e := range p.Items {
		if e.ID > after {
			out = append(out, e)
		}
	}
	return out
}

func genSystemData(t testing.TB, e *storage.Entry) core.SystemData {
	t.Helper()
	d, err := core.SystemKind.Data(e)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// genCheckSystem checks a system entry: its data is want, and its
// materialized message carries the same change (tool definitions added,
// names removed, sections by key) and says each of says.
func genCheckSystem(t testing.TB, e *storage.Entry, want core.SystemData, says ...string) {
	t.Helper()
	got := genSystemData(t, e)
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("system entry %d data (-want +got):\n%s", e.ID, diff)
	}
	if len(e.Model) != 1 || e.Model[0].Role != ai.RoleSystem {
		t.Fatalf("system entry %d model = %+v; want one system message", e.ID, e.Model)
	}
	m := e.Model[0]
	if diff := cmp.Diff(want.ToolsAdded, m.ToolsAdded, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("system message %d toolsAdded (-want +got):\n%s", e.ID, diff)
	}
	var removed []ai.ToolRef
	for _, r := range want.ToolsRemoved {
		removed = append(removed, ai.ToolRef{Name: r.Name})
	}
	if diff := cmp.Diff(removed, m.ToolsRemoved, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("system message %d toolsRemoved (-want +got):\n%s", e.ID, diff)
	}
	if !want.Baseline {
		sections := map[string]*string{}
		for _, s := range want.Sections {
			sections[s.Key] = s.Text
		}
		if diff := cmp.Diff(sections, m.Sections, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("system message %d sections (-want +got):\n%s", e.ID, diff)
		}
	}
	text := m.Content.TextOf()
	for _, s := range says {
		if !strings.Contains(text, s) {
			t.Fatalf("system message %d reads %q; want it to say %q", e.ID, text, s)
		}
	}
}

// genBaselineSays is what a baseline's prompt must contain: every section's
// text, in order.
func genBaselineSays(t testing.TB, e *storage.Entry) {
	t.Helper()
	text := e.Model[0].Content.TextOf()
	at := 0
	for _, s := range genSystemData(t, e).Sections {
		i := strings.Index(text[at:], *s.Text)
		if i < 0 {
			t.Fatalf("baseline %d reads %q; want section %s (%q) after offset %d", e.ID, text, s.Key, *s.Text, at)
		}
		at += i + len(*s.Text)
	}
}

// genCheckRequest checks what a request sent: the baseline's message in the
// provider's baseline slot, no other baseline, and the folded tool set.
func genCheckRequest(t testing.TB, req ai.Request, baseline *storage.Entry, tools []ai.Tool) {
	t.Helper()
	if len(req.Messages) == 0 || req.Messages[0].Role != ai.RoleSystem ||
		req.Messages[0].Content.TextOf() != baseline.Model[0].Content.TextOf() {
		t.Fatalf("request opens with %+v; want baseline %d's message", req.Messages, baseline.ID)
	}
	for i, m := range req.Messages[1:] {
		if m.Role == ai.RoleSystem && m.Content.TextOf() == baseline.Model[0].Content.TextOf() {
			t.Fatalf("request message %d repeats the baseline", i+1)
		}
	}
	if diff := cmp.Diff(tools, req.Tools, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("request tools (-want +got):\n%s", diff)
	}
}

func genLastRequest(t testing.TB, a *loop) ai.Request {
	t.Helper()
	reqs := a.faux.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request was sent")
	}
	return reqs[len(reqs)-1]
}

// genTasks returns conv's tasks of one kind, in creation order.
func genTasks(ctx context.Context, h *agent.Harness, conv storage.ID, kind string) []*storage.Task {
	p := must(h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationIDs: []storage.ID{conv}, Kind: kind}))
	return p.Items
}

// genOnly returns conv's one generation.
func genOnly(t testing.TB, ctx context.Context, h *agent.Harness, conv storage.ID) (*storage.Task, agent.GenerationState) {
	t.Helper()
	gens := genTasks(ctx, h, conv, agent.GenerationKindName)
	if len(gens) != 1 {
		t.Fatalf("got %d generations; want 1", len(gens))
	}
	var st agent.GenerationState
	if err := json.Unmarshal(gens[0].State, &st); err != nil {
		t.Fatal(err)
	}
	return gens[0], st
}

func genUsage(ctx context.Context, h *agent.Harness) []agent.UsageRow {
	p := must(h.Store().ReadList(ctx, agent.UsageList.Address, storage.ListQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}}))
	out := make([]agent.UsageRow, len(p.Items))
	for i, e := range p.Items {
		if err := json.Unmarshal(e.Value, &out[i]); err != nil {
			panic(err)
		}
	}
	return out
}

// genOutcomes lists the attempts' outcomes of usage rows.
func genOutcomes(rows []agent.UsageRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Outcome
	}
	return out
}

// genBatchLog records every committed batch, so a test can tell what one
// commit wrote.
type genBatchLog struct {
	storage.Storage
	batches []storage.CommitBatch
}

func (l *genBatchLog) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	r, err := l.Storage.Commit(ctx, b)
	if err == nil {
		l.batches = append(l.batches, b)
	}
	return r, err
}

// settling returns the batch that settled task id, with its status.
func (l *genBatchLog) settling(id storage.ID) (storage.CommitBatch, string, bool) {
	for _, b := range l.batches {
		for _, w := range b.Writes {
			if w.Type == storage.WriteSettle && w.ID == id {
				return b, w.Status, true
			}
		}
	}
	return storage.CommitBatch{}, "", false
}

// statuses lists every status task id was given, in commit order.
func (l *genBatchLog) statuses(id storage.ID) []string {
	var out []string
	for _, b := range l.batches {
		for _, w := range b.Writes {
			if (w.Type == storage.WritePatch || w.Type == storage.WriteSettle) && w.ID == id && w.Status != "" {
				out = append(out, w.Status)
			}
		}
	}
	return out
}

// genLongText is the long answer streamed by the crash and abort tests: many
// chunks, so that a cut lands inside the text.
var genLongText = strings.Repeat("the quick brown fox jumps over the lazy dog; ", 100)

// genCheckPartial checks that e is a partial of genLongText that ended with
// stop reason r and holds no tool call.
func genCheckPartial(t testing.TB, e *storage.Entry, r ai.StopReason) {
	t.Helper()
	if e == nil || len(e.Model) != 1 || e.Kind != "assistant" {
		t.Fatalf("partial = %+v; want one assistant entry", e)
	}
	m := e.Model[0]
	text := m.Content.TextOf()
	if m.StopReason != r || text == "" || len(text) >= len(genLongText) || !strings.HasPrefix(genLongText, text) {
		t.Fatalf("partial stopReason %s, text %q; want %s with a proper non-empty prefix of the streamed text", m.StopReason, text, r)
	}
	if calls := m.ToolCalls(); len(calls) != 0 {
		t.Fatalf("partial holds tool calls %+v; want none", calls)
	}
}

// genStreamingStep streams genLongText and then calls tool a.
func genStreamingStep() faux.Step {
	return faux.Reply(faux.Text(genLongText), faux.ToolCall("call-a", "a", `{"v":"x"}`)).WithStop(ai.StopToolUse)
}

// --- 1. system-entry traces ---

type genTraceRun struct {
	t    testing.TB
	ctx  context.Context
	a    *loop
	c    *agent.Conversation
	host map[string]string // what the host's handlers render
}

type genTurn struct {
	change func(r *genTraceRun) // before the turn; nil changes nothing
	script []faux.Step          // nil answers at once
	want   core.SystemData      // the one system entry the turn writes
	says   []string             // what its message says
	tools  []ai.Tool            // what the turn's last request offers
	check  func(r *genTraceRun, system *storage.Entry)
}

// The usage guide's traces: after a baseline with every section and tool,
// each change is one system entry with only that change, and a turn with
// nothing changed writes none.
func TestSystemEntriesCarryOnlyWhatChangedSinceTheBaseline(t *testing.T) {
	hostSections := func(r *genTraceRun) {
		r.a.h.Root().Hooks().On(agent.GenerationKind, agent.HookSystemInstructions,
			core.Hook(func(ctx context.Context, in agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
				return agent.SystemInstructionsOutput{Sections: []core.SystemSection{
					genSection("cwd", "Working directory: /src"), genSection("skills", r.host["skills"]),
				}}, nil
			}), core.HookOptions{Subtree: true})
	}
	mcpSchema := json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"},"timeout":{"type":"integer"}},"required":["cmd"]}`)
	bashV2 := genDefs("bash")[0]
	bashV2.Parameters = mcpSchema
	mcpTools := func(r *genTraceRun) {
		r.a.h.Root().Hooks().On(agent.GenerationKind, agent.HookSystemInstructions,
			core.Hook(func(ctx context.Context, in agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
				tools := r.a.h.Tools(in.Config.SelectedTools)
				for i := range tools {
					if tools[i].Name == "bash" && r.host["bash"] == "v2" {
						tools[i].Parameters = mcpSchema
					}
				}
				return agent.SystemInstructionsOutput{Tools: tools}, nil
			}), core.HookOptions{Subtree: true})
	}
	guidance := "Plan mode: propose a plan and change nothing."
	planPlugin := func(r *genTraceRun) {
		r.a.h.Hooks().On(agent.GenerationKind, agent.HookSystemInstructions,
			core.Hook(func(ctx context.Context, in agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
				on := false
				v, ok, err := r.a.h.Store().GetValue(ctx, genPlanMode.In(in.ConversationID).Address, 0)
				if err != nil {
					return agent.SystemInstructionsOutput{}, err
				}
				if ok {
					if err := json.Unmarshal(v.Value, &on); err != nil {
						return agent.SystemInstructionsOutput{}, err
					}
				}
				s := core.SystemSection{Key: "plan_mode"}
				if on {
					s.Text = &guidance
				}
				return agent.SystemInstructionsOutput{Sections: []core.SystemSection{s}}, nil
			}), core.HookOptions{})
	}
	setPlan := func(on bool) func(r *genTraceRun) {
		return func(r *genTraceRun) {
			must(r.c.Commit(r.ctx, func(tx *core.ConversationTx) error { tx.SetValue(genPlanMode.Address, on); return nil }))
		}
	}
	identity := genSection("identity", genIdentity)

	cases := []struct {
		name     string
		selected []string
		setup    func(r *genTraceRun)
		baseline core.SystemData
		turns    []genTurn
	}{
		{
			name:     "tool added",
			selected: []string{"read", "write", "bash"},
			baseline: core.SystemData{Baseline: true, Sections: []core.SystemSection{identity}, ToolsAdded: genDefs("read", "write", "bash")},
			turns: []genTurn{{
				change: func(r *genTraceRun) { genSelect(r.t, r.ctx, r.c, "read", "write", "bash", "grep") },
				want:   core.SystemData{ToolsAdded: genDefs("grep")},
				says:   []string{"grep"},
				tools:  genDefs("read", "write", "bash", "grep"),
			}},
		},
		{
			name:     "tool removed",
			selected: []string{"read", "write", "bash"},
			baseline: core.SystemData{Baseline: true, Sections: []core.SystemSection{identity}, ToolsAdded: genDefs("read", "write", "bash")},
			turns: []genTurn{{
				change: func(r *genTraceRun) { genSelect(r.t, r.ctx, r.c, "read") },
				want:   core.SystemData{ToolsRemoved: genDefs("write", "bash")},
				says:   []string{"write", "bash"},
				tools:  genDefs("read"),
			}},
		},
		{
			name:     "host section changed",
			selected: []string{"read", "write", "bash"},
			setup: func(r *genTraceRun) {
				r.host["skills"] = "Skills: none installed."
				hostSections(r)
			},
			baseline: core.SystemData{Baseline: true, ToolsAdded: genDefs("read", "write", "bash"), Sections: []core.SystemSection{
				identity, genSection("cwd", "Working directory: /src"), genSection("skills", "Skills: none installed."),
			}},
			turns: []genTurn{{
				change: func(r *genTraceRun) { r.host["skills"] = "Skills: review (reviews a diff)." },
				want:   core.SystemData{Sections: []core.SystemSection{genSection("skills", "Skills: review (reviews a diff).")}},
				says:   []string{"skills", "Skills: review (reviews a diff)."},
				tools:  genDefs("read", "write", "bash"),
			}},
		},
		{
			name:     "schema changed",
			selected: []string{"read", "write", "bash"},
			setup:    mcpTools,
			baseline: core.SystemData{Baseline: true, Sections: []core.SystemSection{identity}, ToolsAdded: genDefs("read", "write", "bash")},
			turns: []genTurn{{
				change: func(r *genTraceRun) { r.host["bash"] = "v2" },
				want:   core.SystemData{ToolsAdded: []ai.Tool{bashV2}},
				says:   []string{"bash"},
				tools:  append(genDefs("read", "write"), bashV2),
			}},
		},
		{
			name:     "plugin section on and off",
			selected: []string{"read", "write", "bash"},
			setup:    planPlugin,
			baseline: core.SystemData{Baseline: true, Sections: []core.SystemSection{identity}, ToolsAdded: genDefs("read", "write", "bash")},
			turns: []genTurn{{
				change: setPlan(true),
				want:   core.SystemData{Sections: []core.SystemSection{genSection("plan_mode", guidance)}},
				says:   []string{"plan_mode", guidance},
				tools:  genDefs("read", "write", "bash"),
			}, {
				change: setPlan(false),
				want:   core.SystemData{Sections: []core.SystemSection{{Key: "plan_mode"}}},
				says:   []string{"plan_mode"},
				tools:  genDefs("read", "write", "bash"),
			}},
		},
		{
			name:     "addTools",
			selected: []string{"read", "write", "bash", "discover"},
			baseline: core.SystemData{Baseline: true, Sections: []core.SystemSection{identity}, ToolsAdded: genDefs("read", "write", "bash", "discover")},
			turns: []genTurn{{
				script: []faux.Step{calls("discover"), answer("calc is ready")},
				want:   core.SystemData{ToolsAdded: genDefs("calc")},
				says:   []string{"calc"},
				tools:  genDefs("read", "write", "bash", "discover", "calc"),
				check: func(r *genTraceRun, system *storage.Entry) {
					if got, want := genSelected(r.t, r.ctx, r.c), []string{"read", "write", "bash", "discover", "calc"}; !cmp.Equal(got, want) {
						r.t.Fatalf("pi.tools.selected = %v; want %v", got, want)
					}
					results := r.a.entriesOf(r.ctx, r.c.ID, "tool_result")
					if len(results) != 1 || system.ID < results[0] {
						r.t.Fatalf("system entry %d, tool results %v; want the delta from the generation after post_tools", system.ID, results)
					}
					if n := len(genTasks(r.ctx, r.a.h, r.c.ID, agent.GenerationKindName)); n != 3 {
						r.t.Fatalf("got %d generations; want 3 (baseline turn, the call, the continuation)", n)
					}
				},
			}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				a := openAgent(t, ctx, s, agentOptions{tools: genCatalogue()})
				r := &genTraceRun{t: t, ctx: ctx, a: a, c: a.h.Root(), host: map[string]string{}}
				genIdentityHook(a.h)
				genSelect(t, ctx, r.c, tc.selected...)
				if tc.setup != nil {
					tc.setup(r)
				}
				turn := func(script []faux.Step) []*storage.Entry {
					t.Helper()
					if script == nil {
						script = []faux.Step{answer("ok")}
					}
					a.faux.SetResponses(script...)
					mark := a.h.Store().LastSeq()
					if got := must(r.c.Prompt(ctx, userText("go on"), agent.AcceptOptions{})); got == nil {
						t.Fatal("the turn ended without an answer")
					}
					return genSystemEntries(ctx, a.h, r.c.ID, mark)
				}

				first := turn(nil)
				if len(first) != 1 {
					t.Fatalf("the first turn wrote %d system entries; want 1 baseline", len(first))
				}
				baseline := first[0]
				genCheckSystem(t, baseline, tc.baseline)
				genBaselineSays(t, baseline)
				genCheckRequest(t, genLastRequest(t, a), baseline, tc.baseline.ToolsAdded)

				tools := tc.baseline.ToolsAdded
				for i, tt := range tc.turns {
					if tt.change != nil {
						tt.change(r)
					}
					got := turn(tt.script)
					if len(got) != 1 {
						t.Fatalf("turn %d wrote %d system entries; want 1 delta", i+2, len(got))
					}
					genCheckSystem(t, got[0], tt.want, tt.says...)
					genCheckRequest(t, genLastRequest(t, a), baseline, tt.tools)
					if tt.check != nil {
						tt.check(r, got[0])
					}
					tools = tt.tools
				}

				if got := turn(nil); len(got) != 0 {
					t.Fatalf("a turn with nothing changed wrote system entries %v; want none", got)
				}
				genCheckRequest(t, genLastRequest(t, a), baseline, tools)
				if len(a.reports) != 0 {
					t.Fatalf("reports: %v", a.reports)
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// --- 2. a head starts a new epoch ---

// After a reset or a handoff the context has no baseline, so the next
// generation writes a fresh one with every section and tool; the old
// baseline is no longer sent.
func TestAHeadMakesTheNextGenerationWriteAFreshBaseline(t *testing.T) {
	cases := []struct {
		name   string
		before func(ctx context.Context, c *agent.Conversation) // between the turns
		script []faux.Step
		head   string // the head entry's kind
	}{
		{
			name: "reset",
			before: func(ctx context.Context, c *agent.Conversation) {
				must(c.Commit(ctx, func(tx *core.ConversationTx) error { core.AppendReset(tx.Tx, c.ID); return nil }))
			},
			script: []faux.Step{answer("fresh")},
			head:   "reset",
		},
		{
			name: "new_context handoff",
			script: []faux.Step{
				faux.Reply(faux.ToolCall("call-nc", "new_context", `{"message":"continue from the summary"}`)).WithStop(ai.StopToolUse),
				answer("fresh"),
			},
			head: "handoff",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				tools := []agent.Tool{echoTool("read"), echoTool("write"), agent.NewContextTool()}
				a := openAgent(t, ctx, s, agentOptions{tools: tools})
				genIdentityHook(a.h)
				c := a.h.Root()
				a.faux.SetResponses(answer("first"))
				must(c.Prompt(ctx, userText("first"), agent.AcceptOptions{}))
				if tc.before != nil {
					tc.before(ctx, c)
				}
				a.faux.SetResponses(tc.script...)
				if got := must(c.Prompt(ctx, userText("second"), agent.AcceptOptions{})); got == nil || got.Model[0].Content.TextOf() != "fresh" {
					t.Fatalf("second answer = %+v; want fresh", got)
				}
				systems := genSystemEntries(ctx, a.h, c.ID, 0)
				heads := a.entriesOf(ctx, c.ID, tc.head)
				if len(systems) != 2 || len(heads) != 1 {
					t.Fatalf("got %d system entries and %d %s heads; want 2 and 1", len(systems), len(heads), tc.head)
				}
				want := core.SystemData{Baseline: true, Sections: []core.SystemSection{genSection("identity", genIdentity)},
					ToolsAdded: []ai.Tool{tools[0].Definition, tools[1].Definition, tools[2].Definition, agent.SubagentTool().Definition}}
				for _, e := range systems {
					genCheckSystem(t, e, want)
				}
				if systems[1].ID < heads[0] {
					t.Fatalf("second baseline %d precedes the %s head %d; want it after", systems[1].ID, tc.head, heads[0])
				}
				genCheckRequest(t, genLastRequest(t, a), systems[1], want.ToolsAdded)
				for _, m := range genLastRequest(t, a).Messages {
					if m.Role == ai.RoleUser && m.Content.TextOf() == "first" {
						t.Fatalf("the request after the %s still sends the old epoch's user message", tc.head)
					}
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// --- 3. forks ---

// A fork carries the shared baseline and diffs its own config against it;
// the source conversation is unaffected.
func TestForkDiffsItsOwnConfigAgainstTheSharedBaseline(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{tools: genCatalogue()})
		genIdentityHook(a.h)
		c := a.h.Root()
		genSelect(t, ctx, c, "read", "write", "bash")
		a.faux.SetResponses(answer("first"))
		first := must(c.Prompt(ctx, userText("inspect the parser"), agent.AcceptOptions{}))
		baselines := genSystemEntries(ctx, a.h, c.ID, 0)
		if first == nil || len(baselines) != 1 {
			t.Fatalf("first turn: answer %v, %d system entries; want an answer and one baseline", first, len(baselines))
		}
		baseline := baselines[0]

		b := must(c.Fork(ctx, first.ID, core.ForkOptions{}))
		genSelect(t, ctx, b, "read")
		a.faux.SetResponses(answer("fork answer"))
		if got := must(b.Prompt(ctx, userText("only read"), agent.AcceptOptions{})); got == nil {
			t.Fatal("the fork's turn ended without an answer")
		}
		forkSystems := genSystemEntries(ctx, a.h, b.ID, 0)
		if len(forkSystems) != 2 || forkSystems[0].ID != baseline.ID {
			t.Fatalf("fork system entries %v; want the shared baseline %d and one delta", forkSystems, baseline.ID)
		}
		genCheckSystem(t, forkSystems[1], core.SystemData{ToolsRemoved: genDefs("write", "bash")}, "write", "bash")
		genCheckRequest(t, genLastRequest(t, a), baseline, genDefs("read"))

		a.faux.SetResponses(answer("source answer"))
		if got := must(c.Prompt(ctx, userText("again"), agent.AcceptOptions{})); got == nil {
			t.Fatal("the source's turn ended without an answer")
		}
		if got := genSystemEntries(ctx, a.h, c.ID, 0); len(got) != 1 || got[0].ID != baseline.ID {
			t.Fatalf("source system entries %v; want only baseline %d", got, baseline.ID)
		}
		genCheckRequest(t, genLastRequest(t, a), baseline, genDefs("read", "write", "bash"))
		if got, want := genSelected(t, ctx, c), []string{"read", "write", "bash"}; !cmp.Equal(got, want) {
			t.Fatalf("source selectedTools = %v; want %v", got, want)
		}
		must(0, a.h.Close(ctx))
	})
}

// --- 4. restarts ---

// A restart with a changed host emits only the sections that changed; a
// host that comes back the same emits nothing.
func TestRestartEmitsOnlyTheHostSectionsThatChanged(t *testing.T) {
	cases := []struct {
		name string
		cwd  string // after the restart
		want []core.SystemData
	}{
		{name: "changed cwd", cwd: "Working directory: /other", want: []core.SystemData{{Sections: []core.SystemSection{genSection("cwd", "Working directory: /other")}}}},
		{name: "unchanged host", cwd: "Working directory: /src"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				store := simtest.Reopenable{Store: memory.New()}
				host := func(h *agent.Harness, cwd string) {
					genIdentityHook(h)
					h.Hooks().On(agent.GenerationKind, agent.HookSystemInstructions,
						core.Hook(func(ctx context.Context, in agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
							return agent.SystemInstructionsOutput{Sections: []core.SystemSection{genSection("cwd", cwd), genSection("skills", "Skills: none.")}}, nil
						}), core.HookOptions{})
				}
				a1 := openAgent(t, ctx, s, agentOptions{store: store})
				host(a1.h, "Working directory: /src")
				a1.faux.SetResponses(answer("before"))
				must(a1.h.Root().Prompt(ctx, userText("one"), agent.AcceptOptions{}))
				baselines := genSystemEntries(ctx, a1.h, a1.h.Root().ID, 0)
				if len(baselines) != 1 {
					t.Fatalf("got %d system entries before the restart; want 1", len(baselines))
				}
				must(0, a1.h.Close(ctx))

				a2 := openAgent(t, ctx, s, agentOptions{store: store})
				host(a2.h, tc.cwd)
				a2.faux.SetResponses(answer("after"))
				mark := store.LastSeq()
				if got := must(a2.h.Root().Prompt(ctx, userText("two"), agent.AcceptOptions{})); got == nil {
					t.Fatal("the turn after the restart ended without an answer")
				}
				got := genSystemEntries(ctx, a2.h, a2.h.Root().ID, mark)
				if len(got) != len(tc.want) {
					t.Fatalf("the restart wrote %d system entries; want %d", len(got), len(tc.want))
				}
				for i, w := range tc.want {
					genCheckSystem(t, got[i], w, "cwd", tc.cwd)
				}
				genCheckRequest(t, genLastRequest(t, a2), baselines[0], a2.h.Tools(nil))
				must(0, a2.h.Close(ctx))
			})
		})
	}
}

// --- 5. retries ---

// A retryable error keeps the generation: it waits in retry_wait and its
// next attempt answers; each attempt has its usage row.
func TestRateLimitedAttemptRetriesInTheSameGeneration(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		log := &genBatchLog{Storage: memory.New()}
		a := openAgent(t, ctx, s, agentOptions{store: log})
		a.faux.SetResponses(faux.RateLimited(), answer("after the wait"))
		c := a.h.Root()
		start := s.Now()
		got := must(c.Prompt(ctx, userText("hi"), agent.AcceptOptions{}))
		if got == nil || got.Model[0].Content.TextOf() != "after the wait" {
			t.Fatalf("answer = %+v; want after the wait", got)
		}
		gen, st := genOnly(t, ctx, a.h, c.ID)
		if gen.Status != "done" || st.Attempt != 2 {
			t.Fatalf("generation %s, attempt %d; want done, attempt 2", gen.Status, st.Attempt)
		}
		if diff := cmp.Diff([]string{"streaming", "retry_wait", "streaming", "done"}, log.statuses(gen.ID)); diff != "" {
			t.Fatalf("generation statuses (-want +got):\n%s", diff)
		}
		if waited := s.Now().Sub(start); waited < time.Second {
			t.Fatalf("the retry went out after %v; want the default delay of 1s", waited)
		}
		rows := genUsage(ctx, a.h)
		if diff := cmp.Diff([]string{"retry", "done"}, genOutcomes(rows)); diff != "" {
			t.Fatalf("usage outcomes (-want +got):\n%s", diff)
		}
		for i, r := range rows {
			if r.TaskID != gen.ID || r.Attempt != i+1 || r.Kind != agent.GenerationKindName {
				t.Fatalf("usage row %d = %+v; want generation %d attempt %d", i, r, gen.ID, i+1)
			}
		}
		if n := a.faux.Calls(); n != 2 {
			t.Fatalf("got %d provider calls; want 2", n)
		}
		must(0, a.h.Close(ctx))
	})
}

// An exhausted retry budget fails the generation and its input group, and
// nothing else starts.
func TestExhaustedRetryBudgetFailsTheTurnWithoutASuccessor(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{retry: agent.RetryPolicy{Attempts: 2}})
		a.faux.SetResponses(faux.RateLimited(), faux.RateLimited(), answer("never sent"))
		c := a.h.Root()
		got, err := c.Prompt(ctx, userText("hi"), agent.AcceptOptions{RequestID: "req-1"})
		var ie *agent.InputError
		if !errors.As(err, &ie) || got != nil || ie.Result.Status != agent.InputFailed || !strings.Contains(ie.Result.Reason, "retry budget") {
			t.Fatalf("prompt = %v, %v; want no answer and an InputError carrying the failed result", got, err)
		}
		receipt, _ := genMust2(a.h.Acceptance(ctx, "req-1"))
		input := receipt.InputID
		gen, st := genOnly(t, ctx, a.h, c.ID)
		const reason = "retry budget of 2 attempts exhausted"
		if gen.Status != "failed" || !strings.Contains(st.Reason, reason) || st.Attempt != 2 {
			t.Fatalf("generation %s, reason %q, attempt %d; want failed, %q, attempt 2", gen.Status, st.Reason, st.Attempt, reason)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputFailed || r.Reason != st.Reason {
			t.Fatalf("input = %+v; want failed with the generation's reason", r)
		}
		if diff := cmp.Diff([]string{"retry", "failed"}, genOutcomes(genUsage(ctx, a.h))); diff != "" {
			t.Fatalf("usage outcomes (-want +got):\n%s", diff)
		}
		if calls, pending := a.faux.Calls(), a.faux.Pending(); calls != 2 || pending != 1 {
			t.Fatalf("provider calls %d, pending %d; want 2 and 1", calls, pending)
		}
		if in := must(a.h.Inspect(ctx)); len(in.Start)+len(in.Inflight) != 0 {
			t.Fatalf("live tasks %v %v; want none", in.Start, in.Inflight)
		}
		must(0, a.h.Close(ctx))
	})
}

// --- 6. crash while streaming ---

// streamCrash is a first process that dies while streaming: it holds the
// nth scratch commit of a generation (the provider's start event is the
// first frame) so that a second process opens what reached storage.
type streamCrash struct {
	store   *fault.Storage
	a1      *loop
	input   storage.ID
	driving core.Event
}

func crashAtFrame(t testing.TB, ctx context.Context, s *sim.Sim, n int) streamCrash {
	name := fmt.Sprintf("frame-%d", n)
	store := fault.Wrap(s.Runtime(), memory.New(), fault.Plan{Faults: []fault.Fault{
		{Name: name, Kind: fault.Hold, Commit: n, Batch: storage.BatchScratch},
	}}, nil)
	a1 := openAgent(t, ctx, s, agentOptions{store: store})
	a1.faux.SetResponses(genStreamingStep())
	c1 := a1.h.Root()
	input := must(c1.Accept(ctx, userText("stream"), agent.AcceptOptions{}))
	driving := simtest.DriveInActor(ctx, s, c1, nil)
	must(0, store.WaitHeld(ctx, name))
	return streamCrash{store: store, a1: a1, input: input, driving: driving}
}

// end closes the dead process after the second one is done.
func (c streamCrash) end(ctx context.Context) {
	simtest.CloseCrashed(ctx, c.a1.h)
	must(0, c.driving.Wait(ctx))
}

// A crash after frames reached scratch: recover publishes the partial as an
// error answer, fails the input as interrupted and creates no tools.
func TestCrashWhileStreamingPublishesThePartialAndFailsTheTurn(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		// The fourth scratch commit (start, text start, one delta before it)
		// is where the process dies.
		cr := crashAtFrame(t, ctx, s, 4)

		a2 := openAgent(t, ctx, s, agentOptions{store: cr.store.Reopen(fault.Plan{})})
		a2.faux.SetResponses(answer("must not be asked"))
		c := a2.h.Root()
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive after reopen = %s; want idle", got)
		}
		gen, st := genOnly(t, ctx, a2.h, c.ID)
		if gen.Status != "failed" || !strings.HasPrefix(st.Reason, "interrupted") || st.Assistant == 0 {
			t.Fatalf("generation %s, reason %q, assistant %d; want failed, interrupted, the partial", gen.Status, st.Reason, st.Assistant)
		}
		partial, _ := genMust2(a2.h.GetEntry(ctx, st.Assistant))
		genCheckPartial(t, partial, ai.StopError)
		if r := a2.result(ctx, c, cr.input); r.Status != agent.InputFailed || !strings.HasPrefix(r.Reason, "interrupted") {
			t.Fatalf("input = %+v; want failed, interrupted", r)
		}
		for _, kind := range []string{agent.ToolKindName, agent.PostToolsKindName} {
			if n := len(genTasks(ctx, a2.h, c.ID, kind)); n != 0 {
				t.Fatalf("got %d %s tasks; want none", n, kind)
			}
		}
		if n := a2.faux.Calls(); n != 0 {
			t.Fatalf("recover called the provider %d times; want 0", n)
		}
		want := []string{"user:stream", "system:system", "assistant:" + partial.Model[0].Content.TextOf() + ",error"}
		if diff := cmp.Diff(want, a2.transcript(ctx, c.ID)); diff != "" {
			t.Fatalf("transcript (-want +got):\n%s", diff)
		}
		must(0, a2.h.Close(ctx))
		cr.end(ctx)
	})
}

// A crash before any frame reached scratch: recover retries the attempt,
// which answers.
func TestCrashBeforeAnyFrameRetriesTheAttempt(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		cr := crashAtFrame(t, ctx, s, 1)

		log := &genBatchLog{Storage: cr.store.Reopen(fault.Plan{})}
		a2 := openAgent(t, ctx, s, agentOptions{store: log})
		a2.faux.SetResponses(answer("second attempt"))
		c := a2.h.Root()
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive after reopen = %s; want idle", got)
		}
		gen, st := genOnly(t, ctx, a2.h, c.ID)
		if gen.Status != "done" || st.Attempt != 2 {
			t.Fatalf("generation %s, attempt %d; want done, attempt 2", gen.Status, st.Attempt)
		}
		if diff := cmp.Diff([]string{"retry_wait", "streaming", "done"}, log.statuses(gen.ID)); diff != "" {
			t.Fatalf("statuses after reopen (-want +got):\n%s", diff)
		}
		r := a2.result(ctx, c, cr.input)
		answerEntry, _ := genMust2(a2.h.GetEntry(ctx, r.ResultEntryID))
		if r.Status != agent.InputDone || answerEntry == nil || answerEntry.Model[0].Content.TextOf() != "second attempt" {
			t.Fatalf("input = %+v; want done with the second attempt's answer", r)
		}
		want := []string{"user:stream", "system:system", "assistant:second attempt"}
		if diff := cmp.Diff(want, a2.transcript(ctx, c.ID)); diff != "" {
			t.Fatalf("transcript (-want +got):\n%s", diff)
		}
		// The interrupted attempt is on record, its cost unknown (nil), not zero.
		rows := genUsage(ctx, a2.h)
		if diff := cmp.Diff([]string{"interrupted", "done"}, genOutcomes(rows)); diff != "" || rows[0].Usage != nil {
			t.Fatalf("usage outcomes (-want +got):\n%s\nfirst usage %v; want nil", diff, rows[0].Usage)
		}
		if want := a2.faux.Models()[0].ID; rows[0].Model != want {
			t.Fatalf("interrupted usage row names model %q; want the resolved default %q", rows[0].Model, want)
		}
		must(0, a2.h.Close(ctx))
		cr.end(ctx)
	})
}

// Regression (issue 23, bug 1): the provider's start event is a frame, so
// a crash right after it used to publish an empty "partial" answer and fail
// the input. An empty partial is no partial: recover retries within the
// budget, with one more provider call, and the input ends done.
func TestCrashAfterOnlyTheStartFrameRetriesTheAttempt(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		cr := crashAtFrame(t, ctx, s, 2)

		a2 := openAgent(t, ctx, s, agentOptions{store: cr.store.Reopen(fault.Plan{})})
		a2.faux.SetResponses(answer("second attempt"))
		c := a2.h.Root()
		must(c.Drive(ctx))
		gen, st := genOnly(t, ctx, a2.h, c.ID)
		if gen.Status != "done" || st.Attempt != 2 || a2.faux.Calls() != 1 {
			t.Fatalf("generation %s, attempt %d, %d provider calls; want done at attempt 2 after one more call", gen.Status, st.Attempt, a2.faux.Calls())
		}
		if r := a2.result(ctx, c, cr.input); r.Status != agent.InputDone {
			t.Fatalf("input = %+v; want done", r)
		}
		want := []string{"user:stream", "system:system", "assistant:second attempt"}
		if diff := cmp.Diff(want, a2.transcript(ctx, c.ID)); diff != "" {
			t.Fatalf("transcript (-want +got):\n%s", diff)
		}
		must(0, a2.h.Close(ctx))
		cr.end(ctx)
	})
}

func genMust2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// --- 7. abort while streaming ---

// An abort of a streaming generation settles in one commit: the partial for
// display (if frames existed), the cancelled input, a usage row with the
// attempt's known usage (nil when none was reported) and the aborted status.
func TestAbortWhileStreamingSettlesInOneCommit(t *testing.T) {
	type abortSetup struct {
		store *genBatchLog
		wait  func(ctx context.Context, s *sim.Sim) // until the generation streams
		step  faux.Step
	}
	cases := []struct {
		name        string
		setup       func(s *sim.Sim) abortSetup
		withPartial bool
	}{
		{
			name: "after frames",
			setup: func(s *sim.Sim) abortSetup {
				fs := fault.Wrap(s.Runtime(), memory.New(), fault.Plan{Faults: []fault.Fault{
					{Name: "frame-4", Kind: fault.Hold, Commit: 4, Batch: storage.BatchScratch},
				}}, nil)
				return abortSetup{store: &genBatchLog{Storage: fs}, step: genStreamingStep(), wait: func(ctx context.Context, s *sim.Sim) {
					must(0, fs.WaitHeld(ctx, "frame-4"))
					fs.Release("frame-4")
				}}
			},
			withPartial: true,
		},
		{
			name: "before any frame",
			setup: func(s *sim.Sim) abortSetup {
				return abortSetup{store: &genBatchLog{Storage: memory.New()}, step: answer("too late").WithDelay(time.Hour), wait: func(ctx context.Context, s *sim.Sim) {
					must(0, s.Runtime().Sleep(ctx, time.Minute)) // the request waits an hour for its first byte
				}}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
				su := tc.setup(s)
				a := openAgent(t, ctx, s, agentOptions{store: su.store})
				a.faux.SetResponses(su.step)
				c := a.h.Root()
				input := must(c.Accept(ctx, userText("stream"), agent.AcceptOptions{}))
				var result core.DriveResult
				done := simtest.DriveInActor(ctx, s, c, func(r core.DriveResult, err error) { result = must(r, err) })
				su.wait(ctx, s)
				gen, _ := genOnly(t, ctx, a.h, c.ID)
				if gen.Status != "streaming" {
					t.Fatalf("generation is %s before the abort; want streaming", gen.Status)
				}
				if !tc.withPartial {
					p := must(a.h.Store().ReadList(ctx, genFrames.In(gen.ID).Address, storage.ListQuery{Cursor: storage.Cursor{Limit: 10}}))
					if len(p.Items) != 0 {
						t.Fatalf("%d frames in scratch before the abort; want none", len(p.Items))
					}
				}
				must(0, c.Abort(ctx))
				must(0, done.Wait(ctx))
				if result != core.Idle {
					t.Fatalf("drive = %s; want idle", result)
				}

				gen, st := genOnly(t, ctx, a.h, c.ID)
				if gen.Status != "aborted" {
					t.Fatalf("generation is %s; want aborted", gen.Status)
				}
				var partial *storage.Entry
				if tc.withPartial {
					partial, _ = genMust2(a.h.GetEntry(ctx, st.Assistant))
					genCheckPartial(t, partial, ai.StopAborted)
				} else if st.Assistant != 0 || len(a.entriesOf(ctx, c.ID, "assistant")) != 0 {
					t.Fatalf("assistant %d, entries %v; want no partial without frames", st.Assistant, a.entriesOf(ctx, c.ID, "assistant"))
				}
				if r := a.result(ctx, c, input); r.Status != agent.InputCancelled {
					t.Fatalf("input = %+v; want cancelled", r)
				}
				rows := genUsage(ctx, a.h)
				if len(rows) != 1 || rows[0].Outcome != "aborted" || rows[0].TaskID != gen.ID || rows[0].Attempt != 1 {
					t.Fatalf("usage rows %+v; want one aborted row for generation %d, attempt 1", rows, gen.ID)
				}
				// Regression (issue 23, bug 4): the row names the model the
				// attempt used, the default one here, not "".
				if want := a.faux.Models()[0].ID; rows[0].Model != want {
					t.Fatalf("aborted usage row names model %q; want the resolved default %q", rows[0].Model, want)
				}
				var wantUsage *ai.Usage // unknown without frames
				if partial != nil {
					wantUsage = partial.Model[0].Usage // what the frames reported
				}
				if diff := cmp.Diff(wantUsage, rows[0].Usage); diff != "" {
					t.Fatalf("aborted attempt usage (-want +got):\n%s", diff)
				}
				for _, kind := range []string{agent.ToolKindName, agent.PostToolsKindName} {
					if n := len(genTasks(ctx, a.h, c.ID, kind)); n != 0 {
						t.Fatalf("got %d %s tasks; want none", n, kind)
					}
				}

				// Atomicity: the settling batch holds every one of these writes.
				b, status, ok := su.store.settling(gen.ID)
				if !ok || status != "aborted" {
					t.Fatalf("settling batch found %v, status %q; want aborted", ok, status)
				}
				var wrote []string
				for _, w := range b.Writes {
					switch {
					case w.Type == storage.WriteEntry && w.Entry.Kind == "assistant":
						if w.Entry.ID != st.Assistant || w.Entry.Model[0].StopReason != ai.StopAborted {
							t.Fatalf("settling batch appends assistant %d (%s); want the partial %d", w.Entry.ID, w.Entry.Model[0].StopReason, st.Assistant)
						}
						wrote = append(wrote, "partial")
					case w.Type == storage.WriteValueSet && w.Addr.Namespace == agent.InputResultValue.Namespace:
						var r agent.InputResult
						must(0, json.Unmarshal(w.Value, &r))
						if w.Addr.Key != strconv.FormatInt(int64(input), 10) || r.Status != agent.InputCancelled {
							t.Fatalf("settling batch writes input result %s = %+v; want input %d cancelled", w.Addr.Key, r, input)
						}
						wrote = append(wrote, "input")
					case w.Type == storage.WriteListAppend && w.Addr.Namespace == agent.UsageList.Namespace:
						wrote = append(wrote, "usage")
					case w.Type == storage.WriteSettle:
						wrote = append(wrote, "settle")
					}
				}
				want := []string{"usage", "input", "settle"}
				if tc.withPartial {
					want = []string{"usage", "partial", "input", "settle"}
				}
				if diff := cmp.Diff(want, wrote); diff != "" {
					t.Fatalf("the settling commit's writes (-want +got):\n%s", diff)
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

// --- 8. usage ---

// pi.usage.totals is the sum of the known usage of every attempt, failed
// ones included; an attempt without a report is recorded as unknown (nil),
// never as zero.
func TestUsageTotalsSumTheKnownUsageOfEveryAttempt(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		usage := func(in, out int64, cost float64) ai.Usage {
			return ai.Usage{Input: in, Output: out, TotalTokens: in + out, Cost: ai.Cost{Input: cost / 2, Output: cost / 2, Total: cost}}
		}
		u1, u2, u3, u4 := usage(100, 20, 0.5), usage(110, 0, 0.25), usage(120, 30, 1), usage(130, 5, 0.125)

		a.faux.SetResponses(answer("one").WithUsage(u1))
		must(c.Prompt(ctx, userText("one"), agent.AcceptOptions{}))
		a.faux.SetResponses(faux.RateLimited().WithUsage(u2), answer("two").WithUsage(u3))
		must(c.Prompt(ctx, userText("two"), agent.AcceptOptions{}))
		a.faux.SetResponses(faux.Reply().WithError("boom").WithUsage(u4))
		var ie *agent.InputError
		if got, err := c.Prompt(ctx, userText("three"), agent.AcceptOptions{}); got != nil || !errors.As(err, &ie) || ie.Result.Status != agent.InputFailed {
			t.Fatalf("failed turn = %+v, %v; want no answer and an InputError", got, err)
		}
		// An attempt aborted before anything reached scratch reported nothing.
		a.faux.SetResponses(answer("four").WithDelay(time.Hour))
		must(c.Accept(ctx, userText("four"), agent.AcceptOptions{}))
		done := simtest.DriveInActor(ctx, s, c, nil)
		must(0, s.Runtime().Sleep(ctx, time.Minute))
		must(0, c.Abort(ctx))
		must(0, done.Wait(ctx))

		type row struct {
			Outcome string
			Usage   *ai.Usage
		}
		var got []row
		var sum ai.Usage
		for _, r := range genUsage(ctx, a.h) {
			got = append(got, row{r.Outcome, r.Usage})
			if r.Usage != nil {
				sum = sum.Add(*r.Usage)
			}
		}
		want := []row{{"done", &u1}, {"retry", &u2}, {"done", &u3}, {"failed", &u4}, {"aborted", nil}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("usage rows (-want +got):\n%s", diff)
		}
		v, ok := genMust2(a.h.Store().GetValue(ctx, agent.UsageTotals.Address, 0))
		var totals ai.Usage
		if !ok {
			t.Fatal("no pi.usage.totals")
		}
		must(0, json.Unmarshal(v.Value, &totals))
		if diff := cmp.Diff(u1.Add(u2).Add(u3).Add(u4), totals); diff != "" {
			t.Fatalf("pi.usage.totals (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(sum, totals); diff != "" {
			t.Fatalf("pi.usage.totals against the sum of pi.usage (-sum +totals):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
}

// --- 9. regressions ---

// A provider error fails the generation and ends the run: the drive returns
// idle, nothing stays live, and the conversation takes the next input.
func TestFailedGenerationEndsItsRun(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(faux.Reply().WithError("boom"))
		c := a.h.Root()
		input := must(c.Accept(ctx, userText("hi"), agent.AcceptOptions{}))
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		gen, st := genOnly(t, ctx, a.h, c.ID)
		if gen.Status != "failed" || st.Reason != "boom" {
			t.Fatalf("generation %s, reason %q; want failed, boom", gen.Status, st.Reason)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputFailed || r.Reason != "boom" {
			t.Fatalf("input = %+v; want failed, boom", r)
		}
		if in := must(a.h.Inspect(ctx)); len(in.Start)+len(in.Inflight) != 0 {
			t.Fatalf("live tasks %v %v; want none", in.Start, in.Inflight)
		}
		a.faux.SetResponses(answer("fine now"))
		if got := must(c.Prompt(ctx, userText("again"), agent.AcceptOptions{})); got == nil || got.Model[0].Content.TextOf() != "fine now" {
			t.Fatalf("next prompt = %+v; want fine now", got)
		}
		must(0, a.h.Close(ctx))
	})
}

// brokenArgs stands for a provider whose final messages' tool calls carry
// arguments that are not JSON.
type brokenArgs struct{ ai.Provider }

func (p brokenArgs) Stream(ctx context.Context, req ai.Request) ai.Stream {
	return brokenArgsStream{p.Provider.Stream(ctx, req)}
}

type brokenArgsStream struct{ ai.Stream }

func (s brokenArgsStream) Next(ctx context.Context) (ai.StreamEvent, bool) {
	ev, ok := s.Stream.Next(ctx)
	if ok && ev.Terminal() && ev.Message != nil && len(ev.Message.ToolCalls()) > 0 {
		m := *ev.Message
		m.Content.Blocks = slices.Clone(m.Content.Blocks)
		for i := range m.Content.Blocks {
			if m.Content.Blocks[i].Type == ai.BlockToolCall {
				m.Content.Blocks[i].Arguments = json.RawMessage(`{"v":`)
			}
		}
		ev.Message = &m
	}
	return ev, ok
}

// A final message no store could read back (a call's arguments that are
// not JSON) is the provider's failure: the turn fails saying so, no call
// runs, and the session goes on.
func TestAMalformedFinalMessageFailsTheTurnNotTheSession(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{wrap: func(p ai.Provider) ai.Provider { return brokenArgs{p} }})
		a.faux.SetResponses(calls("a"))
		c := a.h.Root()
		input := must(c.Accept(ctx, userText("hi"), agent.AcceptOptions{}))
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		gen, st := genOnly(t, ctx, a.h, c.ID)
		if gen.Status != "failed" || !strings.Contains(st.Reason, "malformed") || !strings.Contains(st.Reason, "block 0's arguments is not JSON") {
			t.Fatalf("generation %s, reason %q; want failed, the arguments named", gen.Status, st.Reason)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputFailed {
			t.Fatalf("input = %+v; want failed", r)
		}
		if got := a.transcript(ctx, c.ID); slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "toolResult") }) {
			t.Fatalf("transcript %v; want no call run", got)
		}
		if len(a.reports) > 0 {
			t.Fatalf("reports %v; want none", a.reports)
		}
		a.faux.SetResponses(answer("fine now"))
		if got := must(c.Prompt(ctx, userText("again"), agent.AcceptOptions{})); got == nil || got.Model[0].Content.TextOf() != "fine now" {
			t.Fatalf("next prompt = %+v; want fine now", got)
		}
		must(0, a.h.Close(ctx))
	})
}

// A task state patch that names ids minted in the same commit (a task it
// creates, an entry it appends), as a tool records the job it starts
// (§8.3), stores exactly those ids and reads them back after reopen; so does
// a patch of the task created in that commit.
func TestTaskPatchReferencesToIDsOfTheSameCommitReadBackExactly(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		type holderState struct {
			Note   string       `json:"note"`
			Child  storage.ID   `json:"child"`
			Notice storage.ID   `json:"notice"`
			Refs   []storage.ID `json:"refs"`
		}
		type childState struct {
			Holder storage.ID `json:"holder"`
			Notice storage.ID `json:"notice"`
		}
		var child, notice storage.ID
		var minted storage.Range
		var h *agent.Harness
		kinds := func() []core.TaskKind {
			holder := simtest.StepKind("holder", func(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
				childKind, _ := h.Kinds().Task("child")
				var err error
				minted, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
					child = tx.Task(childKind, core.TaskSpec{Background: true, State: childState{Holder: task.ID}})
					notice = tx.Entry(core.NoticeKind, core.EntryDraft{Data: map[string]any{"child": child}})
					tx.Patch(child, core.TaskPatch{State: map[string]any{"notice": notice}})
					tx.Patch(task.ID, core.TaskPatch{State: map[string]any{"child": child, "notice": notice, "refs": []storage.ID{child, notice}}})
					return nil
				})
				return err
			})
			return []core.TaskKind{holder, simtest.StepKind("child", nil)}
		}
		store := simtest.Reopenable{Store: memory.New()}
		a := openAgent(t, ctx, s, agentOptions{store: store, kinds: kinds()})
		h = a.h
		holderKind, _ := a.h.Kinds().Task("holder")
		c := a.h.Root()
		holder := simtest.CreateTask(t, ctx, c, holderKind, core.TaskSpec{State: holderState{Note: "keep"}})
		if got := must(c.Drive(ctx)); got != core.Idle {
			t.Fatalf("drive = %s; want idle", got)
		}
		if child != minted.First || notice != minted.First+1 {
			t.Fatalf("minted child %d, notice %d in commit %+v; want %d and %d", child, notice, minted, minted.First, minted.First+1)
		}
		want := holderState{Note: "keep", Child: child, Notice: notice, Refs: []storage.ID{child, notice}}
		check := func(h *agent.Harness, when string) {
			t.Helper()
			tasks := must(h.GetTasks(ctx, []storage.ID{holder, child}))
			var got holderState
			must(0, json.Unmarshal(tasks[holder].State, &got))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s: holder state (-want +got):\n%s", when, diff)
			}
			var cs childState
			if tasks[child] == nil || tasks[child].Kind != "child" {
				t.Fatalf("%s: task %d = %+v; want the child", when, child, tasks[child])
			}
			must(0, json.Unmarshal(tasks[child].State, &cs))
			if cs != (childState{Holder: holder, Notice: notice}) {
				t.Fatalf("%s: child state %+v; want holder %d, notice %d", when, cs, holder, notice)
			}
			e, ok := genMust2(h.GetEntry(ctx, notice))
			var data map[string]storage.ID
			if !ok || e.Kind != "notice" || json.Unmarshal(e.Data, &data) != nil || data["child"] != child {
				t.Fatalf("%s: entry %d = %+v; want the notice naming child %d", when, notice, e, child)
			}
		}
		check(a.h, "before reopen")
		must(0, a.h.Close(ctx))
		b := openAgent(t, ctx, s, agentOptions{store: store, kinds: kinds()})
		h = b.h
		check(b.h, "after reopen")
		must(0, b.h.Close(ctx))
	})
}

// While a generation waits in retry_wait, nothing signals quiescence: the
// drive returns idle only after the retry went out and answered.
func TestDriveStaysBusyThroughARetryWait(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		a := openAgent(t, ctx, s, agentOptions{retry: agent.RetryPolicy{Delay: 10 * time.Second}})
		a.faux.SetResponses(faux.RateLimited(), answer("after the wait"))
		c := a.h.Root()
		input := must(c.Accept(ctx, userText("hi"), agent.AcceptOptions{}))
		var result core.DriveResult
		var returnedAt time.Time
		done := simtest.DriveInActor(ctx, s, c, func(r core.DriveResult, err error) {
			result, returnedAt = must(r, err), rt.Now()
		})
		must(0, rt.Sleep(ctx, 5*time.Second))
		gen, st := genOnly(t, ctx, a.h, c.ID)
		if gen.Status != "retry_wait" || st.NotBefore <= rt.Now().UnixMilli() {
			t.Fatalf("generation %s, notBefore %d at %d; want retry_wait until later", gen.Status, st.NotBefore, rt.Now().UnixMilli())
		}
		if done.IsSet() {
			t.Fatalf("drive returned %s during the retry wait; want it busy", result)
		}
		must(0, done.Wait(ctx))
		if result != core.Idle || returnedAt.UnixMilli() < st.NotBefore {
			t.Fatalf("drive returned %s at %d; want idle at or after notBefore %d", result, returnedAt.UnixMilli(), st.NotBefore)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputDone {
			t.Fatalf("input = %+v; want done", r)
		}
		must(0, a.h.Close(ctx))
	})
}
