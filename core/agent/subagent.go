package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// SpawnContext is what a child starts from (§8.5).
type SpawnContext string

const (
	// SpawnFresh starts the child with an empty context.
	SpawnFresh SpawnContext = "fresh"
	// SpawnInherit starts it with the parent's context at the last
	// complete exchange before the launching one, as one head entry whose
	// messages the child's model reads first. The parent's system entries
	// are left out: the child writes its own baseline.
	SpawnInherit SpawnContext = "inherit"
)

// SpawnValue is a value a child starts with.
type SpawnValue struct {
	Addr  storage.Address // a conversation value (the child's scope is bound)
	Value any
}

// SpawnOptions configures a child conversation (§4.3, §9.1).
type SpawnOptions struct {
	Prompt  ai.Content
	Context SpawnContext // SpawnFresh when empty
	// Inherit lists the parent's conversation values the child starts with,
	// at their current value; a value the parent does not have is skipped.
	// Set writes values after them. Anything else is absent in the child.
	Inherit []storage.Address
	Set     []SpawnValue
}

// SpawnError is a child that could not be made, naming the parent.
type SpawnError struct {
	ConversationID storage.ID
	Err            error
}

func (e *SpawnError) Error() string {
	return fmt.Sprintf("agent: spawn from conversation %d: %v", e.ConversationID, e.Err)
}

func (e *SpawnError) Unwrap() error { return e.Err }

// Spawn creates a child conversation in one commit (§9.1): its values,
// its inherited context if asked, the prompt accepted and the first
// generation. It returns the child and the prompt's input. A host's child
// has no owner (no task made it), so it is outside this conversation's
// foreground set, drive and abort; a tool's child is owned by its task.
func (c *Conversation) Spawn(ctx context.Context, opts SpawnOptions) (child, input storage.ID, err error) {
	if err := opts.check(c.ID); err != nil {
		return 0, 0, err
	}
	_, err = c.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		child, input, err = c.h.cfg.spawnIn(tx.Tx, c.ID, 0, 0, opts, c.Harness().Runtime().Now())
		return err
	})
	return child, input, err
}

func (o SpawnOptions) check(parent storage.ID) error {
	switch {
	case len(o.Prompt.Blocks) == 0:
		return &SpawnError{ConversationID: parent, Err: errors.New("no prompt")}
	case o.Context != "" && o.Context != SpawnFresh && o.Context != SpawnInherit && !plant.On("spawn-context-unchecked"):
		return &SpawnError{ConversationID: parent, Err: fmt.Errorf("context %q: want %q or %q", o.Context, SpawnFresh, SpawnInherit)}
	}
	for _, a := range append(slices.Clone(o.Inherit), setAddrs(o.Set)...) {
		if a.Scope.Kind != storage.ScopeConversation {
			return &SpawnError{ConversationID: parent, Err: fmt.Errorf("%s is not a conversation value", a)}
		}
	}
	return nil
}

func setAddrs(set []SpawnValue) []storage.Address {
	out := make([]storage.Address, len(set))
	for i, v := range set {
		out[i] = v.Addr
	}
	return out
}

// spawnIn makes a child of parent in tx, owned by task owner (0: none). A
// child that inherits context takes the parent's context before entry
// before (0: all of it), to its last complete exchange.
func (c *config) spawnIn(tx *core.Tx, parent, owner, before storage.ID, opts SpawnOptions, now time.Time) (child, input storage.ID, err error) {
	child = tx.CreateConversation(core.ConversationSpec{Owner: owner})
	// Rewindable values precede every entry of the commit (§3.2).
	for _, a := range opts.Inherit {
		from := a
		from.Scope.ID = parent
		v, ok, err := tx.GetValue(from, 0)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			to := a
			to.Scope.ID = child
			tx.SetValue(to, v.Value)
		}
	}
	for _, sv := range opts.Set {
		to := sv.Addr
		to.Scope.ID = child
		tx.SetValue(to, sv.Value)
	}
	if opts.Context == SpawnInherit || plant.On("spawn-fresh-inherits") {
		msgs, through, err := inheritedContext(tx, parent, before)
		if err != nil {
			return 0, 0, err
		}
		if len(msgs) > 0 {
			text := fmt.Sprintf("the context of conversation %d through entry %d", parent, through)
			tx.Entry(core.HandoffKind, child, core.EntryDraft{Data: core.HandoffData{Text: text}, Model: msgs, Head: core.HeadSelf})
		}
	}
	draft := userDraft(opts.Prompt, now)
	input, _, err = c.acceptIn(tx, child, ModeFollowUp, true, draft, "")
	if err == nil {
		core.TxValue(tx, lastInputValue.In(child)).Set(input)
	}
	return child, input, err
}

// lastInputValue is a child's newest input from its parent (its prompt, then
// each send): what a wait reads the result of.
var lastInputValue = storage.ConversationValue[storage.ID]("pi.subagent.lastInput", storage.Sticky)

// inheritedContext is the parent's context before entry before (0: all of
// it), cut back to its last complete exchange, as request messages
// without the system entries (§8.5).
func inheritedContext(tx *core.Tx, parent, before storage.ID) ([]ai.Message, storage.ID, error) {
	cx, err := tx.DerivedContext(parent)
	if err != nil {
		return nil, 0, err
	}
	entries := cx.Entries
	if before != 0 {
		if i := slices.IndexFunc(entries, func(ce core.ContextEntry) bool { return ce.Entry.ID == before }); i >= 0 {
			entries = entries[:i]
		}
	}
	// The exchange in flight, the newest answer whose calls do not all have
	// a result after it, is not complete: cut before its assistant. Older
	// answers are complete, or were cut by a fork, which a request repairs
	// (§3.2); an answer that failed or was aborted is no exchange: its calls
	// never run (§2.2), and a request leaves it out. A result before the
	// answer answers an older call that used the same id.
	answered := map[string]bool{}
	for i := len(entries) - 1; i >= 0; i-- {
		m := entries[i].Messages
		if len(m) == 0 || entries[i].Entry.Kind != core.AssistantKind.Kind() && !plant.On("inherit-head-read-as-answer") || m[0].Role != ai.RoleAssistant {
			continue // a head's messages are a projected request: complete
		}
		if stop := m[0].StopReason; (stop == ai.StopError || stop == ai.StopAborted) && !plant.On("inherit-cut-at-failed-answer") {
			continue
		}
		after := entries[i+1:]
		if plant.On("inherit-answered-by-any-result") {
			after = entries
		}
		for _, ce := range after {
			if ce.Entry.Kind == core.ToolResultKind.Kind() {
				answered[ce.Entry.Key] = true
			}
		}
		if slices.ContainsFunc(m[0].ToolCalls(), func(b ai.Block) bool { return !answered[b.ID] }) {
			entries = entries[:i]
		}
		break
	}
	var kept []core.ContextEntry
	for _, ce := range entries {
		if ce.Entry.Kind != core.SystemKind.Kind() || plant.On("inherit-keeps-system") {
			kept = append(kept, ce)
		}
	}
	if len(kept) == 0 {
		return nil, 0, nil
	}
	msgs, err := (&core.Context{ConversationID: parent, Head: cx.Head, Entries: kept}).Request()
	if err != nil {
		return nil, 0, err
	}
	return msgs, kept[len(kept)-1].Entry.ID, nil
}

// userDraft is the entry of a user input accepted at now.
func userDraft(input ai.Content, now time.Time) AcceptedEntryDraft {
	msg := ai.Message{Role: ai.RoleUser, Content: input, Timestamp: now.UnixMilli()}
	return AcceptedEntryDraft{Kind: core.UserKind.Kind(), Model: []ai.Message{msg}}
}

// SubagentToolName is the built-in subagent tool's name (§8.5).
const SubagentToolName = "subagent"

// SubagentDepthMax bounds how deep children nest: a child at this depth
// gets no subagent of its own.
const SubagentDepthMax = 8

// subagentArgs are the subagent tool's arguments.
type subagentArgs struct {
	Command string       `json:"command"`
	Prompt  string       `json:"prompt"`
	Context SpawnContext `json:"context"`
	Tools   []string     `json:"tools"`
	ID      storage.ID   `json:"id"`
	Text    string       `json:"text"`
}

// subagentSchema holds each command to its arguments.
const subagentSchema = `{
  "type": "object",
  "required": ["command"],
  "properties": {
    "command": {"enum": ["run", "spawn", "send", "status", "wait", "stop"],
      "description": "run: start a subagent and wait for its answer; spawn: start one and go on; send: give one more input to a subagent; status: its latest entries and live work; wait: wait for the answer to its latest input; stop: cancel its work"},
    "prompt": {"type": "string", "minLength": 1, "description": "run, spawn: the subagent's task"},
    "context": {"enum": ["fresh", "inherit"], "description": "run, spawn: start empty (fresh, the default) or with this conversation so far"},
    "tools": {"type": "array", "items": {"type": "string"}, "description": "run, spawn: the tools it may use (default: this conversation's)"},
    "id": {"type": "integer", "minimum": 1, "description": "send, status, wait, stop: the subagent, as run or spawn named it"},
    "text": {"type": "string", "minLength": 1, "description": "send: the input"}
  },
  "allOf": [
    {"if": {"properties": {"command": {"enum": ["run", "spawn"]}}}, "then": {"required": ["prompt"]}},
    {"if": {"properties": {"command": {"const": "send"}}}, "then": {"required": ["id", "text"]}},
    {"if": {"properties": {"command": {"enum": ["status", "wait", "stop"]}}}, "then": {"required": ["id"]}}
  ],
  "additionalProperties": false
}`

// subagentParameters is subagentSchema compacted, once, as the program
// starts: every harness's subagent tool shares it, capped so that an
// append to one tool's copy reallocates.
var subagentParameters = func() []byte {
	var params bytes.Buffer
	if err := json.Compact(&params, []byte(subagentSchema)); err != nil {
		panic(err) // a constant
	}
	return params.Bytes()[:params.Len():params.Len()]
}()

// SubagentTool is the built-in subagent tool (§8.5): a subagent is a
// conversation, owned by the tool call that made it. It is safe to replay,
// since every command finds what an interrupted run already did: run and
// spawn record their child in the call's state in the commit that creates
// it, and send accepts under a request id derived from the call.
func SubagentTool() Tool {
	return Tool{
		Definition: ai.Tool{Name: SubagentToolName, Description: "Delegate work to a subagent: a separate conversation with its own context, which you can start, wait for, talk to and stop.",
			Parameters: subagentParameters},
		Replay:  ReplaySafe,
		Execute: runSubagent,
	}
}

// subagentState is what run and spawn record in their call's state.
type subagentState struct {
	Child storage.ID `json:"child"`
	Input storage.ID `json:"input"`
}

// subagentDetails are the details of every command's result: the child,
// the input concerned and its status.
type subagentDetails struct {
	ID     storage.ID  `json:"id"`
	Input  storage.ID  `json:"input,omitempty"`
	Status InputStatus `json:"status,omitempty"`
}

func runSubagent(ctx context.Context, _ string, raw json.RawMessage, out *ToolOutput, rt *ToolRuntime) error {
	var args subagentArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return err
	}
	cfg, err := configOf(rt.Harness())
	if err != nil {
		return err
	}
	switch args.Command {
	case "run", "spawn":
		st, err := startSubagent(ctx, cfg, rt, args)
		if err != nil {
			return err
		}
		if args.Command == "spawn" {
			out.Details["subagent"] = subagentDetails{ID: st.Child, Input: st.Input, Status: InputRunning}
			out.Write(fmt.Sprintf("Started subagent %d. It works on its own; use subagent status, wait, send or stop with id %d.", st.Child, st.Child))
			return nil
		}
		return awaitSubagent(ctx, rt, st.Child, st.Input, out)
	}
	child, err := ownChild(ctx, rt, args.ID)
	if err != nil {
		return err
	}
	switch args.Command {
	case "send":
		return sendSubagent(ctx, cfg, rt, child, args.Text, out)
	case "status":
		return subagentStatus(ctx, rt, child, out)
	case "wait":
		v, ok, err := child.Harness().Store().GetValue(ctx, lastInputValue.In(child.ID).Address, 0)
		if err != nil {
			return err
		}
		var input storage.ID
		if !ok || json.Unmarshal(v.Value, &input) != nil || plant.On("subagent-wait-finds-no-input") {
			return fmt.Errorf("subagent %d has no input to wait for", child.ID)
		}
		return awaitSubagent(ctx, rt, child.ID, input, out)
	case "stop":
		if err := child.Abort(ctx); err != nil {
			return err
		}
		out.Details["subagent"] = subagentDetails{ID: child.ID}
		out.Write(fmt.Sprintf("Stopped subagent %d: its running work is cancelled.", child.ID))
		return nil
	}
	return fmt.Errorf("unknown command %q", args.Command)
}

// startSubagent creates run's or spawn's child, once: a replay finds it in
// the call's state. The child starts with this conversation's generation
// and collapse settings and, unless the call names tools, its tool
// selection.
func startSubagent(ctx context.Context, cfg *config, rt *ToolRuntime, args subagentArgs) (subagentState, error) {
	task, _, err := rt.GetTask(ctx, rt.TaskID())
	if err != nil {
		return subagentState{}, err
	}
	var recorded struct {
		Subagent *subagentState `json:"subagent"`
	}
	if err := json.Unmarshal(task.State, &recorded); err == nil && recorded.Subagent != nil && !plant.On("subagent-replay-respawns") {
		return *recorded.Subagent, nil
	}
	depth, err := subagentDepth(ctx, rt)
	if err != nil {
		return subagentState{}, err
	}
	if depth >= SubagentDepthMax+b2i(plant.On("subagent-depth-off-by-one")) {
		return subagentState{}, fmt.Errorf("subagents nest at most %d deep", SubagentDepthMax)
	}
	var toolState ToolState
	if err := json.Unmarshal(task.State, &toolState); err != nil {
		return subagentState{}, err
	}
	opts := SpawnOptions{Prompt: ai.PlainText(args.Prompt), Context: args.Context, Inherit: []storage.Address{
		ModelValue.Address, ThinkingValue.Address, ProfileValue.Address, ToolBudgetValue.Address,
		CollapseThresholdValue.Address, CollapseKeepRecentValue.Address,
	}}
	if args.Tools != nil {
		for _, name := range args.Tools {
			if _, ok := cfg.tools.byName[name]; !ok {
				return subagentState{}, fmt.Errorf("tool %q is not available", name)
			}
		}
		opts.Set = append(opts.Set, SpawnValue{Addr: SelectedToolsValue.Address, Value: args.Tools})
	} else {
		opts.Inherit = append(opts.Inherit, SelectedToolsValue.Address)
	}
	var st subagentState
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		st.Child, st.Input, err = cfg.spawnIn(tx.Tx, tx.ID, rt.TaskID(), toolState.Assistant, opts, rt.Now())
		if err != nil {
			return err
		}
		tx.Patch(rt.TaskID(), core.TaskPatch{State: map[string]any{"subagent": st}})
		return nil
	})
	return st, err
}

// subagentDepth is how many owned conversations the calling one is below
// an independent conversation.
func subagentDepth(ctx context.Context, rt *ToolRuntime) (int, error) {
	store := rt.Harness().Store()
	depth, conv := 0, rt.ConversationID()
	for depth < SubagentDepthMax {
		convs, err := store.GetConversations(ctx, []storage.ID{conv})
		if err != nil {
			return 0, err
		}
		c, ok := convs[conv]
		if !ok || c.Owner == 0 {
			return depth, nil
		}
		tasks, err := store.GetTasks(ctx, []storage.ID{c.Owner})
		if err != nil {
			return 0, err
		}
		if plant.On("subagent-depth-one-level") {
			return depth + 1, nil
		}
		owner, ok := tasks[c.Owner]
		if !ok {
			return depth, nil
		}
		depth, conv = depth+1, owner.ConversationID
	}
	return depth, nil
}

// ownChild resolves an id the model passed back (§8.5): a conversation a
// task of this conversation owns, run's or spawn's.
func ownChild(ctx context.Context, rt *ToolRuntime, id storage.ID) (*core.Conversation, error) {
	store := rt.Harness().Store()
	convs, err := store.GetConversations(ctx, []storage.ID{id})
	if err != nil {
		return nil, err
	}
	c, ok := convs[id]
	if ok && c.Owner != 0 {
		tasks, err := store.GetTasks(ctx, []storage.ID{c.Owner})
		if err != nil {
			return nil, err
		}
		if owner, ok := tasks[c.Owner]; ok && (owner.ConversationID == rt.ConversationID() || plant.On("subagent-reaches-any-child")) {
			return rt.Conversation(ctx, id)
		}
	}
	return nil, fmt.Errorf("%d is not a subagent of this conversation", id)
}

// awaitSubagent drives a child until it is idle, within the call's budget,
// and writes the answer to input. A child still working when the budget
// runs out goes on without the call, which says how to reach it.
func awaitSubagent(ctx context.Context, rt *ToolRuntime, child, input storage.ID, out *ToolOutput) error {
	c, err := rt.Conversation(ctx, child)
	if err != nil {
		return err
	}
	waitCtx, expired := budgeted(ctx, rt)
	_, err = c.Drive(waitCtx)
	switch {
	case expired():
		out.Details["subagent"] = subagentDetails{ID: child, Input: input, Status: InputRunning}
		out.Write(fmt.Sprintf("Subagent %d is still working after %s; use subagent wait, status or stop with id %d.", child, rt.Budget, child))
		return nil
	case err != nil:
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		return err
	}
	r, ok, err := readInputResult(ctx, rt.Harness().Store(), child, input)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("subagent %d has no input %d", child, input)
	}
	out.Details["subagent"] = subagentDetails{ID: child, Input: input, Status: r.Status}
	if r.Status != InputDone {
		return fmt.Errorf("subagent %d's input %d ended %s: %s", child, input, r.Status, r.Reason)
	}
	answerID := r.ResultEntryID
	if plant.On("subagent-answers-its-input") {
		answerID = r.PlacementEntryID
	}
	answer, ok, err := rt.GetEntry(ctx, answerID)
	if err != nil || !ok || len(answer.Model) == 0 || plant.On("subagent-answer-unread") {
		return fmt.Errorf("subagent %d's answer %d cannot be read: %v", child, r.ResultEntryID, err)
	}
	out.Write(answer.Model[0].Content.TextOf())
	return nil
}

// budgeted is ctx bounded by the call's blocking budget (§8.3): a tool may
// not hold its turn indefinitely. expired reports whether the budget, not
// ctx, ended it.
func budgeted(ctx context.Context, rt *ToolRuntime) (context.Context, func() bool) {
	if rt.Budget <= 0 {
		return ctx, func() bool { return false }
	}
	waitCtx, cancel := context.WithCancel(ctx)
	timedOut := rt.Harness().Runtime().NewEvent("subagent-budget")
	rt.Harness().Runtime().Go(ctx, fmt.Sprintf("task%d.budget", rt.TaskID()), func(context.Context) {
		if rt.Harness().Runtime().Sleep(waitCtx, rt.Budget) == nil {
			timedOut.Set()
			cancel()
		}
	})
	return waitCtx, func() bool {
		defer cancel()
		return timedOut.IsSet() && ctx.Err() == nil
	}
}

// sendSubagent accepts text into a child, queued if it is busy. The
// request id is the call's, so a replay finds the first acceptance.
func sendSubagent(ctx context.Context, cfg *config, rt *ToolRuntime, child *core.Conversation, text string, out *ToolOutput) error {
	requestID := "subagent-send-" + strconv.FormatInt(int64(rt.TaskID()), 10)
	var input storage.ID
	var placed storage.ID
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		input, placed, err = cfg.acceptIn(tx.Tx, child.ID, ModeFollowUp, true, userDraft(ai.PlainText(text), rt.Now()), requestID)
		if err == nil && !plant.On("subagent-send-keeps-last-input") {
			core.TxValue(tx.Tx, lastInputValue.In(child.ID)).Set(input)
		}
		return err
	})
	status := InputRunning
	if placed == 0 != plant.On("subagent-send-status-inverted") {
		status = InputQueued
	}
	var dup *RequestAlreadyAcceptedError
	switch {
	case errors.As(err, &dup):
		// A replay: what the first acceptance wrote is not kept, so the
		// report is where the input stands now.
		input = dup.First.InputID
		r, ok, err := readInputResult(ctx, rt.Harness().Store(), child.ID, input)
		if err != nil {
			return err
		}
		if ok {
			status = r.Status
		}
	case err != nil:
		return err
	}
	out.Details["subagent"] = subagentDetails{ID: child.ID, Input: input, Status: status}
	out.Write(fmt.Sprintf("Sent to subagent %d as input %d (%s).", child.ID, input, status))
	return nil
}

// statusTail is how many of a child's newest entries status shows.
const statusTail = 5

// subagentStatus writes a child's newest entries and its live tasks.
func subagentStatus(ctx context.Context, rt *ToolRuntime, child *core.Conversation, out *ToolOutput) error {
	store := rt.Harness().Store()
	cursor := storage.Cursor{Before: storage.ID(1) << 62, Limit: statusTail}
	if plant.On("subagent-status-oldest") {
		cursor = storage.Cursor{Limit: statusTail}
	}
	page, err := store.ScanEntries(ctx, storage.EntryQuery{Cursor: cursor, ConversationID: child.ID})
	if err != nil {
		return err
	}
	live := true
	tasks, err := store.ScanTasks(ctx, storage.TaskQuery{Cursor: storage.Cursor{Limit: storage.PageLimitMax}, ConversationIDs: []storage.ID{child.ID}, Live: &live})
	if err != nil {
		return err
	}
	var b strings.Builder
	state := "idle"
	if len(tasks.Items) > 0 {
		state = "working"
	}
	fmt.Fprintf(&b, "Subagent %d is %s.", child.ID, state)
	for _, t := range tasks.Items {
		fmt.Fprintf(&b, "\nlive: %s %d (%s)", t.Kind, t.ID, t.Status)
	}
	for _, e := range page.Items {
		if len(e.Model) == 0 || e.Kind == core.SystemKind.Kind() {
			continue
		}
		m := e.Model[0]
		text := m.Content.TextOf()
		for _, call := range m.ToolCalls() {
			text += " [calls " + call.Name + "]"
		}
		fmt.Fprintf(&b, "\n%s %d: %s", m.Role, e.ID, text)
	}
	out.Details["subagent"] = subagentDetails{ID: child.ID}
	out.Write(b.String())
	return nil
}

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
