package races

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// childFinishesWhileItsToolIsMarked: a subagent run call T drives its
// child, whose generation G is about to give its final answer, while the
// host marks T (§8.5, §10.2). Forward: G's answer lands, T's wait ends and
// T is about to settle when the mark lands, so T's settlement is refused.
// Reverse: the mark lands first and G still finishes, since AbortTask
// marks only the owner; T's wait ends with the mark. Either way T settles
// aborted, not done, with an error result, and the finished child is left
// as it is: in reverse, T's abort starts only once G settled.
func childFinishesWhileItsToolIsMarked(o order) cell {
	const (
		tool storage.ID = 16
		gen  storage.ID = 26
	)
	texec, tabort, gexec := actor(tool, core.MethodExecute), actor(tool, core.MethodAbort), actor(gen, core.MethodExecute)
	// G yields twice before its final commit and T twice before its
	// settlement, so that each is held right before the commit.
	points := map[order][]string{
		forward: {label(gexec, "finishing"), label(gexec, "finish"), label(texec, "settling"), "host:mark", "host:marked", label(texec, "settle")},
		reverse: {label(gexec, "finishing"), "host:mark", "host:marked", label(gexec, "finish"), "host:child-done", label(tabort, "start")},
	}[o]
	return cell{points: points, program: func(s *sim.Sim) (func(ctx context.Context), func() error) {
		var (
			toolStatus, genStatus, result string
			genMarked                     bool
		)
		main := func(ctx context.Context) {
			a := openAgent(ctx, s, agentOptions{wholeBlocks: true})
			c := a.h.Root()
			finishing := s.Runtime().NewEvent("child-finishing")
			onGeneration(a.h, agent.HookOnYield, func(ctx context.Context, in agent.OnYieldInput) {
				if in.ConversationID != rootID {
					finishing.Set()
					sim.Yield(ctx, "finishing")
					sim.Yield(ctx, "finish")
				}
			})
			a.h.Hooks().On(agent.ToolKind, agent.HookAfterTool, core.Hook(func(ctx context.Context, _ agent.AfterToolInput) (any, error) {
				sim.Yield(ctx, "settling")
				sim.Yield(ctx, "settle")
				return nil, nil
			}), core.HookOptions{})
			args, _ := json.Marshal(map[string]any{"command": "run", "prompt": "audit"})
			a.faux.SetResponses(faux.Reply(faux.ToolCall("call-run", agent.SubagentToolName, string(args))).WithStop(ai.StopToolUse),
				say("the child's answer"), say("the parent goes on"))
			must(c.Accept(ctx, ai.PlainText("go"), agent.AcceptOptions{}))
			g := newGroup(s.Runtime())
			g.Go(ctx, "driver", func(ctx context.Context) { must(c.Drive(ctx)) })
			g.Go(ctx, "host", func(ctx context.Context) {
				check(finishing.Wait(ctx))
				sim.Yield(ctx, "mark")
				check(a.h.AbortTask(ctx, tool))
				sim.Yield(ctx, "marked")
				check(a.watch.settledEvent(gen).Wait(ctx))
				sim.Yield(ctx, "child-done")
			})
			g.Wait(ctx)
			check(a.watch.settledEvent(tool).Wait(ctx))
			ts := must(a.h.GetTasks(ctx, []storage.ID{tool, gen}))
			expectID("the run call", ts[tool].ID, tool)
			if ts[tool].Kind != agent.ToolKindName || ts[gen].Kind != agent.GenerationKindName {
				panic(fmt.Sprintf("tasks %d and %d are %s and %s; the cell's order names the run call and the child's generation", tool, gen, ts[tool].Kind, ts[gen].Kind))
			}
			toolStatus, genStatus, genMarked = ts[tool].Status, ts[gen].Status, ts[gen].Abort
			st := decoded[agent.ToolState](ts[tool])
			if e := must(a.h.GetEntries(ctx, []storage.ID{st.Result}))[st.Result]; e != nil {
				result = e.Model[0].Content.TextOf()
			}
			check(a.h.Close(ctx))
		}
		verify := func() error {
			switch {
			case toolStatus != "aborted" || !strings.HasSuffix(result, "aborted"):
				return fmt.Errorf("the run call settled %s with result %q; want aborted, with its aborted error", toolStatus, result)
			case genStatus != "done" || genMarked:
				return fmt.Errorf("the child's generation is %s (marked %v); want done and unmarked: it finished, and cleanup marks only what is live", genStatus, genMarked)
			}
			return nil
		}
		return main, verify
	}}
}
