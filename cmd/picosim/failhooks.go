package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/storage"
)

// Failing hooks (hook TARGET fail): a handler at every point whose failure
// the harness reports and skips (system_instructions, before_request,
// after_response, after_tool, before_collapse), and at before_tool, whose
// failure blocks the call (it fails closed), that fails, by an error for a
// hook with an odd id and by a panic for one with an even id. The hook
// rules see them contribute nothing where a failure is skipped, and block
// every call where it blocks (blockRule); the rule below holds the harness
// to reporting each failure, as a HookError of its task and point, before
// the invocation that ran it commits again, and reports-have-a-reason to
// reporting no other. A before_tool failure after another handler blocked
// the call goes unreported, so the rule takes its report but asks none.

// ruleHookFailures: a handler's failure is reported, once, before its
// invocation's next commit.
const ruleHookFailures oracleRule = "a-failed-hook-is-reported"

// hookFailure is one failure a failing hook returned: the invocation it
// ran for and its point.
type hookFailure struct {
	task     storage.ID
	method   core.Method
	point    string
	panicked bool
	optional bool // its report may not come (a before_tool failure)
}

// errHookFails is what a failing hook with an odd id returns.
var errHookFails = errors.New("the host's hook fails")

// registerFailing registers hook h's failing handlers, one per point.
func (e *env) registerFailing(hooks core.ScopedHooks, h *hostHook, opts core.HookOptions) {
	fail := func(ctx context.Context, point string) error {
		if err := e.hookWork(ctx, h); err != nil {
			return err // the invocation's cancellation, which it hands on
		}
		if inv, ok := core.InvocationOf(ctx); ok {
			e.oracle.hookFailed(hookFailure{task: inv.Task, method: inv.Method, point: point, panicked: h.id%2 == 0, optional: point == agent.HookBeforeTool})
		}
		if h.id%2 == 0 {
			panic(fmt.Sprintf("hook %d panics at %s", h.id, point))
		}
		return fmt.Errorf("hook %d at %s: %w", h.id, point, errHookFails)
	}
	offs := []func(){
		hooks.On(agent.GenerationKind, agent.HookSystemInstructions, core.Hook(func(ctx context.Context, _ agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
			return agent.SystemInstructionsOutput{}, fail(ctx, agent.HookSystemInstructions)
		}), opts),
		hooks.On(agent.GenerationKind, agent.HookBeforeRequest, core.Hook(func(ctx context.Context, _ agent.BeforeRequestInput) (agent.BeforeRequestOutput, error) {
			return agent.BeforeRequestOutput{}, fail(ctx, agent.HookBeforeRequest)
		}), opts),
		hooks.On(agent.GenerationKind, agent.HookAfterResponse, core.Hook(func(ctx context.Context, _ agent.AfterResponseInput) (any, error) {
			return nil, fail(ctx, agent.HookAfterResponse)
		}), opts),
		hooks.On(agent.ToolKind, agent.HookBeforeTool, core.Hook(func(ctx context.Context, _ agent.BeforeToolInput) (*agent.BeforeToolOutput, error) {
			return nil, fail(ctx, agent.HookBeforeTool)
		}), opts),
		hooks.On(agent.ToolKind, agent.HookAfterTool, core.Hook(func(ctx context.Context, _ agent.AfterToolInput) (any, error) {
			return nil, fail(ctx, agent.HookAfterTool)
		}), opts),
		hooks.On(agent.CollapseKind, agent.HookBeforeCollapse, core.Hook(func(ctx context.Context, _ agent.BeforeCollapseInput) (agent.BeforeCollapseOutput, error) {
			return agent.BeforeCollapseOutput{}, fail(ctx, agent.HookBeforeCollapse)
		}), opts),
	}
	h.off = func() {
		for _, off := range offs {
			off()
		}
	}
}

// hookFailed notes a failure a failing hook returned, for the harness to
// report.
func (o *oracle) hookFailed(f hookFailure) { o.hookFailures = append(o.hookFailures, f) }

// hookReported takes the failure a reported HookError answers (its task,
// its point, and its hook's error or a word of its panic), and reports
// whether there was one.
func (o *oracle) hookReported(he *core.HookError) bool {
	i := slices.IndexFunc(o.hookFailures, func(f hookFailure) bool {
		cause := errors.Is(he.Err, errHookFails)
		if f.panicked {
			cause = he.Err != nil && strings.Contains(he.Err.Error(), "panicked")
		}
		return f.task == he.Task && f.point == he.Point && cause
	})
	if i < 0 {
		return false
	}
	o.hookFailures = slices.Delete(o.hookFailures, i, i+1)
	return true
}

// failuresReported holds a commit by invocation inv to the rule: every
// failure its hooks returned was reported before it.
func (o *oracle) failuresReported(inv core.Invocation, byTask bool, by string, r storage.Range) error {
	if !byTask {
		return nil
	}
	for _, f := range o.hookFailures {
		if f.task == inv.Task && f.method == inv.Method && !f.optional {
			return o.fail(broke(ruleHookFailures, "%s committed at %d without reporting the failure of its %s hook", by, r.First, f.point))
		}
	}
	return nil
}

// failingHookSeeds is how often a drawn program registers failing hooks
// (every sixth seed from 4, not the golden traces' seed 1).
const failingHookSeeds = 6

// drawFailingHooks has such a program register, from a generator of its
// own, one or two failing hooks at random places: on the session, the
// root (with its subtree, sometimes), or the newest conversation.
func drawFailingHooks(p *program, seed uint64) {
	if seed%failingHookSeeds != 4 {
		return
	}
	rng := seededRNG(seed, "failing hooks")
	for range 1 + rng.IntN(2) {
		args := [][]string{{"session", "fail"}, {"c0", "fail"}, {"c0", "fail", "subtree"}, {"c-1", "fail"}}[rng.IntN(4)]
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), progLine{op: "hook", args: args})
	}
}

// failBlocked is the failing hook a call's blocked output names ("blocked:
// before_tool failed: hook N at before_tool: ..." or, for a panic,
// "...panicked: hook N panics at before_tool"), or -1.
func failBlocked(text string) int {
	rest, ok := strings.CutPrefix(text, "blocked: before_tool failed: ")
	if !ok {
		return -1
	}
	if m := failBlockedID.FindStringSubmatch(rest); m != nil {
		id, _ := strconv.Atoi(m[1])
		return id
	}
	return -1
}

var failBlockedID = regexp.MustCompile(`hook (\d+) (?:at|panics at) before_tool`)
