package agent_test

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

// router answers each conversation from its own script, whatever order
// the conversations ask in: parents and children share one provider. A
// child, whose id is not known before it exists, is scripted by its prompt
// (the first user message of its requests).
type router struct {
	t        testing.TB
	scripts  map[storage.ID][]faux.Step
	byPrompt map[string][]faux.Step
	asked    map[storage.ID]int
}

func (a *loop) route() *router {
	r := &router{t: a.t, scripts: map[storage.ID][]faux.Step{}, byPrompt: map[string][]faux.Step{}, asked: map[storage.ID]int{}}
	steps := make([]faux.Step, 200)
	for i := range steps {
		steps[i] = faux.Respond(r.answer)
	}
	a.faux.SetResponses(steps...)
	return r
}

func (r *router) answer(req ai.Request) (faux.Step, error) {
	conv, err := strconv.ParseInt(strings.TrimPrefix(req.SessionID, "conversation-"), 10, 64)
	if err != nil {
		return faux.Step{}, fmt.Errorf("request without a conversation: %q", req.SessionID)
	}
	id := storage.ID(conv)
	if len(r.scripts[id]) == 0 {
		for _, m := range req.Messages {
			if m.Role == ai.RoleUser {
				r.scripts[id], r.byPrompt[m.Content.TextOf()] = r.byPrompt[m.Content.TextOf()], nil
				break
			}
		}
	}
	if len(r.scripts[id]) == 0 {
		return faux.Step{}, fmt.Errorf("conversation %d asked with nothing scripted", id)
	}
	step := r.scripts[id][0]
	r.scripts[id] = r.scripts[id][1:]
	r.asked[id]++
	return step, nil
}

// script queues answers for conversation conv.
func (r *router) script(conv storage.ID, steps ...faux.Step) {
	r.scripts[conv] = append(r.scripts[conv], steps...)
}

// child queues answers for the child whose prompt is prompt.
func (r *router) child(prompt string, steps ...faux.Step) {
	r.byPrompt[prompt] = append(r.byPrompt[prompt], steps...)
}

// subagentCall is a model's call of the subagent tool.
func subagentCall(id string, args map[string]any) ai.Block {
	raw, _ := json.Marshal(args)
	return faux.ToolCall(id, agent.SubagentToolName, string(raw))
}

func calling(blocks ...ai.Block) faux.Step { return faux.Reply(blocks...).WithStop(ai.StopToolUse) }

// children lists the conversations owned from conv's tasks, ascending.
func (a *loop) children(ctx context.Context, conv storage.ID) []storage.Conversation {
	a.t.Helper()
	var out []storage.Conversation
	for _, c := range must(storage.AllPages(func(cur storage.Cursor) (storage.Page[storage.Conversation], error) {
		return a.h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: cur})
	})) {
		if c.Owner == 0 {
			continue
		}
		owner := must(a.h.GetTasks(ctx, []storage.ID{c.Owner}))[c.Owner]
		if owner != nil && owner.ConversationID == conv {
			out = append(out, c)
		}
	}
	return out
}

// toolResult is the text and details of the tool result answering call.
func (a *loop) toolResult(ctx context.Context, conv storage.ID, call string) (string, map[string]any) {
	a.t.Helper()
	e := a.toolResults(ctx, conv)[call]
	if e == nil {
		a.t.Fatalf("no result for call %s in conversation %d", call, conv)
	}
	var d struct {
		Details map[string]any `json:"details"`
	}
	must(0, json.Unmarshal(e.Data, &d))
	return resultText(e), d.Details
}

// The subagent tool's run creates a child the call owns, drives it and
// answers with the child's answer; the child writes its own baseline and
// starts with the parent's settings.
func TestRunDrivesAnOwnedChildAndAnswersWithItsAnswer(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		must(0, must(c.Settings()).Set(ctx, map[string]any{"thinking": "high", "selectedTools": []string{"a", agent.SubagentToolName}}))
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-run", map[string]any{"command": "run", "prompt": "inspect the parser"})), answer("the parser is fine"))
		r.child("inspect the parser", answer("no bugs in the parser"))
		input := must(c.Accept(ctx, userText("check the parser"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		child := a.children(ctx, c.ID)[0]
		if res := a.result(ctx, c, input); res.Status != agent.InputDone {
			t.Fatalf("the parent's input = %+v; want done", res)
		}
		text, details := a.toolResult(ctx, c.ID, "call-run")
		sub := details["subagent"].(map[string]any)
		if text != "no bugs in the parser" || storage.ID(sub["id"].(float64)) != child.ID || sub["status"] != string(agent.InputDone) {
			t.Fatalf("run's result %q, details %v; want the child's answer naming child %d, done", text, details, child.ID)
		}
		tool := must(a.h.GetTasks(ctx, []storage.ID{child.Owner}))[child.Owner]
		if tool.Kind != agent.ToolKindName || tool.Status != "done" || !slices.Contains(tool.Owns, child.ID) {
			t.Fatalf("the owner %d is %s %s owning %v; want the done tool call owning %d", tool.ID, tool.Kind, tool.Status, tool.Owns, child.ID)
		}
		want := []string{"user:inspect the parser", "system:system", "assistant:no bugs in the parser"}
		if diff := cmp.Diff(want, a.transcript(ctx, child.ID)); diff != "" {
			t.Fatalf("the child's transcript (-want +got):\n%s", diff)
		}
		if sys := a.systemData(ctx, a.entriesOf(ctx, child.ID, core.SystemKind.Kind())[0]); !sys.Baseline {
			t.Fatal("the child's first system entry is not a baseline")
		}
		got := must(must(a.h.Conversation(ctx, child.ID)).Settings()).Get
		settings := must(got(ctx))
		if string(settings["thinking"]) != `"high"` || string(settings["selectedTools"]) != `["a","subagent"]` {
			t.Fatalf("the child's settings %s; want the parent's thinking and tools", settings)
		}
		must(0, a.h.Close(ctx))
	})
}

// slowChild is a child answer that takes a virtual hour.
func slowChild(text string) faux.Step { return answer(text).WithDelay(time.Hour) }

// waitFor sleeps in virtual time until cond holds.
func waitFor(t testing.TB, ctx context.Context, s *sim.Sim, what string, cond func() bool) {
	t.Helper()
	for range 100_000 {
		if cond() {
			return
		}
		must(0, s.Runtime().Sleep(ctx, time.Millisecond))
	}
	t.Fatalf("%s never happened", what)
}

// childGeneration is a child's newest generation task.
func (a *loop) childGeneration(ctx context.Context, child storage.ID) *storage.Task {
	a.t.Helper()
	var newest *storage.Task
	for _, g := range a.tasksOf(ctx, agent.GenerationKindName) {
		if g.ConversationID == child {
			newest = g
		}
	}
	return newest
}

// A conversation abort reaches the child a running run drives (its owner is
// a live foreground task), and spares a spawned one, whose owner is done.
func TestAConversationAbortReachesARunChildAndSparesASpawnedOne(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		r.script(c.ID, calling(
			subagentCall("call-spawn", map[string]any{"command": "spawn", "prompt": "profile the build"}),
			subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit the tests"})))
		r.child("profile the build", slowChild("finished"))
		r.child("audit the tests", slowChild("finished"))
		input := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c, nil)
		waitFor(t, ctx, s, "two children", func() bool { return len(a.children(ctx, c.ID)) == 2 })
		byPrompt := map[string]storage.ID{}
		for _, k := range a.children(ctx, c.ID) {
			byPrompt[a.transcript(ctx, k.ID)[0]] = k.ID
		}
		spawned, run := byPrompt["user:profile the build"], byPrompt["user:audit the tests"]
		waitFor(t, ctx, s, "both children streaming", func() bool {
			return r.asked[spawned] == 1 && r.asked[run] == 1
		})
		must(0, c.Abort(ctx))
		must(0, driving.Wait(ctx))
		if res := a.result(ctx, c, input); res.Status != agent.InputCancelled {
			t.Fatalf("the parent's input = %+v; want cancelled", res)
		}
		// The parent's drive ends with its own foreground: the marked child's
		// abort, outside it once its run call settled, is served after.
		waitFor(t, ctx, s, "the run child's generation aborted", func() bool { return a.childGeneration(ctx, run).Status == "aborted" })
		if g := a.childGeneration(ctx, spawned); g.Live() == false || g.Abort {
			t.Fatalf("the spawned child's generation is %s (marked %v); want still running, unmarked", g.Status, g.Abort)
		}
		if _, details := a.toolResult(ctx, c.ID, "call-run"); details != nil && details["subagent"] != nil {
			t.Fatalf("the aborted run wrote details %v; want its aborted error alone", details)
		}
		must(a.h.Drive(ctx))
		if g := a.childGeneration(ctx, spawned); g.Status != "done" {
			t.Fatalf("the spawned child's generation is %s after the drive; want done", g.Status)
		}
		must(0, a.h.Close(ctx))
	})
}

// AbortTask on the run call marks it alone; its abort then marks the
// child's live foreground tasks, and leaves the child's queue as it is.
// The call's wait on the child ends with the mark, not with the child.
func TestAbortTaskMarksTheOwnerAndItsCleanupCancelsTheChild(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit"})), answer("after the abort"))
		r.child("audit", slowChild("too late"))
		input := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c, nil)
		waitFor(t, ctx, s, "a child", func() bool { return len(a.children(ctx, c.ID)) == 1 })
		kid := a.children(ctx, c.ID)[0]
		waitFor(t, ctx, s, "the child streaming", func() bool { return r.asked[kid.ID] == 1 })
		child := must(a.h.Conversation(ctx, kid.ID))
		queued := must(child.FollowUp(ctx, userText("and then this")))
		must(0, a.h.AbortTask(ctx, kid.Owner))
		if g := a.childGeneration(ctx, kid.ID); g.Abort {
			t.Fatal("AbortTask marked the child's generation itself; want only the owner marked")
		}
		must(0, driving.Wait(ctx))
		tool := must(a.h.GetTasks(ctx, []storage.ID{kid.Owner}))[kid.Owner]
		if tool.Status != "aborted" {
			t.Fatalf("the run call is %s; want aborted", tool.Status)
		}
		if g := a.childGeneration(ctx, kid.ID); g.Status != "aborted" {
			t.Fatalf("the child's generation is %s; want aborted by the call's cleanup", g.Status)
		}
		if res := a.result(ctx, child, queued); res.Status != agent.InputQueued {
			t.Fatalf("the child's queued input is %s; want still queued: cleanup marks tasks only", res.Status)
		}
		if text, _ := a.toolResult(ctx, c.ID, "call-run"); !strings.Contains(text, "aborted") {
			t.Fatalf("the run call's result %q; want its aborted error", text)
		}
		if res := a.result(ctx, c, input); res.Status != agent.InputDone {
			t.Fatalf("the parent's turn = %+v; want done, going on after the aborted call", res)
		}
		must(0, a.h.Close(ctx))
	})
}

// A run's wait for its child is a drive waiter: when the call is marked
// while its child has already finished, the cleanup finds nothing live to
// mark and the call still settles aborted.
func TestCleanupToleratesAnAlreadyFinishedChild(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit"})), answer("after"))
		// after_tool runs once the child answered, before the call settles:
		// the call is marked there, with its child idle.
		a.h.Hooks().On(agent.ToolKind, agent.HookAfterTool, core.Hook(func(ctx context.Context, in agent.AfterToolInput) (any, error) {
			inv, _ := core.InvocationOf(ctx)
			return nil, a.h.Harness.AbortTask(ctx, inv.Task)
		}), core.HookOptions{})
		r.child("audit", answer("done already"))
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		must(c.Drive(ctx))
		kid := a.children(ctx, c.ID)[0]
		tool := must(a.h.GetTasks(ctx, []storage.ID{kid.Owner}))[kid.Owner]
		if g := a.childGeneration(ctx, kid.ID); tool.Status != "aborted" || g.Status != "done" || g.Abort {
			t.Fatalf("call %s, child's generation %s (marked %v); want the call aborted and the finished child untouched", tool.Status, g.Status, g.Abort)
		}
		must(0, a.h.Close(ctx))
	})
}

// spawn, then send, status, wait and stop on the child by the id spawn
// gave back, each in a later turn of the parent.
func TestSpawnedChildTakesSendStatusWaitAndStop(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-spawn", map[string]any{"command": "spawn", "prompt": "count to three"})), answer("spawned"))
		r.child("count to three", answer("one, two, three"), slowChild("four"))
		must(c.Prompt(ctx, userText("start it"), agent.AcceptOptions{}))
		kid := a.children(ctx, c.ID)[0]
		text, details := a.toolResult(ctx, c.ID, "call-spawn")
		if sub := details["subagent"].(map[string]any); storage.ID(sub["id"].(float64)) != kid.ID || !strings.Contains(text, strconv.Itoa(int(kid.ID))) {
			t.Fatalf("spawn's result %q %v; want child %d named", text, details, kid.ID)
		}
		must(a.h.Drive(ctx))
		turn := func(call string, args map[string]any) (string, map[string]any) {
			args["id"] = kid.ID
			r.script(c.ID, calling(subagentCall(call, args)), answer("ok"))
			must(c.Prompt(ctx, userText(call), agent.AcceptOptions{}))
			return a.toolResult(ctx, c.ID, call)
		}
		if text, _ := turn("call-wait", map[string]any{"command": "wait"}); text != "one, two, three" {
			t.Fatalf("wait = %q; want the child's answer", text)
		}
		if text, details := turn("call-send", map[string]any{"command": "send", "text": "and four"}); !strings.Contains(text, "running") || details["subagent"].(map[string]any)["status"] != "running" {
			t.Fatalf("send = %q %v; want the input running in the idle child", text, details)
		}
		waitFor(t, ctx, s, "the child streaming again", func() bool { return r.asked[kid.ID] == 2 })
		if text, _ := turn("call-status", map[string]any{"command": "status"}); !strings.Contains(text, "is working") || !strings.Contains(text, "live: generation") || !strings.Contains(text, "and four") {
			t.Fatalf("status = %q; want working, its live generation and its newest input", text)
		}
		if text, _ := turn("call-stop", map[string]any{"command": "stop"}); !strings.Contains(text, "Stopped") {
			t.Fatalf("stop = %q", text)
		}
		must(a.h.Drive(ctx))
		if g := a.childGeneration(ctx, kid.ID); g.Status != "aborted" {
			t.Fatalf("the child's generation is %s after stop; want aborted", g.Status)
		}
		must(0, a.h.Close(ctx))
	})
}

// What the model gets wrong is an error result naming it: an id that is
// no child of this conversation, arguments a command does not take, a
// tool the child could not have.
func TestSubagentMistakesAreErrorResults(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		for _, tc := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"command": "wait", "id": 1}, "1 is not a subagent of this conversation"},
			{map[string]any{"command": "status", "id": 999}, "999 is not a subagent of this conversation"},
			{map[string]any{"command": "run"}, "invalid arguments for subagent"},
			{map[string]any{"command": "send", "id": 5}, "invalid arguments for subagent"},
			{map[string]any{"command": "spawn", "prompt": "x", "tools": []string{"rm"}}, `tool "rm" is not available`},
			{map[string]any{"command": "fly"}, "invalid arguments for subagent"},
		} {
			call := fmt.Sprintf("call-%v", tc.args["command"])
			r.script(c.ID, calling(subagentCall(call, tc.args)), answer("ok"))
			must(c.Prompt(ctx, userText("try"), agent.AcceptOptions{}))
			text, _ := a.toolResult(ctx, c.ID, call)
			if !strings.Contains(text, tc.want) {
				t.Errorf("%v: result %q; want %q", tc.args, text, tc.want)
			}
		}
		if n := len(a.children(ctx, c.ID)); n != 0 {
			t.Fatalf("%d children after mistakes; want none", n)
		}
		must(0, a.h.Close(ctx))
	})
}

// A child is reachable only from the conversation whose task owns it: a
// fork of its parent passing the child's id back gets an error result,
// and the child is left alone.
func TestAnotherConversationCannotReachAChild(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-spawn", map[string]any{"command": "spawn", "prompt": "count to three"})), answer("spawned"))
		r.child("count to three", answer("one, two, three"))
		first := must(c.Prompt(ctx, userText("start it"), agent.AcceptOptions{}))
		kid := a.children(ctx, c.ID)[0]
		must(a.h.Drive(ctx))
		fork := must(c.Fork(ctx, first.ID, core.ForkOptions{}))
		for _, command := range []string{"wait", "status", "stop", "send"} {
			call := "call-" + command
			r.script(fork.ID, calling(subagentCall(call, map[string]any{"command": command, "id": kid.ID, "text": "more"})), answer("ok"))
			must(fork.Prompt(ctx, userText(command), agent.AcceptOptions{}))
			if text, _ := a.toolResult(ctx, fork.ID, call); !strings.Contains(text, fmt.Sprintf("%d is not a subagent of this conversation", kid.ID)) {
				t.Fatalf("%s from a fork = %q; want the child refused", command, text)
			}
		}
		if r.asked[kid.ID] != 1 {
			t.Fatalf("the child was asked %d times; want once, by its own parent", r.asked[kid.ID])
		}
		must(0, a.h.Close(ctx))
	})
}

// Children nest: a conversation abort at the top marks every run level
// in one commit, and a child spawned on the way is spared.
func TestAnAbortAtTheTopReachesEveryRunLevel(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		run := func(prompt string) faux.Step {
			return calling(subagentCall("call-"+prompt, map[string]any{"command": "run", "prompt": prompt}))
		}
		r.script(c.ID, run("level1"))
		r.child("level1", calling(
			subagentCall("call-level2", map[string]any{"command": "run", "prompt": "level2"}),
			subagentCall("call-aside", map[string]any{"command": "spawn", "prompt": "aside"})))
		r.child("level2", run("level3"))
		r.child("level3", slowChild("deep"))
		r.child("aside", slowChild("aside done"))
		must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c, nil)
		levels := []storage.ID{c.ID}
		childNamed := func(parent storage.ID, prompt string) storage.ID {
			for _, k := range a.children(ctx, parent) {
				if tr := a.transcript(ctx, k.ID); len(tr) > 0 && tr[0] == "user:"+prompt {
					return k.ID
				}
			}
			return 0
		}
		for depth := 1; depth <= 3; depth++ {
			parent, name := levels[len(levels)-1], fmt.Sprintf("level%d", depth)
			waitFor(t, ctx, s, name, func() bool { return childNamed(parent, name) != 0 })
			levels = append(levels, childNamed(parent, name))
		}
		waitFor(t, ctx, s, "the spawned child", func() bool { return len(a.children(ctx, levels[1])) == 2 })
		var spawned storage.ID
		for _, k := range a.children(ctx, levels[1]) {
			if k.ID != levels[2] {
				spawned = k.ID
			}
		}
		waitFor(t, ctx, s, "the deepest child streaming", func() bool { return r.asked[levels[3]] == 1 && r.asked[spawned] == 1 })
		must(0, c.Abort(ctx))
		must(0, driving.Wait(ctx))
		// Every run level was marked in the abort's one commit; each level's
		// abort is served as its driver gets to it.
		waitFor(t, ctx, s, "every run level ended", func() bool {
			return !slices.ContainsFunc(levels[1:], func(conv storage.ID) bool {
				owner := must(a.h.Store().GetConversations(ctx, []storage.ID{conv}))[conv].Owner
				return a.childGeneration(ctx, conv).Live() || must(a.h.GetTasks(ctx, []storage.ID{owner}))[owner].Live()
			})
		})
		for i, conv := range levels[1:] {
			if g := a.childGeneration(ctx, conv); g.Status != "aborted" && g.Status != "done" {
				t.Fatalf("level %d's generation is %s; want it ended", i+1, g.Status)
			}
			owner := must(a.h.GetTasks(ctx, []storage.ID{must(a.h.Store().GetConversations(ctx, []storage.ID{conv}))[conv].Owner}))
			for _, tool := range owner {
				if tool.Status != "aborted" {
					t.Fatalf("level %d's run call is %s; want aborted", i+1, tool.Status)
				}
			}
		}
		if g := a.childGeneration(ctx, levels[3]); g.Status != "aborted" {
			t.Fatalf("the deepest generation is %s; want aborted", g.Status)
		}
		if g := a.childGeneration(ctx, spawned); !g.Live() || g.Abort {
			t.Fatalf("the spawned child's generation is %s (marked %v); want spared", g.Status, g.Abort)
		}
		must(0, a.h.Close(ctx))
	})
}

// A crash while the child streams: the restarted run call finds its child
// in its state and drives it again; nothing is created twice and every
// input of parent and child ends once.
func TestRunRecoversAcrossARestart(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		store := fault.Wrap(s.Runtime(), memory.New(), fault.Plan{}, nil)
		a1 := openAgent(t, ctx, s, agentOptions{store: store})
		c1 := a1.h.Root()
		r1 := a1.route()
		r1.script(c1.ID, calling(subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit"})))
		r1.child("audit", slowChild("first life"))
		input := must(c1.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		driving := simtest.DriveInActor(ctx, s, c1, nil)
		waitFor(t, ctx, s, "the child streaming", func() bool { return len(a1.children(ctx, c1.ID)) == 1 && a1.faux.Calls() == 2 })
		kid := a1.children(ctx, c1.ID)[0]
		// The process stops: close joins what runs and writes no outcome, so
		// the run call and the child's generation are found running.
		must(0, a1.h.Close(ctx))
		must(0, driving.Wait(ctx))

		a2 := openAgent(t, ctx, s, agentOptions{store: store.Reopen(fault.Plan{})})
		r2 := a2.route()
		r2.script(kid.ID, answer("second life"))
		r2.script(c1.ID, answer("the parent is done"))
		must(a2.h.Drive(ctx))
		c2 := a2.h.Root()
		if res := a2.result(ctx, c2, input); res.Status != agent.InputDone {
			t.Fatalf("the parent's input = %+v; want done", res)
		}
		if n := len(a2.children(ctx, c2.ID)); n != 1 {
			t.Fatalf("%d children after the restart; want the one the run made", n)
		}
		if inputs := a2.entriesOf(ctx, kid.ID, core.UserKind.Kind()); len(inputs) != 1 {
			t.Fatalf("the child has %d inputs; want its one prompt", len(inputs))
		}
		if text, _ := a2.toolResult(ctx, c2.ID, "call-run"); text != "second life" {
			t.Fatalf("run's result after the restart = %q; want the child's answer", text)
		}
		must(0, a2.h.Close(ctx))
	})
}

// Spawn for hosts: values inherited at their current value or set, the
// parent's context inherited up to its last complete exchange without its
// system entries, and mistakes refused with nothing written.
func TestHostSpawnInitializesTheChild(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{faux: faux.Options{Models: []ai.Model{{ID: "faux-1"}, {ID: "faux-2"}}}})
		c := a.h.Root()
		a.turns(ctx, c, "one", "two")
		must(0, must(c.Settings()).Set(ctx, map[string]any{"thinking": "low", "profile": "auditor", "model": agent.ModelRef{ModelID: "faux-2"}}))
		a.faux.AppendResponses(turnAnswer("child answer"))
		child, input := genMust2(c.Spawn(ctx, agent.SpawnOptions{
			Prompt: userText("go on alone"), Context: agent.SpawnInherit,
			Inherit: []storage.Address{agent.ThinkingValue.Address, agent.ModelValue.Address},
			Set:     []agent.SpawnValue{{Addr: agent.SelectedToolsValue.Address, Value: []string{"a"}}},
		}))
		must(a.h.Drive(ctx))
		cc := must(a.h.Conversation(ctx, child))
		if r := a.result(ctx, cc, input); r.Status != agent.InputDone {
			t.Fatalf("the child's prompt = %+v; want done", r)
		}
		settings := must(must(cc.Settings()).Get(ctx))
		if string(settings["thinking"]) != `"low"` || string(settings["selectedTools"]) != `["a"]` || settings["profile"] != nil {
			t.Fatalf("the child's settings %s; want thinking inherited, tools set, profile absent", settings)
		}
		// The child's first turn, created in the spawn's commit, asks with
		// what that commit gave it, not with the defaults of a child that
		// had no values yet.
		reqs := a.faux.Requests()
		first := reqs[len(reqs)-1]
		var offered []string
		for _, tool := range first.Tools {
			offered = append(offered, tool.Name)
		}
		if first.Model.ID != "faux-2" || first.ThinkingLevel != "low" || !slices.Equal(offered, []string{"a"}) {
			t.Fatalf("the child's first request asked %s thinking %q offering %v; want faux-2, low, [a]", first.Model.ID, first.ThinkingLevel, offered)
		}
		want := []string{"handoff:one", "user:go on alone", "system:system", "assistant:child answer"}
		if diff := cmp.Diff(want, a.transcript(ctx, child)); diff != "" {
			t.Fatalf("the child's transcript (-want +got):\n%s", diff)
		}
		head := must(a.h.GetEntries(ctx, []storage.ID{a.entriesOf(ctx, child, core.HandoffKind.Kind())[0]}))
		for _, e := range head {
			var roles []string
			for _, m := range e.Model {
				roles = append(roles, string(m.Role))
			}
			if diff := cmp.Diff([]string{"user", "assistant", "user", "assistant"}, roles); diff != "" {
				t.Fatalf("the inherited context's messages (-want +got):\n%s", diff)
			}
		}
		if conv := must(a.h.Store().GetConversations(ctx, []storage.ID{child}))[child]; conv.Owner != 0 || conv.Parent != nil {
			t.Fatalf("a host's child has owner %d, parent %v; want neither", conv.Owner, conv.Parent)
		}
		last := a.h.Store().LastSeq()
		var se *agent.SpawnError
		for _, bad := range []agent.SpawnOptions{{}, {Prompt: userText("x"), Context: "some"},
			{Prompt: userText("x"), Inherit: []storage.Address{agent.UsageTotals.Address}}} {
			if _, _, err := c.Spawn(ctx, bad); !errors.As(err, &se) || se.ConversationID != c.ID {
				t.Fatalf("spawn %+v = %v; want a *SpawnError naming conversation %d", bad, err, c.ID)
			}
		}
		if a.h.Store().LastSeq() != last {
			t.Fatal("a refused spawn wrote something")
		}
		must(0, a.h.Close(ctx))
	})
}

// An inherited context is cut only at the exchange in flight: an answer
// that failed with a call in it is no exchange (§2.2) and cuts nothing, and
// an exchange a fork cut short is repaired as a request repairs it (§3.2)
// rather than cutting what came after it.
func TestAnInheritedContextIsCutOnlyAtTheExchangeInFlight(t *testing.T) {
	roles := func(a *loop, ctx context.Context, child storage.ID) []string {
		var out []string
		for _, e := range must(a.h.GetEntries(ctx, a.entriesOf(ctx, child, core.HandoffKind.Kind()))) {
			for _, m := range e.Model {
				out = append(out, string(m.Role)+":"+m.Content.TextOf())
			}
		}
		return out
	}
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.turns(ctx, c, "one")
		a.faux.AppendResponses(faux.Reply(faux.ToolCall("lost", "a", `{"v":"a"}`)).WithStop(ai.StopError).WithError("the provider refused"))
		_, _ = c.Prompt(ctx, userText("two"), agent.AcceptOptions{})
		a.turns(ctx, c, "three")
		a.faux.AppendResponses(turnAnswer("child answer"))
		child, _ := genMust2(c.Spawn(ctx, agent.SpawnOptions{Prompt: userText("go on"), Context: agent.SpawnInherit}))
		want := []string{"user:one", "assistant:re: one", "user:two", "user:three", "assistant:re: three"}
		if diff := cmp.Diff(want, roles(a, ctx, child)); diff != "" {
			t.Fatalf("inherited past a failed answer (-want +got):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		a.faux.AppendResponses(calling(faux.ToolCall("x", "a", `{"v":"a"}`)), turnAnswer("re: one"))
		must(c.Prompt(ctx, userText("one"), agent.AcceptOptions{}))
		call := a.entriesOf(ctx, c.ID, core.AssistantKind.Kind())[0]
		fork := must(c.Fork(ctx, call, core.ForkOptions{}))
		a.turns(ctx, fork, "two")
		a.faux.AppendResponses(turnAnswer("child answer"))
		child, _ := genMust2(fork.Spawn(ctx, agent.SpawnOptions{Prompt: userText("go on"), Context: agent.SpawnInherit}))
		want := []string{"user:one", "assistant:", "toolResult:No result provided", "user:two", "assistant:re: two"}
		if diff := cmp.Diff(want, roles(a, ctx, child)); diff != "" {
			t.Fatalf("inherited from a fork cut mid-exchange (-want +got):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
	// A head whose messages begin with an answer (its context began with
	// one) is a projected request, complete: it is no exchange in flight.
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		call := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(faux.ToolCall("x", "a", `{"v":"a"}`)), StopReason: ai.StopToolUse}
		result := ai.Message{Role: ai.RoleToolResult, ToolCallID: "x", ToolName: "a", Content: ai.Blocks(ai.Text("a{}")), IsError: ai.Bool(false)}
		must(a.h.Commit(ctx, func(tx *core.Tx) error {
			tx.Entry(core.HandoffKind, c.ID, core.EntryDraft{Data: core.HandoffData{Text: "carried over"}, Model: []ai.Message{call, result}, Head: core.HeadSelf})
			return nil
		}))
		a.faux.AppendResponses(turnAnswer("child answer"))
		child, _ := genMust2(c.Spawn(ctx, agent.SpawnOptions{Prompt: userText("go on"), Context: agent.SpawnInherit}))
		want := []string{"assistant:", "toolResult:a{}"}
		if diff := cmp.Diff(want, roles(a, ctx, child)); diff != "" {
			t.Fatalf("inherited past a head that begins with an answer (-want +got):\n%s", diff)
		}
		must(0, a.h.Close(ctx))
	})
}

// A hook registered on a child applies to it and not to its parent; one
// registered on the parent with Subtree reaches the child (§8.7).
func TestHooksScopedToAChild(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		section := func(key string) core.HookHandler {
			return core.Hook(func(context.Context, agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
				text := key
				return agent.SystemInstructionsOutput{Sections: []core.SystemSection{{Key: key, Text: &text}}}, nil
			})
		}
		c.Hooks().On(agent.GenerationKind, agent.HookSystemInstructions, section("parent-only"), core.HookOptions{})
		c.Hooks().On(agent.GenerationKind, agent.HookSystemInstructions, section("subtree"), core.HookOptions{Subtree: true})
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-spawn", map[string]any{"command": "spawn", "prompt": "x"})), answer("ok"))
		r.child("x", answer("child done"), answer("child again"))
		must(c.Prompt(ctx, userText("go"), agent.AcceptOptions{}))
		must(a.h.Drive(ctx))
		kid := a.children(ctx, c.ID)[0].ID
		// Registered once the child exists: its next turn, which the
		// parent's send starts, tells the model.
		must(a.h.Conversation(ctx, kid)).Hooks().On(agent.GenerationKind, agent.HookSystemInstructions, section("child-only"), core.HookOptions{})
		r.script(c.ID, calling(subagentCall("call-send", map[string]any{"command": "send", "id": kid, "text": "again"})), answer("sent"))
		must(c.Prompt(ctx, userText("again"), agent.AcceptOptions{}))
		must(a.h.Drive(ctx))
		keys := func(conv storage.ID) []string {
			var out []string
			for _, id := range a.entriesOf(ctx, conv, core.SystemKind.Kind()) {
				for _, sec := range a.systemData(ctx, id).Sections {
					out = append(out, sec.Key)
				}
			}
			return out
		}
		if diff := cmp.Diff([]string{"subtree", "child-only"}, keys(kid)); diff != "" {
			t.Fatalf("the child's sections (-want +got):\n%s", diff)
		}
		if got := keys(c.ID); slices.Contains(got, "child-only") || !slices.Contains(got, "parent-only") {
			t.Fatalf("the parent's sections %v; want its own and never the child's", got)
		}
		must(0, a.h.Close(ctx))
	})
}

// Cancelling a host's drive removes that wait only: the run call and its
// child go on, and a later drive sees them finish.
func TestCancellingADriveLeavesTheRunGoing(t *testing.T) {
	simtest.Run(t, 1, func(ctx context.Context, s *sim.Sim) {
		a := openAgent(t, ctx, s, agentOptions{})
		c := a.h.Root()
		r := a.route()
		r.script(c.ID, calling(subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit"})), answer("after"))
		r.child("audit", answer("audited").WithDelay(time.Second))
		input := must(c.Accept(ctx, userText("go"), agent.AcceptOptions{}))
		waitCtx, cancel := context.WithCancel(ctx)
		var driveErr error
		returned := s.Runtime().NewEvent("drive-returned")
		s.Runtime().Go(ctx, "drive", func(context.Context) { _, driveErr = c.Drive(waitCtx); returned.Set() })
		waitFor(t, ctx, s, "the child streaming", func() bool {
			kids := a.children(ctx, c.ID)
			return len(kids) == 1 && r.asked[kids[0].ID] == 1
		})
		cancel()
		must(0, returned.Wait(ctx))
		if !errors.Is(driveErr, context.Canceled) {
			t.Fatalf("the cancelled drive returned %v; want its cancellation", driveErr)
		}
		kid := a.children(ctx, c.ID)[0]
		if g := a.childGeneration(ctx, kid.ID); g.Abort || !g.Live() {
			t.Fatalf("the child's generation is %s (marked %v) after the cancelled wait; want it going on", g.Status, g.Abort)
		}
		must(c.Drive(ctx))
		if res := a.result(ctx, c, input); res.Status != agent.InputDone {
			t.Fatalf("the parent's input = %+v; want done", res)
		}
		if text, _ := a.toolResult(ctx, c.ID, "call-run"); text != "audited" {
			t.Fatalf("run's result %q; want the child's answer", text)
		}
		must(0, a.h.Close(ctx))
	})
}

// crashAfter is a store whose process dies right after the first batch
// match picks persists: that commit and every later call answer
// fault.ErrCrashed, while the inner store keeps what persisted.
type crashAfter struct {
	storage.Storage
	match func(storage.CommitBatch) bool
	dead  bool
}

func (c *crashAfter) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	if c.dead {
		return storage.Range{}, fault.ErrCrashed
	}
	rng, err := c.Storage.Commit(ctx, b)
	if err == nil && c.match(b) {
		c.dead = true
		return storage.Range{}, fault.ErrCrashed
	}
	return rng, err
}

// A send replayed after a crash that its acceptance survived finds the
// input already given and reports it as it stands then: placed at once in
// the idle child, it is running or done, never queued.
func TestAReplayedSendReportsItsInputAsItStands(t *testing.T) {
	simtest.Sweep(t, func(t testing.TB, ctx context.Context, s *sim.Sim) {
		inner := simtest.Reopenable{Store: memory.New()} // the first harness's Close leaves it open
		store := &crashAfter{Storage: inner, match: func(storage.CommitBatch) bool { return false }}
		a1 := openAgent(t, ctx, s, agentOptions{store: store})
		c1 := a1.h.Root()
		r1 := a1.route()
		r1.script(c1.ID, calling(subagentCall("call-spawn", map[string]any{"command": "spawn", "prompt": "count"})), answer("spawned"))
		r1.child("count", answer("one"), answer("two"))
		must(c1.Prompt(ctx, userText("start it"), agent.AcceptOptions{}))
		must(a1.h.Drive(ctx))
		kid := a1.children(ctx, c1.ID)[0]
		store.match = func(b storage.CommitBatch) bool {
			return slices.ContainsFunc(b.Writes, func(w storage.Write) bool {
				return w.Type == storage.WriteListAppend && w.Addr.Namespace == agent.InboxList.Namespace && w.Addr.Scope.ID == kid.ID
			})
		}
		r1.script(c1.ID, calling(subagentCall("call-send", map[string]any{"command": "send", "id": kid.ID, "text": "and two"})))
		_, _ = c1.Accept(ctx, userText("send it"), agent.AcceptOptions{})
		_, _ = c1.Drive(ctx)
		if !store.dead {
			t.Fatalf("the send's acceptance never committed")
		}
		simtest.CloseCrashed(ctx, a1.h)

		a2 := openAgent(t, ctx, s, agentOptions{store: inner})
		r2 := a2.route()
		r2.script(c1.ID, answer("sent"))
		r2.child("count", answer("two"))
		must(a2.h.Drive(ctx))
		text, details := a2.toolResult(ctx, c1.ID, "call-send")
		sub := details["subagent"].(map[string]any)
		status, _ := sub["status"].(string)
		if status != string(agent.InputRunning) && status != string(agent.InputDone) || !strings.Contains(text, "("+status+")") {
			t.Fatalf("the replayed send = %q %v; want its input running or done, as it stands", text, details)
		}
		if n := len(a2.children(ctx, c1.ID)); n != 1 {
			t.Fatalf("%d children after the replay; want the one", n)
		}
		must(0, a2.h.Close(ctx))
	})
}
