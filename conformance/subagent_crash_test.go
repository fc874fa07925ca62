package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/sim"
	"github.com/pico-go/pico/sim/fault"
	"github.com/pico-go/pico/sim/faux"
	"github.com/pico-go/pico/storage"
)

// A subagent run cut at every commit (§8.5): the parent's answer calls
// subagent run, whose call creates the child and drives it; the child
// answers, the call writes that answer as its result, and the parent
// answers. A restart finds the run call running and drives its child
// again: every input of parent and child ends exactly once, and no child
// is made twice.
var subagentRunCrashes = crashScenario{
	test:  "TestCrashPointsOfASubagentRun",
	first: crashSubagentRun,
	transcript: []string{"user:delegate", "system:", "assistant:call subagent", "tool_result:the child's answer",
		"assistant:the parent's answer"},
	results: []agent.InputStatus{agent.InputDone},
	after:   crashOneChildPerRun,
}

// crashOneChildPerRun is the run call's promise across a restart: it
// makes its child once, and owns nothing else.
func crashOneChildPerRun(ctx context.Context, h *agent.Harness) []string {
	var problems []string
	for _, t := range crashMust(h.Store().ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, Kind: agent.ToolKindName})).Items {
		if len(t.Owns) > 1 {
			problems = append(problems, fmt.Sprintf("run call %d owns %v; want its one child", t.ID, t.Owns))
		}
	}
	return problems
}

func TestCrashPointsOfASubagentRun(t *testing.T) { exploreCrashPoints(t, subagentRunCrashes) }

func crashSubagentRun(ctx context.Context, s *sim.Sim, store *fault.Storage, r *crashRecord) {
	r.first.Storage = store
	a, err := openCrashAgent(ctx, s, &r.first, nil)
	if errors.Is(err, fault.ErrCrashed) {
		return
	}
	crashMust(0, err)
	args, _ := json.Marshal(map[string]any{"command": "run", "prompt": "inspect"})
	a.faux.SetResponses(faux.Reply(faux.ToolCall("call-run", agent.SubagentToolName, string(args))).WithStop(ai.StopToolUse),
		faux.Reply(faux.Text("the child's answer")), faux.Reply(faux.Text("the parent's answer")))
	c := a.h.Root()
	id, err := c.Accept(ctx, ai.PlainText("delegate"), agent.AcceptOptions{})
	switch {
	case err == nil:
		r.inputs = append(r.inputs, id)
		if _, err := c.Drive(ctx); err != nil && !errors.Is(err, fault.ErrCrashed) {
			r.problems = append(r.problems, fmt.Sprintf("the first process's drive failed without a crash: %v", err))
		}
	case !errors.Is(err, fault.ErrCrashed):
		r.problems = append(r.problems, fmt.Sprintf("the first process's accept failed without a crash: %v", err))
	}
	r.end(ctx, a, c)
}
