package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/sim/proc"
	"github.com/pico-go/pico/sim/simtest"
	"github.com/pico-go/pico/storage"
	"github.com/pico-go/pico/storage/memory"
)

// toolResults returns the tool-result entries of a conversation by call id.
func (a *loop) toolResults(ctx context.Context, conv storage.ID) map[string]*storage.Entry {
	a.t.Helper()
	p := must(a.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv, Kind: "tool_result"}))
	out := map[string]*storage.Entry{}
	for _, e := range p.Items {
		out[e.Key] = e
	}
	return out
}

func (a *loop) tasksOf(ctx context.Context, kind string) []*storage.Task {
	a.t.Helper()
	p := must(a.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, Kind: kind}))
	return p.Items
}

func resultText(e *storage.Entry) string { return e.Model[0].Content.TextOf() }

func isError(e *storage.Entry) bool { return e.Model[0].IsError != nil && *e.Model[0].IsError }

func TestParallelToolsStartPostToolsOnceInEitherOrder(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		slow := func(name string) agent.Tool {
			return toolFunc(name, func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
				// Each tool takes a seeded virtual time, so seeds settle them in both orders.
				if err := rt.Sleep(ctx, rt.Now().Add(time.Duration(s.Rand().IntN(3))*time.Millisecond)); err != nil {
					return err
				}
				out.Write(name + " done")
				return nil
			})
		}
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{slow("a"), slow("b")}})
		a.faux.SetResponses(calls("a", "b"), answer("both ran"))
		c := a.h.Root()
		if got := must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{})); got == nil {
			t.Fatal("no answer")
		}
		if n := len(a.tasksOf(ctx, agent.PostToolsKindName)); n != 1 {
			t.Fatalf("%d post_tools tasks; want 1", n)
		}
		if n := len(a.tasksOf(ctx, agent.GenerationKindName)); n != 2 {
			t.Fatalf("%d generations; want 2 (the call turn and its continuation)", n)
		}
		res := a.toolResults(ctx, c.ID)
		if resultText(res["call-a-0"]) != "a done" || resultText(res["call-b-1"]) != "b done" {
			t.Fatalf("results = %v / %v", resultText(res["call-a-0"]), resultText(res["call-b-1"]))
		}
		must(0, a.h.Close(ctx))
	})
}

func TestSequentialToolsRunInDependencyOrder(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		var order []string
		record := func(name string) agent.Tool {
			return toolFunc(name, func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
				order = append(order, name+" start")
				if err := rt.Sleep(ctx, rt.Now().Add(time.Duration(s.Rand().IntN(3))*time.Millisecond)); err != nil {
					return err
				}
				order = append(order, name+" end")
				return nil
			})
		}
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{record("a"), record("b")}})
		c := a.h.Root()
		var first, second storage.ID
		must(c.Commit(ctx, func(tx *core.ConversationTx) error {
			state := func(name string) agent.ToolState {
				return agent.ToolState{Call: faux.ToolCall("call-"+name, name, "{}"), Offered: true, BudgetMs: 1000}
			}
			first = tx.Task(agent.ToolKind, core.TaskSpec{State: state("a")})
			second = tx.Task(agent.ToolKind, core.TaskSpec{State: state("b"), After: []storage.ID{first}})
			return nil
		}))
		must(c.Drive(ctx))
		if diff := cmp.Diff([]string{"a start", "a end", "b start", "b end"}, order); diff != "" {
			t.Fatalf("order (-want +got):\n%s", diff)
		}
		if simtest.Status(t, ctx, a.h, first) != "done" || simtest.Status(t, ctx, a.h, second) != "done" {
			t.Fatal("tools did not settle done")
		}
		must(0, a.h.Close(ctx))
	})
}

func TestThrowingToolIsAnErrorResultAndTerminateIsHonoured(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		boom := toolFunc("boom", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			out.Write("partial work")
			out.Terminate(true)
			return errors.New("disk on fire")
		})
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{boom}})
		a.faux.SetResponses(calls("boom"))
		c := a.h.Root()
		input := must(c.Accept(ctx, userText("try"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		res := a.toolResults(ctx, c.ID)["call-boom-0"]
		if res == nil || !isError(res) || resultText(res) != "partial work\ndisk on fire" {
			t.Fatalf("result = %+v", res)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputStopped {
			t.Fatalf("input result = %+v; want stopped", r)
		}
		if n := len(a.tasksOf(ctx, agent.GenerationKindName)); n != 1 {
			t.Fatalf("%d generations; terminate must leave no successor", n)
		}
		if a.faux.Pending() != 0 || len(a.faux.Requests()) != 1 {
			t.Fatalf("the model was asked again after terminate")
		}
		must(0, a.h.Close(ctx))
	})
}

func TestSinkTruncatesAndSaysSoInADiag(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		long := toolFunc("long", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			for i := range 10 {
				out.Write(strings.Repeat("x", i) + "\n")
			}
			out.Diag("info", "scanned 10 lines", "scan")
			return nil
		})
		long.Output = agent.OutputLimits{MaxLines: 3}
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{long}})
		a.faux.SetResponses(calls("long"), answer("ok"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		res := a.toolResults(ctx, c.ID)["call-long-0"]
		want := "\nx\nxx\n<harness>\n[warn] output truncated: 3 of 10 lines (6 of 55 bytes) shown, head kept\n[info] scanned 10 lines\n</harness>"
		if got := resultText(res); got != want {
			t.Fatalf("rendered result = %q; want %q", got, want)
		}
		var data agent.ToolResultData
		must(0, json.Unmarshal(res.Data, &data))
		if !data.Truncation.Truncated || data.Truncation.TotalLines != 10 || data.Truncation.ShownLines != 3 || len(data.Diags) != 2 {
			t.Fatalf("result data = %+v", data)
		}
		must(0, a.h.Close(ctx))
	})
}

// Regression (issue 23, bug 3): a line limit keeps that many lines in
// both modes; tail mode counted newlines and kept one line too many when
// the output does not end with one.
func TestALineLimitKeepsThatManyLinesInEitherRetainMode(t *testing.T) {
	for retain, want := range map[string]string{"head": "l1\nl2\nl3\n", "tail": "l3\nl4\nl5\n"} {
		t.Run(retain, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				five := toolFunc("five", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
					out.Write("l1\nl2\nl3\nl4\nl5") // no final newline
					return nil
				})
				five.Output = agent.OutputLimits{MaxLines: 3, Retain: retain}
				a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{five}})
				a.faux.SetResponses(calls("five"), answer("ok"))
				c := a.h.Root()
				must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
				text := resultText(a.toolResults(ctx, c.ID)["call-five-0"])
				if got, _, _ := strings.Cut(text, "<harness>"); got != want {
					t.Fatalf("kept %q; want %q (three lines)", got, want)
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

func TestToolsThatCannotRunGetTheirOwnErrorResultWithoutInvocation(t *testing.T) {
	cases := []struct {
		name string
		call ai.Block
		hook core.HookHandler
		want string
	}{
		{name: "unknown tool", call: faux.ToolCall("c1", "nope", "{}"), want: `tool "nope" is not available`},
		{name: "missing argument", call: faux.ToolCall("c1", "a", "{}"), want: "invalid arguments for a: at /: missing property 'v'"},
		{name: "wrong type", call: faux.ToolCall("c1", "a", `{"v":3}`), want: "invalid arguments for a: at /v: got number, want string"},
		{name: "blocked", call: faux.ToolCall("c1", "a", `{"v":"x"}`), want: "blocked: plan mode",
			hook: core.Hook(func(ctx context.Context, in agent.BeforeToolInput) (agent.BeforeToolOutput, error) {
				return agent.BeforeToolOutput{Block: &agent.ToolBlock{Reason: "plan mode"}}, nil
			})},
		{name: "hook throws: fails closed", call: faux.ToolCall("c1", "a", `{"v":"x"}`), want: "blocked: before_tool failed: denied by policy service",
			hook: core.Hook(func(ctx context.Context, in agent.BeforeToolInput) (agent.BeforeToolOutput, error) {
				return agent.BeforeToolOutput{}, errors.New("denied by policy service")
			})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				invoked := 0
				tool := toolFunc("a", func(context.Context, json.RawMessage, *agent.ToolOutput, *agent.ToolRuntime) error {
					invoked++
					return nil
				})
				tool.Definition.Parameters = argsSchema // v: a required string
				a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{tool}})
				if tc.hook != nil {
					a.h.Hooks().On(agent.ToolKind, agent.HookBeforeTool, tc.hook, core.HookOptions{})
				}
				a.faux.SetResponses(faux.Reply(tc.call).WithStop(ai.StopToolUse), answer("noted"))
				c := a.h.Root()
				if got := must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{})); got == nil {
					t.Fatal("the turn did not finish with an answer")
				}
				res := a.toolResults(ctx, c.ID)["c1"]
				if res == nil || !isError(res) || resultText(res) != tc.want {
					t.Fatalf("result = %q (error %v); want error %q", resultText(res), res != nil && isError(res), tc.want)
				}
				if invoked != 0 {
					t.Fatalf("the tool ran %d times; want 0", invoked)
				}
				must(0, a.h.Close(ctx))
			})
		})
	}
}

func TestBeforeToolRewritesArgumentsAndAfterToolFailureIsReported(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.h.Hooks().On(agent.ToolKind, agent.HookBeforeTool, core.Hook(func(ctx context.Context, in agent.BeforeToolInput) (agent.BeforeToolOutput, error) {
			return agent.BeforeToolOutput{Args: json.RawMessage(`{"v":"rewritten"}`)}, nil
		}), core.HookOptions{})
		a.h.Hooks().On(agent.ToolKind, agent.HookAfterTool, core.Hook(func(ctx context.Context, in agent.AfterToolInput) (any, error) {
			return nil, errors.New("metrics down")
		}), core.HookOptions{})
		a.faux.SetResponses(calls("a"), answer("ok"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		if got := resultText(a.toolResults(ctx, c.ID)["call-a-0"]); got != "a(rewritten)" {
			t.Fatalf("result = %q; want the rewritten arguments' output", got)
		}
		var he *core.HookError
		if len(a.reports) != 1 || !errors.As(a.reports[0], &he) || he.Point != agent.HookAfterTool {
			t.Fatalf("reports = %v; want one after_tool HookError", a.reports)
		}
		must(0, a.h.Close(ctx))
	})
}

func TestNewContextResetsAfterTheExchangeNeverInsideIt(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{echoTool("a"), agent.NewContextTool()}})
		a.faux.SetResponses(
			faux.Reply(faux.ToolCall("c1", "new_context", `{"message":"Summary: parser inspected."}`), faux.ToolCall("c2", "a", `{"v":"x"}`)).WithStop(ai.StopToolUse),
			answer("fresh start"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		tr := a.transcript(ctx, c.ID)
		// user, system, assistant(calls), two results, handoff, new baseline, answer
		if len(tr) != 8 || !strings.HasPrefix(tr[5], "handoff:") || tr[6] != "system:system" {
			t.Fatalf("transcript = %v", tr)
		}
		for _, e := range tr[3:5] {
			if !strings.HasPrefix(e, "tool_result:") {
				t.Fatalf("the handoff landed inside the exchange: %v", tr)
			}
		}
		reqs := a.faux.Requests()
		last := reqs[len(reqs)-1].Messages
		if len(last) != 2 || last[0].Role != ai.RoleSystem || last[1].Content.TextOf() != "Summary: parser inspected." {
			t.Fatalf("the request after the reset = %+v; want the new baseline and the handoff message only", last)
		}
		must(0, a.h.Close(ctx))
	})
}

func TestAddToolsWritesTheLoadoutBeforeAnyEntryOfTheSettlementCommit(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		discover := toolFunc("discover", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
			out.AddTools([]string{"calc"})
			out.Handoff("Continue with calc.")
			return nil
		})
		calc := echoTool("calc")
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{discover, calc}})
		c := a.h.Root()
		must(0, must(c.Settings()).Set(ctx, map[string]any{"selectedTools": []string{"discover"}}))
		a.faux.SetResponses(calls("discover"), answer("done"))
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		v, ok, err := a.h.Store().GetValue(ctx, agent.SelectedToolsValue.In(c.ID).Address, 0)
		if err != nil || !ok || string(v.Value) != `["discover","calc"]` {
			t.Fatalf("selected tools = %s (%v, %v)", v.Value, ok, err)
		}
		handoff := a.entriesOf(ctx, c.ID, "handoff")
		if len(handoff) != 1 || v.Seq >= handoff[0] {
			t.Fatalf("selected tools written at %d, handoff %v: the loadout must precede every entry of the commit", v.Seq, handoff)
		}
		reqs := a.faux.Requests()
		if names := toolNamesOf(reqs[len(reqs)-1].Tools); !cmp.Equal(names, []string{"discover", "calc"}) {
			t.Fatalf("the next turn offers %v; want discover and calc", names)
		}
		must(0, a.h.Close(ctx))
	})
}

func toolNamesOf(ts []ai.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestAbortedGenerationCreatesNoToolsWhileAnAbortedToolWritesItsOwnResult(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		started := rt.NewEvent("tool started")
		hang := toolFunc("hang", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, trt *agent.ToolRuntime) error {
			out.Write("working")
			started.Set()
			return trt.Sleep(ctx, trt.Now().Add(time.Hour))
		})
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{hang}})
		a.faux.SetResponses(calls("hang"))
		c := a.h.Root()
		input := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		done := rt.NewEvent("drive")
		rt.Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		must(0, started.Wait(ctx))
		must(0, c.Abort(ctx))
		must(0, done.Wait(ctx))
		res := a.toolResults(ctx, c.ID)["call-hang-0"]
		if res == nil || !isError(res) || resultText(res) != "working\naborted" {
			t.Fatalf("tool result = %+v; want the tool's own aborted error result", res)
		}
		if r := a.result(ctx, c, input); r.Status != agent.InputCancelled {
			t.Fatalf("input = %+v; want cancelled", r)
		}
		for _, kind := range []string{agent.ToolKindName, agent.PostToolsKindName} {
			for _, task := range a.tasksOf(ctx, kind) {
				if task.Status != "aborted" {
					t.Fatalf("%s %d is %s; want aborted", kind, task.ID, task.Status)
				}
			}
		}
		if n := len(a.tasksOf(ctx, agent.GenerationKindName)); n != 1 {
			t.Fatalf("%d generations; an abort creates no successor", n)
		}
		must(0, a.h.Close(ctx))
	})
}

func TestAbortedStreamingGenerationCreatesNoToolTasks(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		rt := s.Runtime()
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(calls("a", "b").WithDelay(time.Second))
		c := a.h.Root()
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		done := rt.NewEvent("drive")
		rt.Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)); done.Set() })
		must(0, rt.Sleep(ctx, 500*time.Millisecond))
		must(0, c.Abort(ctx))
		must(0, done.Wait(ctx))
		if n := len(a.tasksOf(ctx, agent.ToolKindName)); n != 0 {
			t.Fatalf("%d tool tasks; an aborted generation creates none", n)
		}
		if n := len(a.toolResults(ctx, c.ID)); n != 0 {
			t.Fatalf("%d tool results; want none", n)
		}
		must(0, a.h.Close(ctx))
	})
}

func TestRecoverReplaysSafeToolsAndReportsInterruptedOnes(t *testing.T) {
	for _, replay := range []agent.ReplayPolicy{agent.ReplaySafe, agent.ReplayNever} {
		t.Run(string(replay), func(t *testing.T) {
			simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
				store := simtest.Reopenable{Store: memory.New()}
				runs := 0
				tool := toolFunc("work", func(ctx context.Context, _ json.RawMessage, out *agent.ToolOutput, rt *agent.ToolRuntime) error {
					runs++
					out.Write("step one\n")
					if runs == 1 {
						return rt.Sleep(ctx, rt.Now().Add(time.Hour)) // the process dies here
					}
					out.Write("finished")
					return nil
				})
				tool.Replay = replay
				a := openAgent(t, ctx, s, agentOptions{store: store, tools: []agent.Tool{tool}})
				a.faux.SetResponses(calls("work"))
				c := a.h.Root()
				must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
				rt := s.Runtime()
				rt.Go(ctx, "driver", func(ctx context.Context) { _, _ = c.Drive(ctx) })
				for len(a.tasksOf(ctx, agent.ToolKindName)) == 0 || a.tasksOf(ctx, agent.ToolKindName)[0].Status != "running" {
					must(0, rt.Sleep(ctx, time.Millisecond))
				}
				must(0, rt.Sleep(ctx, time.Millisecond))
				must(0, a.h.Close(ctx)) // a crash as far as durable state goes: nothing settles

				b := openAgent(t, ctx, s, agentOptions{store: store, tools: []agent.Tool{tool}})
				b.faux.SetResponses(answer("ok"))
				must(b.h.Root().Drive(ctx))
				res := b.toolResults(ctx, c.ID)["call-work-0"]
				switch replay {
				case agent.ReplaySafe:
					if runs != 2 || isError(res) || resultText(res) != "step one\nfinished" {
						t.Fatalf("runs %d, result %q; want a clean second run", runs, resultText(res))
					}
				case agent.ReplayNever:
					if runs != 1 || !isError(res) || !strings.HasPrefix(resultText(res), "step one\ninterrupted") {
						t.Fatalf("runs %d, result %q; want the durable output and an interrupted error", runs, resultText(res))
					}
				}
				must(0, b.h.Close(ctx))
			})
		})
	}
}

func TestBuiltinFileToolsActOnTheExecutionEnvironment(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		env := proc.New(s.Runtime(), proc.Scripts{})
		must(0, env.WriteFile(ctx, "/src/main.go", []byte("package main\nfunc main() {}\n")))
		a := openAgent(t, ctx, s, agentOptions{env: env, tools: []agent.Tool{agent.ReadTool(), agent.WriteTool(), agent.EditTool()}})
		a.faux.SetResponses(
			faux.Reply(
				faux.ToolCall("r", "read", `{"path":"/src/main.go","offset":2}`),
				faux.ToolCall("w", "write", `{"path":"/src/new.txt","content":"hello"}`),
				faux.ToolCall("e", "edit", `{"path":"/src/main.go","oldText":"func main() {}","newText":"func main() { run() }"}`),
				faux.ToolCall("bad", "edit", `{"path":"/src/main.go","oldText":"absent","newText":"x"}`),
			).WithStop(ai.StopToolUse),
			answer("done"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		res := a.toolResults(ctx, c.ID)
		if got := resultText(res["r"]); got != "func main() {}\n" && got != "func main() { run() }\n" {
			t.Fatalf("read = %q", got)
		}
		files := env.Files()
		if files["/src/new.txt"] != "hello" {
			t.Fatalf("files = %v", files)
		}
		if !isError(res["bad"]) || !strings.Contains(resultText(res["bad"]), "oldText was not found") {
			t.Fatalf("failed edit = %q", resultText(res["bad"]))
		}
		// The read ran concurrently with the edit, so only the final file is
		// checked: the edit landed exactly once.
		if files["/src/main.go"] != "package main\nfunc main() { run() }\n" {
			t.Fatalf("main.go = %q", files["/src/main.go"])
		}
		must(0, a.h.Close(ctx))
	})
}

func TestAnEmptyToolSelectionOffersNoToolsWhileNoSelectionOffersAll(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		a.faux.SetResponses(answer("one"), answer("two"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("all"), agent.AcceptOptions{}))
		must(0, must(c.Settings()).Set(ctx, map[string]any{"selectedTools": []string{}}))
		must(c.Prompt(ctx, userText("none"), agent.AcceptOptions{}))
		reqs := a.faux.Requests()
		if got := toolNamesOf(reqs[0].Tools); !cmp.Equal(got, []string{"a", "b", agent.SubagentToolName}) {
			t.Fatalf("unset selection offers %v; want every registered tool, the built-in subagent last", got)
		}
		if got := toolNamesOf(reqs[1].Tools); len(got) != 0 {
			t.Fatalf("empty selection offers %v; want none", got)
		}
		must(0, a.h.Close(ctx))
	})
}

// Tool arguments are held to the tool's whole JSON Schema (issue 23): the
// keywords the old hand-written subset ignored now stop an invalid call
// before the tool runs, and the error the model reads names the failing
// location.
func TestToolArgumentsAreCheckedAgainstTheWholeSchema(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["path"],"additionalProperties":false,
		"$defs":{"count":{"type":"integer","minimum":1,"maximum":10}},
		"properties":{"path":{"type":"string","minLength":3,"pattern":"^/"},"n":{"$ref":"#/$defs/count"},
		"mode":{"oneOf":[{"const":"fast"},{"type":"integer"}]}}}`)
	cases := []struct{ args, want string }{
		{`{"path":"/ok","n":3,"mode":"fast"}`, ""},
		{`{"path":"/a"}`, "at /path: minLength"},
		{`{"path":"relative"}`, "at /path: 'relative' does not match pattern"},
		{`{"path":"/ok","n":0}`, "at /n: minimum"},
		{`{"path":"/ok","n":11}`, "at /n: maximum"},
		{`{"path":"/ok","mode":"slow"}`, "at /mode: 'oneOf' failed"},
	}
	for _, tc := range cases {
		simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
			ran := false
			strict := toolFunc("strict", func(context.Context, json.RawMessage, *agent.ToolOutput, *agent.ToolRuntime) error {
				ran = true
				return nil
			})
			strict.Definition.Parameters = schema
			a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{strict}})
			a.faux.SetResponses(faux.Reply(faux.ToolCall("c1", "strict", tc.args)).WithStop(ai.StopToolUse), answer("ok"))
			c := a.h.Root()
			must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
			got := resultText(a.toolResults(ctx, c.ID)["c1"])
			switch {
			case tc.want == "" && (!ran || strings.Contains(got, "invalid arguments")):
				t.Fatalf("%s: ran %v, result %q; want the tool to run", tc.args, ran, got)
			case tc.want != "" && (ran || !strings.Contains(got, "invalid arguments for strict: ") || !strings.Contains(got, tc.want)):
				t.Fatalf("%s: ran %v, result %q; want no run and an error naming %q", tc.args, ran, got, tc.want)
			}
			must(0, a.h.Close(ctx))
		})
	}
}

// The error a refused call reads names each failing location once, in
// order, and nothing for the array or object that failed only because a
// member of it did: "validation failed" at /items would tell the model
// nothing the item's own failure does not.
func TestAnInvalidArgumentsErrorNamesEachFailureOnceInOrder(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		strict := toolFunc("strict", func(context.Context, json.RawMessage, *agent.ToolOutput, *agent.ToolRuntime) error { return nil })
		strict.Definition.Parameters = json.RawMessage(`{"type":"object","additionalProperties":false,
			"properties":{"items":{"type":"array","items":{"type":"integer"},"maxItems":2},"a/b~c":{"type":"integer"}}}`)
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{strict}})
		a.faux.SetResponses(faux.Reply(faux.ToolCall("c1", "strict", `{"items":[1,"x",3],"a/b~c":"s","z":1}`)).WithStop(ai.StopToolUse), answer("ok"))
		c := a.h.Root()
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		want := "invalid arguments for strict: at /: additional properties 'z' not allowed; at /a~1b~0c: got string, want integer; " +
			"at /items/1: got string, want integer; at /items: maxItems: got 3, want 2"
		if got := resultText(a.toolResults(ctx, c.ID)["c1"]); got != want {
			t.Fatalf("result = %q\nwant     %q", got, want)
		}
		must(0, a.h.Close(ctx))
	})
}

// A tool's parameters are offered compacted: the bytes a live session's
// request carries are those a context read back from storage carries, so
// a reopened session asks its model exactly what the old one did.
func TestAToolsParametersAreOfferedCompacted(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		spaced := echoTool("spaced")
		spaced.Definition.Parameters = json.RawMessage("{ \"type\": \"object\",\n  \"properties\": { \"v\": { \"type\": \"string\" } } }")
		a := openAgent(t, ctx, s, agentOptions{tools: []agent.Tool{spaced}})
		a.faux.SetResponses(answer("ok"))
		must(a.h.Root().Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		const want = `{"type":"object","properties":{"v":{"type":"string"}}}`
		for _, tool := range a.faux.Requests()[0].Tools {
			if tool.Name == "spaced" && string(tool.Parameters) != want {
				t.Fatalf("offered parameters %s; want %s", tool.Parameters, want)
			}
		}
		if got := a.h.Tools([]string{"spaced"}); len(got) != 1 || string(got[0].Parameters) != want {
			t.Fatalf("Tools = %v; want the compacted parameters %s", got, want)
		}
		must(0, a.h.Close(ctx))
	})
}

// A tool whose parameters do not compile is refused when the harness
// opens, naming the tool; a schema may not load anything from outside
// itself.
func TestAToolWhoseSchemaDoesNotCompileIsRefusedAtOpen(t *testing.T) {
	for name, params := range map[string]string{
		"an unknown type":   `{"type":"nope"}`,
		"not JSON":          `{"type":`,
		"a file reference":  `{"$ref":"file:///etc/passwd"}`,
		"a remote document": `{"$ref":"https://example.com/schema.json"}`,
	} {
		simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
			bad := toolFunc("bad", nil)
			bad.Definition.Parameters = json.RawMessage(params)
			_, err := agent.Open(ctx, memory.New(), agent.Options{Runtime: s.Runtime(), Tools: []agent.Tool{bad}})
			if err == nil || !strings.Contains(err.Error(), `tool "bad"`) {
				t.Fatalf("%s: open = %v; want a refusal naming tool \"bad\"", name, err)
			}
		})
	}
}
