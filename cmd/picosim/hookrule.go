package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/agent"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/storage"
)

// The hook rules: the host's hooks (hooks.go) apply where they are scoped
// (§8.7). A conversation's handlers of a point are the session's, then
// those of the conversations that own it, outermost first, registered
// with their subtree, then its own, each group in registration order; a
// fork is owned by nobody, so its parent's hooks never reach it.
//
// A handler runs between its invocation's start and the commit it
// decides, and the host may register or remove a hook in between: a hook
// surely ran when it was registered before the invocation started and is
// still registered at the commit; it may have run when it was registered
// at any time before the commit and not removed before the invocation
// started. The rules accept what some set of hooks that may have run, all
// that surely ran among them, would have produced.
//
//   - At the commit that starts a generation's attempt, the system entries
//     of its context fold to the sections and tools its system_instructions
//     handlers asked for: each section hook's section, in handler order;
//     the catalog's selection by the generation's config, less the tools
//     a drop hook takes out and with the descriptions a describe hook
//     gives, in handler order.
//   - A tool call's execute runs its call (patches it running) only when
//     no block hook of its tool surely ran, and one blocked by hook N was
//     blocked by a hook that may have run, with no block hook of its tool
//     before N in handler order surely run.
//   - A call that runs runs with the model's arguments as the args hooks
//     of its tool left them: the list "hooks" in them names a set of such
//     hooks that may have run, all that surely ran among them, in handler
//     order (none: no such list), and the rest is the model's arguments,
//     though other hooks answered too; an echo tool that settles done
//     wrote its name and the arguments its running call recorded.
//   - A call is offered when its tool was among the tools of the request
//     its answer came from, and a call not offered never runs.
//   - A collapse's execute declines only when a decline hook may have run,
//     and publishes a summary only when no decline hook surely ran: a
//     hook's summary when the last summary hook of a set that may have run
//     supplied it, the summarizer's when none did; the summarizer's
//     request carries the last instructions an instruct hook of such a
//     set gave, or the collapse's own (summarizerrule.go).
//   - A generation's execute that settles with its model's answer showed
//     that answer, last, to every after_response hook that surely ran,
//     usage included, and showed nothing to a hook that cannot have run.

const (
	// ruleSystemHooks: a generation tells its model what its hooks say.
	ruleSystemHooks oracleRule = "system-follows-its-hooks"
	// ruleBlockHooks: a call is blocked exactly by its hooks.
	ruleBlockHooks oracleRule = "a-call-is-blocked-by-its-hooks"
	// ruleArgsHooks: a call runs with what its hooks made of the model's
	// arguments.
	ruleArgsHooks oracleRule = "a-call-runs-with-what-its-hooks-made-of-its-arguments"
	// ruleOffered: a call is offered as its request offered its tool.
	ruleOffered oracleRule = "a-call-is-offered-as-its-request"
	// ruleCollapseHooks: a collapse is declined or summarized as its hooks
	// say.
	ruleCollapseHooks oracleRule = "a-collapse-follows-its-hooks"
	// ruleResponseHooks: after_response hooks see the answer a generation
	// settles with.
	ruleResponseHooks oracleRule = "a-response-is-shown-to-its-hooks"
)

// hookSpan is one registration of a host's hook with one harness: from
// the oracle's tick on to off (0: still registered).
type hookSpan struct {
	id      int
	conv    storage.ID
	effect  string
	tool    string
	subtree bool
	on, off uint64
}

// hookWatch is what the hook rules follow: every registration, a clock
// that orders registrations, invocation starts and commits, when each
// task's current invocation started, each generation's tool selection,
// the tools each generation's newest attempt offered, and whether each
// tool call was offered.
type hookWatch struct {
	spans     []hookSpan
	tick      uint64
	invokedAt map[storage.ID]uint64
	selection map[storage.ID]*[]string
	offers    map[storage.ID][]string
	offered   map[storage.ID]bool
	// callArgs are each call's arguments as its model gave them, and
	// runArgs those its running call recorded.
	callArgs, runArgs map[storage.ID]json.RawMessage
	// catalogTools are the definitions of the run's tools, in catalog order.
	catalogTools []ai.Tool
	// seen are the responses each conversation's after_response hooks
	// saw since its generation's execute started, in order.
	seen map[storage.ID][]seenResponse
}

// seenResponse is a response an after_response hook saw.
type seenResponse struct {
	hook int
	what string // responseDigest
}

func newHookWatch() hookWatch {
	return hookWatch{invokedAt: map[storage.ID]uint64{}, selection: map[storage.ID]*[]string{},
		offers: map[storage.ID][]string{}, offered: map[storage.ID]bool{}, seen: map[storage.ID][]seenResponse{},
		callArgs: map[storage.ID]json.RawMessage{}, runArgs: map[storage.ID]json.RawMessage{}}
}

// responseSeen notes the response hook saw.
func (o *oracle) responseSeen(hook int, in agent.AfterResponseInput) {
	o.hooks.seen[in.ConversationID] = append(o.hooks.seen[in.ConversationID], seenResponse{hook, responseDigest(in.Response, in.Usage)})
}

// responseDigest is what the response rule compares of a response: its
// stop reason, its text, its calls, and its usage.
func responseDigest(m ai.Message, u *ai.Usage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", m.StopReason, m.Content.TextOf())
	for _, c := range m.Content.Blocks {
		if c.Type == ai.BlockToolCall {
			fmt.Fprintf(&b, " call %s %s", c.ID, c.Name)
		}
	}
	if u != nil {
		fmt.Fprintf(&b, " usage %d in, %d out, %v", u.Input, u.Output, u.Cost.Total)
	} else {
		b.WriteString(" no usage")
	}
	return b.String()
}

// hookResponse holds a generation's settlement with its model's answer (an
// assistant entry of its conversation in the batch) to the after_response
// hooks: each that surely ran saw that answer last; none saw anything that
// cannot have run. What the conversation's hooks saw is forgotten at every
// settlement, and at every start of a generation's execute.
func (o *oracle) hookResponse(inv core.Invocation, ok bool, w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	conv := o.convs[w.ID]
	seen := o.hooks.seen[conv]
	delete(o.hooks.seen, conv)
	from, started := o.hooks.invokedAt[w.ID]
	if !ok || inv.Task != w.ID || inv.Method != core.MethodExecute || !started || w.Status != "done" {
		return nil
	}
	var answer *ai.Message
	for _, x := range b.Writes {
		if x.Type == storage.WriteEntry && x.Entry != nil && x.Entry.Kind == "assistant" && x.Entry.ConversationID == conv && len(x.Entry.Model) == 1 {
			answer = &x.Entry.Model[0]
		}
	}
	if answer == nil {
		return nil
	}
	want := responseDigest(*answer, answer.Usage)
	last := map[int]string{}
	for _, r := range seen {
		last[r.hook] = r.what
	}
	spans, sure := o.handlers(conv, from, func(s hookSpan) bool { return s.effect == "observe" })
	for i, s := range spans {
		got, saw := last[s.id]
		delete(last, s.id)
		switch {
		case sure[i] && !saw:
			return o.fail(broke(ruleResponseHooks, "%s settled generation %d with its answer at %d, which hook %d, registered throughout, never saw", by, w.ID, seq, s.id))
		case sure[i] && got != want:
			return o.fail(broke(ruleResponseHooks, "%s settled generation %d at %d with the answer %s; hook %d, registered throughout, saw last %s", by, w.ID, seq, want, s.id, got))
		}
	}
	if len(last) > 0 {
		ids := slices.Sorted(maps.Keys(last))
		return o.fail(broke(ruleResponseHooks, "hook %d saw a response of generation %d, settled by %s at %d, though it cannot have run for conversation %d then", ids[0], w.ID, by, seq, conv))
	}
	return nil
}

// hookOn notes a hook registered now.
func (o *oracle) hookOn(s hookSpan) {
	o.hooks.tick++
	s.on, s.off = o.hooks.tick, 0
	o.hooks.spans = append(o.hooks.spans, s)
}

// hookOff notes hook id removed now.
func (o *oracle) hookOff(id int) {
	o.hooks.tick++
	for i := range o.hooks.spans {
		if s := &o.hooks.spans[i]; s.id == id && s.off == 0 {
			s.off = o.hooks.tick
		}
	}
}

// ownerChain is conv and the conversations that own it, innermost first.
func (o *oracle) ownerChain(conv storage.ID) []storage.ID {
	chain := []storage.ID{conv}
	for c := conv; o.owners[c] != 0 && len(chain) <= len(o.created); {
		c = o.convs[o.owners[c]]
		chain = append(chain, c)
	}
	return chain
}

// handlers are the spans that keep, of hooks scoped to apply in conv, in
// handler order, each with whether it surely ran in an invocation started
// at tick from (false: it may have). Spans that cannot have run are left
// out.
func (o *oracle) handlers(conv storage.ID, from uint64, keep func(hookSpan) bool) (spans []hookSpan, sure []bool) {
	chain := o.ownerChain(conv)
	rank := func(s hookSpan) int {
		if s.conv == 0 {
			return len(chain)
		}
		i := slices.Index(chain, s.conv)
		if i < 0 || i > 0 && !s.subtree {
			return -1
		}
		return i
	}
	for _, s := range o.hooks.spans {
		if keep(s) && rank(s) >= 0 && (s.off == 0 || s.off > from) {
			spans = append(spans, s)
		}
	}
	slices.SortStableFunc(spans, func(a, b hookSpan) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return rb - ra
		}
		return a.id - b.id
	})
	for _, s := range spans {
		sure = append(sure, s.on < from && s.off == 0)
	}
	return spans, sure
}

// uncertainMax bounds the hooks whose running the rules weigh both ways.
const uncertainMax = 8

// possibleRuns calls try with each set of spans that may have run, the
// sure ones among them, in handler order, until it says yes; false when
// none did (or too many were uncertain to weigh).
func possibleRuns(spans []hookSpan, sure []bool, try func([]hookSpan) bool) bool {
	var unsure []int
	for i, ok := range sure {
		if !ok {
			unsure = append(unsure, i)
		}
	}
	if len(unsure) > uncertainMax {
		return true
	}
	for mask := 0; mask < 1<<len(unsure); mask++ {
		var run []hookSpan
		u := 0
		for i, s := range spans {
			if sure[i] {
				run = append(run, s)
				continue
			}
			if mask&(1<<u) != 0 {
				run = append(run, s)
			}
			u++
		}
		if try(run) {
			return true
		}
	}
	return false
}

// hookedSystem is what the system_instructions hooks of run ask for, over
// the catalog's selection by sel (nil: every tool).
func (o *oracle) hookedSystem(run []hookSpan, sel *[]string) (sections []core.SystemSection, tools []ai.Tool) {
	named := false
	for _, s := range run {
		if s.effect == "section" {
			key, text := hookSection(s.id, sel)
			sections = append(sections, core.SystemSection{Key: key, Text: &text})
			continue
		}
		if !named {
			tools, named = o.selected(sel), true
		}
		tools = slices.DeleteFunc(tools, func(t ai.Tool) bool { return s.effect == "drop" && t.Name == s.tool })
		for i := range tools {
			if s.effect == "describe" && tools[i].Name == s.tool {
				tools[i].Description = hookDescription(s.id, s.tool)
			}
		}
	}
	if !named {
		tools = o.selected(sel)
	}
	return sections, tools
}

// selected is the catalog's selection by sel: its tools in sel's order,
// each once, unknown names skipped; nil selects the catalog.
func (o *oracle) selected(sel *[]string) []ai.Tool {
	if sel == nil || *sel == nil {
		return slices.Clone(o.hooks.catalogTools)
	}
	var out []ai.Tool
	for _, n := range *sel {
		i := slices.IndexFunc(o.hooks.catalogTools, func(t ai.Tool) bool { return t.Name == n })
		if i >= 0 && !slices.ContainsFunc(out, func(t ai.Tool) bool { return t.Name == n }) {
			out = append(out, o.hooks.catalogTools[i])
		}
	}
	return out
}

// sameSystem compares sections by key and text, in order, and tools by
// name and description, in any order: a delta appends the tools it adds,
// so a tool taken out and given back comes last.
func sameSystem(as, bs []core.SystemSection, at, bt []ai.Tool) bool {
	byName := func(ts []ai.Tool) []ai.Tool {
		return slices.SortedFunc(slices.Values(ts), func(a, b ai.Tool) int { return strings.Compare(a.Name, b.Name) })
	}
	return slices.EqualFunc(as, bs, func(a, b core.SystemSection) bool {
		return a.Key == b.Key && (a.Text == nil) == (b.Text == nil) && (a.Text == nil || *a.Text == *b.Text)
	}) && slices.EqualFunc(byName(at), byName(bt), func(a, b ai.Tool) bool { return a.Name == b.Name && a.Description == b.Description })
}

func describeSystem(sections []core.SystemSection, tools []ai.Tool) string {
	var keys, names []string
	for _, s := range sections {
		k := s.Key
		if s.Text != nil {
			k += fmt.Sprintf("(%q)", *s.Text)
		}
		keys = append(keys, k)
	}
	for _, t := range tools {
		n := t.Name
		if strings.Contains(t.Description, "as hook") {
			n += "(" + t.Description + ")"
		}
		names = append(names, n)
	}
	return fmt.Sprintf("sections %v, tools %v", keys, names)
}

// hookTask notes a task's creation for the hook rules: a generation's
// selection, a call's offer, checked against its request's tools.
func (o *oracle) hookTask(inv core.Invocation, ok bool, t *storage.Task, by string, seq storage.ID) error {
	switch t.Kind {
	case agent.GenerationKindName:
		if sel, ok := selectionOf(t.State); ok {
			o.hooks.selection[t.ID] = sel
		}
	case agent.ToolKindName:
		var st agent.ToolState
		if json.Unmarshal(t.State, &st) != nil {
			return nil
		}
		o.hooks.offered[t.ID] = st.Offered
		if !ok || o.kinds[inv.Task] != agent.GenerationKindName {
			return nil
		}
		offer, known := o.hooks.offers[inv.Task]
		if !known {
			req, has := o.requests[t.ConversationID]
			if !has || req.task != inv.Task {
				return nil
			}
			offer = toolNames(req.tools)
		}
		if want := slices.Contains(offer, st.Call.Name); st.Offered != want {
			return o.fail(broke(ruleOffered, "%s made call %s of %s at %d with offered %v; its request offered %v",
				by, st.Call.ID, st.Call.Name, seq, st.Offered, offer))
		}
	}
	return nil
}

// notOffered reports whether tool call task was made for a tool its
// request did not offer: such a call settles as an error without running.
func (o *oracle) notOffered(task storage.ID) bool {
	offered, known := o.hooks.offered[task]
	return known && !offered
}

// selectionOf reads a generation's tool selection from its state (nil:
// every tool).
func selectionOf(state json.RawMessage) (*[]string, bool) {
	var st struct {
		Config struct {
			SelectedTools *[]string `json:"selectedTools"`
		} `json:"config"`
	}
	if json.Unmarshal(state, &st) != nil {
		return nil, false
	}
	return st.Config.SelectedTools, true
}

// hookStreaming holds a generation's attempt start to its hooks.
func (o *oracle) hookStreaming(inv core.Invocation, ok bool, w storage.Write, r storage.Range, by string, seq storage.ID) error {
	from, started := o.hooks.invokedAt[w.ID]
	if !ok || inv.Task != w.ID || !started || len(o.hooks.spans) == 0 {
		delete(o.hooks.offers, w.ID)
		return nil
	}
	conv := o.convs[w.ID]
	cx, derived := o.transcripts.derive(conv, r.Last)
	if !derived {
		delete(o.hooks.offers, w.ID)
		return nil
	}
	entries := make([]*storage.Entry, len(cx))
	for i, ce := range cx {
		if entries[i] = o.transcripts.entry(conv, ce.ID); entries[i] == nil {
			delete(o.hooks.offers, w.ID)
			return nil
		}
	}
	_, sections, tools := foldSystem(entries)
	o.hooks.offers[w.ID] = toolNames(tools)
	spans, sure := o.handlers(conv, from, func(s hookSpan) bool { return systemEffect(s.effect) })
	sel, known := o.hooks.selection[w.ID]
	if !known {
		// Created in a commit the oracle never saw (one a restart left
		// uncertain): the patch carries the generation's state.
		sel, _ = selectionOf(w.State)
	}
	if possibleRuns(spans, sure, func(run []hookSpan) bool {
		ws, wt := o.hookedSystem(run, sel)
		return sameSystem(sections, ws, tools, wt)
	}) {
		return nil
	}
	var surely []hookSpan
	for i, s := range spans {
		if sure[i] {
			surely = append(surely, s)
		}
	}
	ws, wt := o.hookedSystem(surely, sel)
	return o.fail(broke(ruleSystemHooks, "%s started an attempt at %d with its context telling conversation %d's model %s; hooks %v may have run for it (%v surely), and the sure ones alone ask for %s",
		by, seq, conv, describeSystem(sections, tools), spanIDs(spans), spanIDs(surely), describeSystem(ws, wt)))
}

func spanIDs(spans []hookSpan) []int {
	ids := make([]int, len(spans))
	for i, s := range spans {
		ids[i] = s.id
	}
	return ids
}

// hookCall holds a tool call's execute, at the commit that runs its call
// or settles it blocked, to its block hooks; and a call not offered to
// never running.
func (o *oracle) hookCall(inv core.Invocation, ok bool, w storage.Write, by string, seq storage.ID) error {
	running := w.Type == storage.WritePatch && w.Status == "running"
	if running {
		var st agent.ToolState
		if json.Unmarshal(w.State, &st) == nil {
			o.hooks.runArgs[w.ID] = st.Args
		}
	}
	if err := o.echoed(w, by, seq); err != nil {
		return err
	}
	if running && !o.hooks.offered[w.ID] {
		if _, known := o.hooks.offered[w.ID]; known {
			return o.fail(broke(ruleOffered, "%s ran call task %d of %s, not offered to the model, at %d", by, w.ID, o.tools[w.ID], seq))
		}
	}
	from, started := o.hooks.invokedAt[w.ID]
	if !ok || inv.Task != w.ID || inv.Method != core.MethodExecute || !started || len(o.hooks.spans) == 0 {
		return nil
	}
	tool := o.tools[w.ID]
	if tool == "" {
		// Created in a commit the oracle never saw (one a restart left
		// uncertain): the call's state names its tool.
		var st agent.ToolState
		if json.Unmarshal(w.State, &st) != nil || st.Call.Name == "" {
			return nil
		}
		tool = st.Call.Name
	}
	if running {
		if err := o.hookArgs(w, from, tool, by, seq); err != nil {
			return err
		}
	}
	blockedBy := -1
	if w.Type == storage.WriteSettle {
		var st struct {
			Output *agent.ToolOutputState `json:"output"`
		}
		if json.Unmarshal(w.State, &st) != nil || st.Output == nil {
			return nil
		}
		text := outputText(st.Output)
		reason, blocked := strings.CutPrefix(text, "blocked: hook ")
		if blockedBy = failBlocked(text); !blocked && blockedBy < 0 {
			return nil
		}
		if blocked {
			fmt.Sscanf(reason, "%d", &blockedBy)
		}
	} else if !running {
		return nil
	}
	// A failing hook blocks every call (it fails closed, failhooks.go).
	spans, sure := o.handlers(o.convs[w.ID], from, func(s hookSpan) bool { return s.effect == "block" && s.tool == tool || s.effect == "fail" })
	for i, s := range spans {
		if s.id == blockedBy {
			return nil
		}
		if sure[i] {
			what := "ran it"
			if blockedBy >= 0 {
				what = fmt.Sprintf("settled it blocked by hook %d", blockedBy)
			}
			return o.fail(broke(ruleBlockHooks, "%s %s at %d, though hook %d, which blocks %s in conversation %d, surely ran before it (hooks %v apply)",
				by, what, seq, s.id, tool, o.convs[w.ID], spanIDs(spans)))
		}
	}
	if blockedBy >= 0 {
		return o.fail(broke(ruleBlockHooks, "%s settled call task %d of %s blocked by hook %d at %d; only hooks %v may have run for it",
			by, w.ID, tool, blockedBy, seq, spanIDs(spans)))
	}
	return nil
}

// hookArgs holds the arguments call task w's execute runs it with (the
// patch that runs it) to the args hooks of its tool that may have run in
// an invocation started at tick from.
func (o *oracle) hookArgs(w storage.Write, from uint64, tool, by string, seq storage.ID) error {
	model, known := o.hooks.callArgs[w.ID]
	if !known {
		return nil
	}
	ran, rest, err := argsHooked(o.hooks.runArgs[w.ID])
	var want map[string]any
	if err != nil || json.Unmarshal(model, &want) != nil || !reflect.DeepEqual(rest, want) {
		return o.fail(broke(ruleArgsHooks, "%s ran call task %d of %s at %d with the arguments %s; its model gave %s",
			by, w.ID, tool, seq, o.hooks.runArgs[w.ID], model))
	}
	spans, sure := o.handlers(o.convs[w.ID], from, func(s hookSpan) bool { return s.effect == "args" && s.tool == tool })
	next := 0
	for i, s := range spans {
		if next < len(ran) && ran[next] == s.id {
			next++
			continue
		}
		if sure[i] {
			return o.fail(broke(ruleArgsHooks, "%s ran call task %d of %s at %d with arguments hooks %v rewrote, though hook %d, which rewrites them in conversation %d, surely ran (hooks %v apply, in that order)",
				by, w.ID, tool, seq, ran, s.id, o.convs[w.ID], spanIDs(spans)))
		}
	}
	if next < len(ran) {
		return o.fail(broke(ruleArgsHooks, "%s ran call task %d of %s at %d with arguments hooks %v rewrote; only hooks %v may have run for it, in that order",
			by, w.ID, tool, seq, ran, spanIDs(spans)))
	}
	return nil
}

// argsHooked reads arguments the args hooks may have rewritten: the hooks
// their list names, and the rest of them.
func argsHooked(args json.RawMessage) (ran []int, rest map[string]any, err error) {
	if err := json.Unmarshal(args, &rest); err != nil {
		return nil, nil, err
	}
	if list, ok := rest[argsHooksMember]; ok {
		delete(rest, argsHooksMember)
		raw, _ := json.Marshal(list)
		if err := json.Unmarshal(raw, &ran); err != nil {
			return nil, nil, err
		}
	}
	return ran, rest, nil
}

// echoed holds an echo tool's call that settles done, not an error, to
// having written its name and the arguments its running call recorded.
func (o *oracle) echoed(w storage.Write, by string, seq storage.ID) error {
	tool := o.tools[w.ID]
	args, ran := o.hooks.runArgs[w.ID]
	if w.Type != storage.WriteSettle || w.Status != "done" || (tool != "a" && tool != "b") || !ran {
		return nil
	}
	var st agent.ToolState
	if json.Unmarshal(w.State, &st) != nil || st.Output == nil || st.Output.IsError {
		return nil
	}
	text := outputText(st.Output)
	saw, named := strings.CutPrefix(text, tool)
	var got, want any
	if !named || json.Unmarshal([]byte(saw), &got) != nil || json.Unmarshal(args, &want) != nil || !reflect.DeepEqual(got, want) {
		return o.fail(broke(ruleArgsHooks, "%s settled call task %d of %s at %d with the output %q; it ran with the arguments %s", by, w.ID, tool, seq, text, args))
	}
	return nil
}

// collapseDecision is what the before_collapse hooks of run decide: a
// decline, or the id of the last summary hook (0: none), and the id of the
// last instruct hook (0: none).
func collapseDecision(run []hookSpan) (declined bool, summary, instruct int) {
	for _, s := range run {
		switch s.effect {
		case "decline":
			declined = true
		case "summary":
			summary = s.id
		case "instruct":
			instruct = s.id
		}
	}
	return declined, summary, instruct
}

// collapseSpans are the before_collapse hooks that may have run for
// collapse task's current invocation, each with whether it surely ran;
// false when the invocation's start is not known.
func (o *oracle) collapseSpans(task storage.ID) ([]hookSpan, []bool, bool) {
	from, started := o.hooks.invokedAt[task]
	if !started {
		return nil, nil, false
	}
	spans, sure := o.handlers(o.convs[task], from, func(s hookSpan) bool { return collapseEffect(s.effect) })
	return spans, sure, true
}

// collapseInstructions are the instructions a summarizer request of
// collapse task may carry as it goes out: for each set of its hooks that
// may have run and neither declined nor supplied a summary, the last
// instruct hook's, or own when none gave any. known is false when the
// rule cannot weigh the hooks.
func (o *oracle) collapseInstructions(task storage.ID, own string) (options []string, known bool) {
	spans, sure, ok := o.collapseSpans(task)
	switch {
	case len(o.hooks.spans) == 0:
		return []string{own}, true // no hook was ever registered
	case !ok:
		return nil, false
	}
	if weighed := possibleRuns(spans, sure, func(run []hookSpan) bool {
		declined, summary, instruct := collapseDecision(run)
		if declined || summary != 0 {
			return false
		}
		option := own
		if instruct != 0 {
			option = hookInstructions(instruct)
		}
		if !slices.Contains(options, option) {
			options = append(options, option)
		}
		return false
	}); weighed {
		return nil, false // too many to weigh
	}
	return options, true
}

// hookCollapse holds a collapse's settlement by its own execute (w, in
// batch b at seq) to its before_collapse hooks: declined only when a
// decline hook may have run; a published summary the one a set of hooks
// that may have run, and declined none, supplies, or the summarizer's.
func (o *oracle) hookCollapse(inv core.Invocation, ok bool, w storage.Write, b storage.CommitBatch, by string, seq storage.ID) error {
	if !ok || inv.Task != w.ID || inv.Method != core.MethodExecute || len(o.hooks.spans) == 0 {
		return nil
	}
	var st struct {
		Failure string     `json:"failure"`
		Summary storage.ID `json:"summary"`
	}
	if json.Unmarshal(w.State, &st) != nil || st.Failure != agent.CollapseDeclined && st.Summary == 0 {
		return nil
	}
	spans, sure, known := o.collapseSpans(w.ID)
	if !known {
		return nil
	}
	if st.Failure == agent.CollapseDeclined {
		if !possibleRuns(spans, sure, func(run []hookSpan) bool { declined, _, _ := collapseDecision(run); return declined }) {
			return o.fail(broke(ruleCollapseHooks, "%s settled collapse %d declined at %d; no decline hook may have run for it (hooks %v)", by, w.ID, seq, spanIDs(spans)))
		}
		return nil
	}
	supplied := 0 // the hook whose summary was published
	for _, x := range b.Writes {
		if x.Type != storage.WriteEntry || x.Entry == nil || x.Entry.ID != st.Summary {
			continue
		}
		for _, m := range x.Entry.Model {
			text := m.Content.TextOf()
			for _, s := range spans {
				if s.effect == "summary" && strings.Contains(text, hookSummary(s.id)) {
					supplied = s.id
				}
			}
		}
	}
	if !possibleRuns(spans, sure, func(run []hookSpan) bool {
		declined, summary, _ := collapseDecision(run)
		return !declined && summary == supplied
	}) {
		what := "the summarizer's summary"
		if supplied != 0 {
			what = fmt.Sprintf("hook %d's summary", supplied)
		}
		return o.fail(broke(ruleCollapseHooks, "%s published %s for collapse %d at %d; no set of its hooks that may have run gives that (hooks %v, sure %v)",
			by, what, w.ID, seq, spanIDs(spans), sure))
	}
	return nil
}
