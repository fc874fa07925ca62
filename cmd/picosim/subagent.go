package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// The subagent scenarios (§8.5): a run across a restart, a spawned child
// that a parent abort spares and the stop command cancels, and runs nested
// to the depth bound. Their host actions are "stop and reopen", "abort"
// and "stop".

// subagentCall is the model calling the subagent tool.
func subagentCall(id string, args map[string]any) ai.Block {
	raw, err := json.Marshal(args)
	if err != nil {
		panic(err) // literal arguments
	}
	return faux.ToolCall(id, agent.SubagentToolName, string(raw))
}

// byPrompt answers each request by the newest user message it carries (a
// turn's input, a child's prompt), so that children streaming side by side
// get their own answers whatever the schedule; anything else gets a plain
// answer.
func byPrompt(scripts map[string][]faux.Step) []faux.Step {
	route := func(req ai.Request) (faux.Step, error) {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			m := req.Messages[i]
			if m.Role != ai.RoleUser {
				continue
			}
			if steps := scripts[m.Content.TextOf()]; len(steps) > 0 {
				scripts[m.Content.TextOf()] = steps[1:]
				return steps[0], nil
			}
			break
		}
		return reply("answered"), nil
	}
	steps := make([]faux.Step, recoveryAnswersMax*4)
	for i := range steps {
		steps[i] = faux.Respond(route)
	}
	return steps
}

// children are the conversations a task of conv owns, by their prompt.
func (e *env) children(ctx context.Context, conv storage.ID) (map[string]storage.ID, error) {
	convs, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Conversation], error) {
		return e.h.Store().ScanConversations(ctx, storage.ConversationQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	out := map[string]storage.ID{}
	for _, c := range convs {
		if c.Owner == 0 {
			continue
		}
		owner, ok, err := e.h.GetTask(ctx, c.Owner)
		if err != nil {
			return nil, err
		}
		if !ok || owner.ConversationID != conv {
			continue
		}
		page, err := e.h.Entries(ctx, c.ID, storage.Cursor{Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(page.Items) > 0 && len(page.Items[0].Model) > 0 {
			out[page.Items[0].Model[0].Content.TextOf()] = c.ID
		}
	}
	return out, nil
}

// ownerSettled reports whether the task that owns conversation conv is
// terminal (false for no conversation).
func (e *env) ownerSettled(ctx context.Context, conv storage.ID) (bool, error) {
	if conv == 0 {
		return false, nil
	}
	convs, err := e.h.Store().GetConversations(ctx, []storage.ID{conv})
	if err != nil || convs[conv].Owner == 0 {
		return false, err
	}
	owner, ok, err := e.h.GetTask(ctx, convs[conv].Owner)
	return ok && !owner.Live(), err
}

// generationOf is conv's newest generation.
func (e *env) generationOf(ctx context.Context, conv storage.ID) (*storage.Task, error) {
	page, err := e.h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax},
		ConversationIDs: []storage.ID{conv}, Kind: agent.GenerationKindName})
	if err != nil || len(page.Items) == 0 {
		return nil, err
	}
	return page.Items[len(page.Items)-1], nil
}

// subagentRunRestart: the model runs a subagent; the process stops while
// the child streams, and the reopened run call drives its child again.
// One child, answered once, and the parent's turn ends done.
func subagentRunRestart(ctx context.Context, e *env) error {
	e.faux.SetResponses(
		faux.Reply(subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit the tests"})).WithStop(ai.StopToolUse),
		reply("the tests are fine").WithDelay(time.Second),
		reply("the child says the tests are fine"))
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "delegate")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(200+e.s.Rand().IntN(600))*time.Millisecond); err != nil {
		return err
	}
	if reopened, err := e.stopAndReopen(ctx); err != nil {
		return err
	} else if reopened {
		// The child's interrupted attempt is retried, then the parent
		// answers with the run's result.
		e.faux.SetResponses(reply("the tests are fine"), reply("the child says the tests are fine"))
	}
	e.driveAsync(ctx, root).Wait(ctx)
	if err := e.expect(ctx, root, id, agent.InputDone); err != nil {
		return err
	}
	kids, err := e.children(ctx, root)
	if err != nil {
		return err
	}
	if len(kids) != 1 {
		return fmt.Errorf("%d children after the run; want one, made once", len(kids))
	}
	return e.settled(ctx, nil)
}

// spawnAbortStop: in one answer the model spawns a child and runs
// another; the host aborts the parent, which ends the run child and spares
// the spawned one; the next turn's stop command cancels the spawned child.
func spawnAbortStop(ctx context.Context, e *env) error {
	e.faux.SetResponses(byPrompt(map[string][]faux.Step{
		"go": {faux.Reply(
			subagentCall("call-spawn", map[string]any{"command": "spawn", "prompt": "profile the build"}),
			subagentCall("call-run", map[string]any{"command": "run", "prompt": "audit the tests"})).WithStop(ai.StopToolUse),
			reply("both started")},
		"profile the build": {reply("profiled").WithDelay(time.Hour)},
		"audit the tests":   {reply("audited").WithDelay(time.Hour)},
	})...)
	first, err := e.accept(ctx, root, agent.ModeFollowUp, "go")
	if err != nil {
		return err
	}
	done := e.driveAsync(ctx, root)
	if err := e.s.Runtime().Sleep(ctx, time.Duration(1+e.s.Rand().IntN(500))*time.Millisecond); err != nil {
		return err
	}
	kids, err := e.children(ctx, root)
	if err != nil {
		return err
	}
	spawned, run := kids["profile the build"], kids["audit the tests"]
	// A spawned child leaves its parent's foreground set when the spawn
	// call settles; an abort that lands before that (between the commit
	// that made the child and the call's settlement) rightly reaches it.
	spawnSettled, err := e.ownerSettled(ctx, spawned)
	if err != nil {
		return err
	}
	aborted, err := e.abort(ctx, root)
	if err != nil {
		return err
	}
	done.Wait(ctx)
	if aborted {
		if err := e.expect(ctx, root, first, agent.InputCancelled); err != nil && first != 0 {
			// The turn may have ended first: the children were still
			// starting when the abort came.
			if err := e.expect(ctx, root, first, agent.InputDone); err != nil {
				return err
			}
		}
		if spawned != 0 && spawnSettled {
			g, err := e.generationOf(ctx, spawned)
			if err != nil {
				return err
			}
			if g != nil && g.Abort {
				return fmt.Errorf("the parent's abort marked the spawned child's generation %d", g.ID)
			}
		}
	}
	if spawned != 0 && e.host("stop") {
		stop := fmt.Sprintf("stop %d", spawned)
		// The children keep their slow answers: one whose first call comes
		// only now (a held commit delayed it) still answers after the stop.
		e.faux.SetResponses(byPrompt(map[string][]faux.Step{
			stop:                {faux.Reply(subagentCall("call-stop", map[string]any{"command": "stop", "id": spawned})).WithStop(ai.StopToolUse), reply("stopped")},
			"profile the build": {reply("profiled").WithDelay(time.Hour)},
			"audit the tests":   {reply("audited").WithDelay(time.Hour)},
		})...)
		if err := e.turn(ctx, stop); err != nil {
			return err
		}
		if _, err := e.h.Drive(ctx); err != nil {
			return err
		}
		g, err := e.generationOf(ctx, spawned)
		if err != nil {
			return err
		}
		// The child answers after a virtual hour: stop came long before.
		if g != nil && g.Status != "aborted" {
			return fmt.Errorf("the spawned child's generation is %s after stop; want aborted", g.Status)
		}
	}
	// Whatever still runs (a spared child, a run past its budget) ends.
	if _, err := e.h.Drive(ctx); err != nil {
		return err
	}
	if aborted && run != 0 {
		g, err := e.generationOf(ctx, run)
		if err != nil {
			return err
		}
		if g != nil && g.Status != "aborted" {
			return fmt.Errorf("the run child's generation is %s after the parent's abort; want aborted", g.Status)
		}
	}
	return e.settled(ctx, nil)
}

// subagentNest: a chain of subagent runs, each child running the next, down
// to the depth no child passes (agent.SubagentDepthMax, §8.5): the deepest
// child's run is refused with an error result naming the bound, it makes no
// child, and every level answers in turn. The answers are routed by the
// asking conversation's prompt and whether its run has come back, so that
// an attempt a restart repeats asks again alike.
func subagentNest(ctx context.Context, e *env) error {
	level := func(k int) string { return fmt.Sprintf("level %d", k) }
	prompts := map[string]int{"nest": 0}
	for k := 1; k <= agent.SubagentDepthMax; k++ {
		prompts[level(k)] = k
	}
	route := func(req ai.Request) (faux.Step, error) {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			m := req.Messages[i]
			if m.Role == ai.RoleToolResult {
				return reply("the run came back"), nil
			}
			if k, ok := prompts[m.Content.TextOf()]; ok && m.Role == ai.RoleUser {
				return faux.Reply(subagentCall(fmt.Sprintf("call-%d", k), map[string]any{"command": "run", "prompt": level(k + 1)})).WithStop(ai.StopToolUse), nil
			}
		}
		return reply("answered"), nil
	}
	steps := make([]faux.Step, recoveryAnswersMax*(agent.SubagentDepthMax+1)*2)
	for i := range steps {
		steps[i] = faux.Respond(route)
	}
	e.faux.SetResponses(steps...)
	id, err := e.accept(ctx, root, agent.ModeFollowUp, "nest")
	if err != nil {
		return err
	}
	e.driveAsync(ctx, root).Wait(ctx)
	if err := e.expect(ctx, root, id, agent.InputDone); err != nil {
		return err
	}
	conv := root
	for k := 1; k <= agent.SubagentDepthMax; k++ {
		kids, err := e.children(ctx, conv)
		if err != nil {
			return err
		}
		if len(kids) != 1 || kids[level(k)] == 0 {
			return fmt.Errorf("conversation %d at depth %d has children %v; want one, prompted %q", conv, k-1, kids, level(k))
		}
		conv = kids[level(k)]
	}
	kids, err := e.children(ctx, conv)
	if err != nil {
		return err
	}
	if len(kids) != 0 {
		return fmt.Errorf("conversation %d at depth %d, the deepest, has children %v; want none", conv, agent.SubagentDepthMax, kids)
	}
	results, err := e.h.Store().ScanEntries(ctx, storage.EntryQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationID: conv, Kind: "tool_result"})
	if err != nil {
		return err
	}
	want := fmt.Sprintf("subagents nest at most %d deep", agent.SubagentDepthMax)
	if len(results.Items) != 1 || len(results.Items[0].Model) != 1 || results.Items[0].Model[0].IsError == nil || !*results.Items[0].Model[0].IsError ||
		!strings.Contains(results.Items[0].Model[0].Content.TextOf(), want) {
		return fmt.Errorf("the deepest conversation %d's tool results %v; want one error saying %q", conv, results.Items, want)
	}
	return e.settled(ctx, nil)
}
