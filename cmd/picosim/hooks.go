package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/conformance/script"
	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// Hooks a program's host registers (hook and unhook lines, §8.7): scoped
// handlers of system_instructions, before_tool, before_request,
// before_collapse and after_response, harness-wide or for one
// conversation and, with subtree, the conversations it owns. The hook
// rules (hookrule.go) hold what each generation told its model and each
// response it showed, each tool call's block and the arguments it ran
// with, and each collapse's decision, to the hooks that applied to it.

// hostHook is a hook a hook line registered: what its handler does and
// where it applies. Registration is the host process's: a reopened
// session has the host register its hooks again (openHooks).
type hostHook struct {
	id      int
	conv    storage.ID // 0: every conversation
	effect  string     // script.HookEffects
	tool    string
	subtree bool
	// off takes the handler off the current harness; nil when it is not
	// registered there.
	off func()
}

// hookSection is hook id's system section for a generation whose config
// selects sel (nil: every tool): its key and its text, which names how many
// tools are selected, so that a turn that adds tools changes the section's
// text in place.
func hookSection(id int, sel *[]string) (key, text string) {
	text = fmt.Sprintf("Hook %d asks for care.", id)
	if sel != nil {
		text = fmt.Sprintf("Hook %d asks for care with %d tools.", id, len(*sel))
	}
	return "hook-" + strconv.Itoa(id), text
}

// hookDescription is the description a describe hook gives its tool.
func hookDescription(id int, tool string) string {
	return fmt.Sprintf("%s, as hook %d describes it", tool, id)
}

// hookBlock is the reason a block hook gives for refusing a call.
func hookBlock(id int) string { return "hook " + strconv.Itoa(id) }

// systemEffect reports whether a hook effect is a system_instructions one.
func systemEffect(effect string) bool {
	return effect == "section" || effect == "drop" || effect == "describe"
}

// collapseEffect reports whether a hook effect is a before_collapse one.
func collapseEffect(effect string) bool {
	return effect == "decline" || effect == "summary" || effect == "instruct"
}

// hookNote is the message a request hook adds to a generation's request.
func hookNote(id int) ai.Message { return ai.UserText(fmt.Sprintf("Hook %d adds a note.", id), 0) }

// hookSummary is the summary a summary hook supplies.
func hookSummary(id int) string { return fmt.Sprintf("Hook %d sums it all up.", id) }

// hookInstructions are the instructions an instruct hook gives.
func hookInstructions(id int) string { return fmt.Sprintf("keep what hook %d asks for", id) }

// hookArgs are a call's arguments as args hook id leaves them: its number
// added to the end of their list "hooks".
func hookArgs(id int, args json.RawMessage) (json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(args, &members); err != nil {
		return nil, fmt.Errorf("hook %d: arguments %s: %w", id, args, err)
	}
	var ran []int
	if raw, ok := members[argsHooksMember]; ok {
		if err := json.Unmarshal(raw, &ran); err != nil {
			return nil, fmt.Errorf("hook %d: arguments %s: %q: %w", id, args, argsHooksMember, err)
		}
	}
	members[argsHooksMember], _ = json.Marshal(append(ran, id))
	return json.Marshal(members)
}

// argsHooksMember is the member of a call's arguments that lists the args
// hooks that rewrote them, in order.
const argsHooksMember = "hooks"

// hookLine registers the hook a hook line describes, or removes the one an
// unhook line picks.
func (g *programRun) hookLine(ctx context.Context, l progLine) error {
	e := g.e
	if l.op == "unhook" {
		var live []*hostHook
		for _, h := range e.hooks {
			if h.off != nil {
				live = append(live, h)
			}
		}
		if len(live) == 0 {
			return nil
		}
		h := live[script.Nth(atoi(l.args[0]), len(live))]
		h.off()
		h.off = nil
		e.hooks = slices.DeleteFunc(e.hooks, func(x *hostHook) bool { return x == h })
		e.oracle.hookOff(h.id)
		return nil
	}
	effect, tool, _ := strings.Cut(l.args[1], ":")
	g.hooked++
	h := &hostHook{id: g.hooked, effect: effect, tool: tool, subtree: len(l.args) == 3}
	if target, child := strings.CutSuffix(l.args[0], "/child"); child {
		c, ok := e.oracle.ownChild(g.conv(target))
		if !ok {
			return fmt.Errorf("hook: conversation %d has no child a task of it made", g.conv(target))
		}
		h.conv = c
	} else if target != "session" {
		h.conv = g.conv(target)
	}
	if err := e.register(ctx, h); err != nil {
		return err
	}
	e.hooks = append(e.hooks, h)
	return nil
}

// openHooks registers the host's hooks with a harness just opened, in the
// order they were first registered, so that each keeps its place among
// the handlers. A hook of a conversation the session no longer has stays
// off.
func (e *env) openHooks(ctx context.Context) error {
	for _, h := range e.hooks {
		if err := e.register(ctx, h); err != nil && !errors.Is(err, core.ErrNotFound) {
			return err
		}
	}
	return nil
}

// closeHooks notes that the harness the hooks were registered with is
// gone, and with it what its after_response handlers saw.
func (e *env) closeHooks() {
	clear(e.oracle.hooks.seen)
	e.oracle.hookFailures = nil // their invocations ended with the process
	for _, h := range e.hooks {
		if h.off != nil {
			h.off = nil
			e.oracle.hookOff(h.id)
		}
	}
}

// register registers h with the current harness and tells the oracle.
//
// Every handler but observe (which notes what it saw whatever happens)
// first does its work (hookWork), honoring ctx as a handler that does work
// should: when the invocation it runs for is cut short meanwhile, the
// harness must carry the cancellation on, never report it as the hook's
// failure (reports-have-a-reason).
func (e *env) register(ctx context.Context, h *hostHook) error {
	hooks := e.h.Hooks()
	if h.conv != 0 {
		c, err := e.h.Conversation(ctx, h.conv)
		if err != nil {
			return err
		}
		hooks = c.Hooks()
	}
	opts := core.HookOptions{Subtree: h.subtree}
	switch {
	case h.effect == "block":
		h.off = hooks.On(agent.ToolKind, agent.HookBeforeTool, core.Hook(func(ctx context.Context, in agent.BeforeToolInput) (*agent.BeforeToolOutput, error) {
			if err := e.hookWork(ctx, h); err != nil {
				return nil, err
			}
			if in.ToolName != h.tool {
				return nil, nil
			}
			return &agent.BeforeToolOutput{Block: &agent.ToolBlock{Reason: hookBlock(h.id)}}, nil
		}), opts)
	case h.effect == "args":
		h.off = hooks.On(agent.ToolKind, agent.HookBeforeTool, core.Hook(func(ctx context.Context, in agent.BeforeToolInput) (*agent.BeforeToolOutput, error) {
			if err := e.hookWork(ctx, h); err != nil {
				return nil, err
			}
			if in.ToolName != h.tool {
				return &agent.BeforeToolOutput{}, nil // an answer that changes nothing
			}
			args, err := hookArgs(h.id, in.Args)
			if err != nil {
				return nil, err
			}
			return &agent.BeforeToolOutput{Args: args}, nil
		}), opts)
	case h.effect == "request":
		h.off = hooks.On(agent.GenerationKind, agent.HookBeforeRequest, core.Hook(func(ctx context.Context, in agent.BeforeRequestInput) (agent.BeforeRequestOutput, error) {
			if err := e.hookWork(ctx, h); err != nil {
				return agent.BeforeRequestOutput{}, err
			}
			req := in.Request
			req.Messages = append(slices.Clip(req.Messages), hookNote(h.id))
			return agent.BeforeRequestOutput{Request: &req}, nil
		}), opts)
	case h.effect == "fail":
		e.registerFailing(hooks, h, opts)
	case h.effect == "observe":
		h.off = hooks.On(agent.GenerationKind, agent.HookAfterResponse, core.Hook(func(ctx context.Context, in agent.AfterResponseInput) (any, error) {
			e.oracle.responseSeen(h.id, in)
			return nil, nil
		}), opts)
	case collapseEffect(h.effect):
		h.off = hooks.On(agent.CollapseKind, agent.HookBeforeCollapse, core.Hook(func(ctx context.Context, in agent.BeforeCollapseInput) (agent.BeforeCollapseOutput, error) {
			if err := e.hookWork(ctx, h); err != nil {
				return agent.BeforeCollapseOutput{}, err
			}
			switch h.effect {
			case "decline":
				return agent.BeforeCollapseOutput{Decline: true}, nil
			case "summary":
				return agent.BeforeCollapseOutput{Summary: hookSummary(h.id)}, nil
			}
			return agent.BeforeCollapseOutput{Instructions: hookInstructions(h.id)}, nil
		}), opts)
	default:
		h.off = hooks.On(agent.GenerationKind, agent.HookSystemInstructions, core.Hook(func(ctx context.Context, in agent.SystemInstructionsInput) (agent.SystemInstructionsOutput, error) {
			if err := e.hookWork(ctx, h); err != nil {
				return agent.SystemInstructionsOutput{}, err
			}
			return e.systemOf(h, in), nil
		}), opts)
	}
	e.oracle.hookOn(hookSpan{id: h.id, conv: h.conv, effect: h.effect, tool: h.tool, subtree: h.subtree})
	return nil
}

// systemOf is a system_instructions hook's answer: its own section, or the
// tools merged so far (the catalog's selection by the config when no
// handler before it named them) less its tool or with its description.
func (e *env) systemOf(h *hostHook, in agent.SystemInstructionsInput) agent.SystemInstructionsOutput {
	if h.effect == "section" {
		var sel *[]string
		if in.Config.SelectedTools != nil {
			sel = &in.Config.SelectedTools
		}
		key, text := hookSection(h.id, sel)
		return agent.SystemInstructionsOutput{Sections: []core.SystemSection{{Key: key, Text: &text}}}
	}
	tools := in.Tools
	if tools == nil {
		tools = e.h.Tools(in.Config.SelectedTools)
	}
	out := make([]ai.Tool, 0, len(tools))
	for _, t := range tools {
		if t.Name == h.tool {
			if h.effect == "drop" {
				continue
			}
			t.Description = hookDescription(h.id, h.tool)
		}
		out = append(out, t)
	}
	return agent.SystemInstructionsOutput{Tools: out}
}

// hookSeeds is how often a drawn program registers hooks (every fourth
// seed from 2, not the golden traces' seed 1).
const hookSeeds = 4

// drawHooks has the program of every hookSeeds-th seed register, from a
// generator of its own, one to four hooks at random places: on the root
// (often with its subtree, which reaches its subagents but not its forks),
// on another conversation, a child a call of the root made, or the
// session; sections, tools taken out or described anew, calls blocked
// (by two hooks, sometimes), collapses declined, summarized or instructed
// (each followed by a collapse); and now and then an unhook. Every other
// such program begins with a child under a hook of the root's subtree and
// one of its own, and every other with two or three before_collapse hooks
// deciding a collapse of the root; half have after_response hooks too
// (drawObservers).
func drawHooks(p *program, seed uint64) {
	if seed%hookSeeds != 2 {
		return
	}
	rng := seededRNG(seed, "hooks")
	tools := []string{"a", "b", "work"}
	if p.shell {
		tools = append(tools, "bash")
	}
	effects := []string{"section", "section", "drop", "describe", "block", "block", "args", "args", "decline", "summary", "instruct", "instruct"}
	draw := func() string {
		effect := effects[rng.IntN(len(effects))]
		switch {
		case effect == "args":
			// The echo tools, whose output shows the arguments they saw.
			effect += ":" + tools[rng.IntN(2)]
		case script.HookNamesTool(effect):
			effect += ":" + tools[rng.IntN(len(tools))]
		}
		return effect
	}
	for range 1 + rng.IntN(4) {
		effect := draw()
		args := []string{"c0", effect}
		switch rng.IntN(5) {
		case 0:
			args[0] = "session"
		case 1:
			args[0] = []string{"c-1", "c0/child"}[rng.IntN(2)]
		default:
			if rng.IntN(3) > 0 {
				args = append(args, "subtree")
			}
		}
		at := rng.IntN(len(p.lines)) // before the last line, the drive that ends the program
		p.lines = slices.Insert(p.lines, at, progLine{op: "hook", args: args})
		if strings.HasPrefix(effect, "block:") && args[0] != "session" && rng.IntN(2) == 0 {
			// A session hook blocking the same tool runs first, and its
			// reason is the one a call gets.
			p.lines = slices.Insert(p.lines, at+1, progLine{op: "hook", args: []string{"session", effect}})
		}
		if tool, ok := strings.CutPrefix(effect, "args:"); ok {
			// A call for it to rewrite, and one it must leave alone.
			p.lines = slices.Insert(p.lines, at+1, progLine{op: "respond", args: []string{"calls", tool + "," + tools[(slices.Index(tools, tool)+1)%2]}})
		}
		if tool, ok := strings.CutPrefix(effect, "drop:"); ok {
			// A call of the tool taken out of the request, which the
			// answer may not run (a tool not offered).
			call := map[string]string{"work": "work:ok", "bash": "bash:go test ./..."}[tool]
			if call == "" {
				call = tool
			}
			p.lines = slices.Insert(p.lines, at+1, progLine{op: "respond", args: []string{"calls", call}})
		}
		if collapseEffect(effect) {
			// A collapse for it to decide.
			conv := "c0"
			if strings.HasPrefix(args[0], "c") && !strings.HasSuffix(args[0], "/child") {
				conv = args[0]
			}
			p.lines = slices.Insert(p.lines, at+1, progLine{op: "collapse", args: []string{conv}})
		}
		if rng.IntN(4) == 0 {
			at += 1 + rng.IntN(len(p.lines)-1-at)
			p.lines = slices.Insert(p.lines, at, progLine{op: "unhook", args: []string{strconv.Itoa(rng.IntN(3))}})
		}
	}
	if rng.IntN(2) == 0 {
		// A child under hooks of its owner's and of its own: its
		// generations see the owner's first.
		respond := func(call string) progLine {
			return progLine{op: "respond", args: []string{"calls", "subagent:" + call}}
		}
		own := "section"
		if rng.IntN(2) == 0 {
			own = draw()
		}
		p.lines = append([]progLine{respond("spawn"), respond("send"), respond("wait"),
			{op: "accept", args: []string{"c0", "delegate"}}, {op: "drive", args: []string{"c0"}},
			{op: "hook", args: []string{"c0", "section", "subtree"}}, {op: "hook", args: []string{"c0/child", own}},
			// Two notes in every request of the root and its child, in
			// handler order.
			{op: "hook", args: []string{"c0", "request", "subtree"}}, {op: "hook", args: []string{"session", "request"}},
			{op: "accept", args: []string{"c0", "again"}}, {op: "drive", args: []string{"c0"}},
			// The session's section goes before the root's, told already:
			// the next turn tells the model both again, in that order.
			{op: "hook", args: []string{"session", "section"}},
			{op: "accept", args: []string{"c0", "once more"}}, {op: "drive", args: []string{"c0"}}}, p.lines...)
	}
	if rng.IntN(2) == 0 {
		// Two or three before_collapse hooks deciding one collapse of the
		// root, which has two turns and keeps only the newest, and which
		// the host may give instructions of its own.
		block := []progLine{{op: "accept", args: []string{"c0", "first"}}, {op: "drive", args: []string{"c0"}},
			{op: "accept", args: []string{"c0", "second"}}, {op: "drive", args: []string{"c0"}},
			{op: "value", args: []string{"c0", agent.CollapseKeepRecentValue.Namespace, "rewind", "set", strconv.Itoa(rng.IntN(40))}}}
		collapses := []string{"decline", "summary", "summary", "instruct", "instruct", "instruct"}
		for range 2 + rng.IntN(2) {
			target := []string{"c0", "c0", "session"}[rng.IntN(3)]
			block = append(block, progLine{op: "hook", args: []string{target, collapses[rng.IntN(len(collapses))]}})
		}
		collapse := progLine{op: "collapse", args: []string{"c0"}}
		if rng.IntN(2) == 0 {
			collapse.args = append(collapse.args, collapseInstructions[rng.IntN(len(collapseInstructions))])
		}
		block = append(block, collapse, progLine{op: "drive", args: []string{"c0"}})
		p.lines = append(block, p.lines...)
	}
	if !slices.ContainsFunc(p.lines, func(l progLine) bool { return l.op == "respond" && l.args[0] == "calls" }) {
		p.lines = append([]progLine{{op: "respond", args: []string{"calls", "a,work:ok"}}}, p.lines...)
	}
	// Half of them, from a generator of its own, have a child the root's
	// call spawned come under a section hook of the root's subtree and one
	// of its own, then take input of the host: in the turn that answers
	// it, the root's section comes first.
	if own := seededRNG(seed, "own hooks last"); own.IntN(2) == 0 {
		p.lines = append([]progLine{{op: "respond", args: []string{"calls", "subagent:spawn"}},
			{op: "respond", args: []string{"text", "ok"}}, {op: "respond", args: []string{"text", "ok"}}, {op: "respond", args: []string{"text", "ok"}},
			{op: "accept", args: []string{"c0", "delegate"}}, {op: "drive", args: []string{"c0"}},
			{op: "hook", args: []string{"c0", "section", "subtree"}}, {op: "hook", args: []string{"c0/child", "section"}},
			{op: "accept", args: []string{"c0/child", "go on"}}, {op: "sleep", args: []string{"300"}}}, p.lines...)
	}
	// Half of them, from a generator of its own, have two handlers give a
	// collapse of the root instructions, half the time with the host's
	// own: the last handler's stand, and the host's do not replace them.
	if two := seededRNG(seed, "two instructions"); two.IntN(2) == 0 {
		block := collapseAfterTwoTurns(1, progLine{op: "respond", args: []string{"text", "summed up"}})
		if two.IntN(2) == 0 {
			// The host's own instructions, which go before the handlers'.
			block[collapseLine].args = append(block[collapseLine].args, collapseInstructions[two.IntN(len(collapseInstructions))])
		}
		block = slices.Insert(block, collapseLine, progLine{op: "hook", args: []string{"c0", "instruct"}},
			progLine{op: "hook", args: []string{[]string{"c0", "session"}[two.IntN(2)], "instruct"}})
		p.lines = append(block, p.lines...)
	} else if kept := seededRNG(seed, "decline kept"); kept.IntN(2) == 0 {
		// Half the others, from a generator of their own, have a handler
		// decline the collapse and one after it, the root's own, summarize
		// or instruct: the decline stands, and the summarizer is not asked.
		block := collapseAfterTwoTurns(1, progLine{op: "respond", args: []string{"text", "summed up"}})
		block = slices.Insert(block, collapseLine, progLine{op: "hook", args: []string{[]string{"c0", "session"}[kept.IntN(2)], "decline"}},
			progLine{op: "hook", args: []string{"c0", []string{"summary", "instruct"}[kept.IntN(2)]}})
		p.lines = append(block, p.lines...)
	}
	// Half of them, from a generator of its own, take a tool out of the
	// root's requests and then have its model call it in a turn.
	if drop := seededRNG(seed, "dropped call"); drop.IntN(2) == 0 {
		tool := []string{"a", "b"}[drop.IntN(2)]
		at := drop.IntN(len(p.lines))
		p.lines = slices.Insert(p.lines, at, progLine{op: "hook", args: []string{"c0", "drop:" + tool}},
			progLine{op: "respond", args: []string{"calls", tool}}, progLine{op: "respond", args: []string{"text", "ok"}},
			progLine{op: "accept", args: []string{"c0", "look"}}, progLine{op: "drive", args: []string{"c0"}})
	}
	// Half of them, from a generator of their own, begin with a turn under
	// an args hook of one echo tool whose answer calls both: the other
	// call's arguments, which the hook's empty answer does not change, run
	// as the model gave them. The hook is then taken off.
	if empty := seededRNG(seed, "args left alone"); empty.IntN(2) == 0 {
		tool := []string{"a", "b"}[empty.IntN(2)]
		calls := []string{"a,b", "b,a"}[empty.IntN(2)]
		p.lines = append([]progLine{{op: "hook", args: []string{[]string{"c0", "session"}[empty.IntN(2)], "args:" + tool}},
			{op: "respond", args: []string{"calls", calls}}, {op: "respond", args: []string{"text", "ok"}},
			{op: "accept", args: []string{"c0", "look"}}, {op: "drive", args: []string{"c0"}},
			{op: "unhook", args: []string{"-1"}}}, p.lines...)
	}
	drawObservers(p, seed)
}

// drawObservers has half the hook programs register one or two
// after_response hooks at random places, on the session or on the root
// (with its subtree, which reaches its subagents, half the time), from a
// generator of their own so that drawHooks's draws stay as they were.
func drawObservers(p *program, seed uint64) {
	rng := seededRNG(seed, "observers")
	if rng.IntN(2) == 0 {
		return
	}
	for range 1 + rng.IntN(2) {
		args := [][]string{{"session", "observe"}, {"c0", "observe"}, {"c0", "observe", "subtree"}}[rng.IntN(3)]
		p.lines = slices.Insert(p.lines, rng.IntN(len(p.lines)), progLine{op: "hook", args: args})
	}
}

// hookWait is the virtual time the work of a hook with an even id takes;
// one with an odd id takes none.
const hookWait = 2 * time.Millisecond

// hookWork is a hook handler's work: hookWait of virtual time for hook h
// with an even id, then ctx's answer (a cancellation is the invocation's,
// which the handler hands on).
func (e *env) hookWork(ctx context.Context, h *hostHook) error {
	if h.id%2 == 0 {
		if err := e.s.Runtime().Sleep(ctx, hookWait); err != nil {
			return err
		}
	}
	return ctx.Err()
}
