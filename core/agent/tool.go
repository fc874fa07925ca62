package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
	"go.opentelemetry.io/otel/codes"
)

// ReplayPolicy says whether a tool may run again after a crash interrupted
// it: safe runs it again, never reports the interruption.
type ReplayPolicy string

const (
	ReplaySafe  ReplayPolicy = "safe"
	ReplayNever ReplayPolicy = "never"
)

// Tool is a function the model may call (§9.3). Execute reports failure by
// returning an error, which becomes an error result; everything else it
// produces goes through out.
type Tool struct {
	Definition ai.Tool
	Output     OutputLimits
	// Replay is ReplayNever when empty.
	Replay  ReplayPolicy
	Execute func(ctx context.Context, callID string, args json.RawMessage, out *ToolOutput, rt *ToolRuntime) error
}

// ToolRuntime is what a tool gets: its task's runtime, its blocking budget
// and the execution environment.
type ToolRuntime struct {
	*core.TaskRuntime
	Budget time.Duration
	env    ExecutionEnv
}

// Env is the execution environment the session was opened with (nil when
// none was given).
func (r *ToolRuntime) Env() ExecutionEnv { return r.env }

// toolRegistry is the catalogue of tools, in registration order.
type toolRegistry struct {
	byName  map[string]Tool
	schemas map[string]*argsSchema
	order   []string
}

func newToolRegistry(tools []Tool) (*toolRegistry, error) {
	r := &toolRegistry{byName: map[string]Tool{}, schemas: map[string]*argsSchema{}}
	for _, t := range tools {
		name := t.Definition.Name
		switch {
		case name == "":
			return nil, errors.New("agent: a tool without a name")
		case t.Execute == nil:
			return nil, fmt.Errorf("agent: tool %q has no Execute", name)
		case t.Replay != "" && t.Replay != ReplaySafe && t.Replay != ReplayNever:
			return nil, fmt.Errorf("agent: tool %q: unknown replay policy %q", name, t.Replay)
		}
		if _, dup := r.byName[name]; dup {
			return nil, fmt.Errorf("agent: tool %q is registered twice", name)
		}
		if len(t.Definition.Parameters) == 0 {
			t.Definition.Parameters = json.RawMessage(`{"type":"object"}`)
		}
		compiled, err := compileSchema(name, t.Definition.Parameters)
		if err != nil {
			return nil, fmt.Errorf("agent: tool %q: %w", name, err)
		}
		// Compacted, the parameters a request offers are byte for byte
		// those a context read back from storage offers.
		var compact bytes.Buffer
		if err := json.Compact(&compact, t.Definition.Parameters); err != nil {
			return nil, fmt.Errorf("agent: tool %q: parameters are not JSON: %w", name, err)
		}
		t.Definition.Parameters = compact.Bytes()
		r.byName[name] = t
		r.schemas[name] = compiled
		r.order = append(r.order, name)
	}
	return r, nil
}

// definitions returns the definitions of the selected tools in selection
// order (unknown names are skipped); nil selects every tool.
func (r *toolRegistry) definitions(selected []string) []ai.Tool {
	names := selected
	if names == nil {
		names = r.order
	}
	out := []ai.Tool{}
	for _, n := range names {
		if t, ok := r.byName[n]; ok && !slices.ContainsFunc(out, func(d ai.Tool) bool { return d.Name == n }) {
			out = append(out, t.Definition)
		}
	}
	return out
}

// Tool hook points (§8.7).
const (
	HookBeforeTool = "before_tool"
	HookAfterTool  = "after_tool"
)

// BeforeToolInput is what a before_tool handler sees; Args are the
// arguments as the handlers before it left them.
type BeforeToolInput struct {
	ConversationID storage.ID
	ToolCallID     string
	ToolName       string
	Args           json.RawMessage
}

// BeforeToolOutput rewrites the arguments or blocks the call.
type BeforeToolOutput struct {
	Args  json.RawMessage
	Block *ToolBlock
}

// ToolBlock stops a call before it runs; Terminate also stops the turn.
type ToolBlock struct {
	Reason    string
	Terminate bool
}

// AfterToolInput is what an after_tool handler sees.
type AfterToolInput struct {
	ConversationID storage.ID
	ToolCallID     string
	Output         ToolOutputState
}

// ToolState is a tool task's state.
type ToolState struct {
	Call      ai.Block   `json:"call"`
	Assistant storage.ID `json:"assistant"`
	// Offered is whether the call's tool was among those sent with the
	// request that produced it.
	Offered  bool            `json:"offered"`
	BudgetMs int64           `json:"budgetMs"`
	Args     json.RawMessage `json:"args,omitempty"`
	Replay   ReplayPolicy    `json:"replay,omitempty"`
	// Limits are the output limits the running call was given, so that
	// its output folds the same way after a restart.
	Limits OutputLimits `json:"limits,omitempty"`
	// Job is the job the call started, recorded in the commit that
	// created it, so that a fresh abort finds it (§6.3).
	Job *ToolJob `json:"job,omitempty"`
	// Output and Result are set when the call settles.
	Output *ToolOutputState `json:"output,omitempty"`
	Result storage.ID       `json:"result,omitempty"`
}

// ToolJob is a tool call's durable reference to the job it started and
// the job's cancellation policy: a call aborted while it still owns the
// job kills it, unless the job was detached (delegated, or started to run
// on its own).
type ToolJob struct {
	ID            storage.ID `json:"id"`
	CancelOnAbort bool       `json:"cancelOnAbort"`
	Detached      bool       `json:"detached,omitempty"`
}

// ToolKind is the built-in tool kind: planned → running → done, or aborted.
var ToolKind core.TaskKind = toolKind{core.Statuses{Name: ToolKindName, Initial: "planned", Roles: map[string]storage.TaskRole{
	"planned": storage.RoleStart, "running": storage.RoleInflight,
	"done": storage.RoleTerminal, "aborted": storage.RoleTerminal,
}}}

type toolKind struct{ core.Statuses }

// toolOutcomeView and toolLimitsView are the parts of a ToolState that
// post_tools (what a settled call's output asks of the turn) and a tool's
// preview (its output limits) read: decoding only them leaves the call, its
// arguments, the output's content and the rest as text, which decoding the
// whole state spent most of its time on.
type (
	toolOutcomeView struct {
		Output *toolOutcome `json:"output,omitempty"`
	}
	toolLimitsView struct {
		Limits OutputLimits `json:"limits,omitempty"`
	}
)

// toolOutcome is what post_tools acts on of a call's output: the
// ToolResultData fields of the same names.
type toolOutcome struct {
	AddedTools []string `json:"addedTools,omitempty"`
	Terminate  bool     `json:"terminate"`
	Handoff    string   `json:"handoff,omitempty"`
}

func decodeState[S any](t *storage.Task) (S, error) {
	var s S
	if len(t.State) > 0 {
		var err error
		if s, err = core.Unmarshal[S](t.State); err != nil {
			return s, fmt.Errorf("agent: task %d (%s) state: %w", t.ID, t.Kind, err)
		}
	}
	return s, nil
}

// call is what a tool task's method starts from: its state, the session's
// configuration and the registered tool the call names, if any.
func (k toolKind) call(task *storage.Task, rt *core.TaskRuntime) (st ToolState, cfg *config, tool Tool, known bool, err error) {
	if st, err = decodeState[ToolState](task); err != nil {
		return st, nil, tool, false, err
	}
	if cfg, err = configOf(rt.Harness()); err != nil {
		return st, nil, tool, false, err
	}
	tool, known = cfg.tools.byName[st.Call.Name]
	return st, cfg, tool, known, nil
}

func (k toolKind) Execute(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, cfg, tool, known, err := k.call(task, rt)
	if err != nil {
		return err
	}
	call := st.Call
	switch {
	case !known:
		return settleToolError(ctx, rt, task, st, fmt.Errorf("tool %q is not available", call.Name), nil)
	case !st.Offered:
		return settleToolError(ctx, rt, task, st, fmt.Errorf("tool %q was not offered to the model", call.Name), nil)
	}
	if err := cfg.tools.schemas[call.Name].validate(call.Arguments); err != nil {
		return settleToolError(ctx, rt, task, st, fmt.Errorf("invalid arguments for %s: %w", call.Name, err), nil)
	}
	args, block, err := beforeTool(ctx, rt, task, call)
	if err != nil {
		return err
	}
	if block != nil {
		return settleToolError(ctx, rt, task, st, fmt.Errorf("blocked: %s", block.Reason), &ToolOutputState{ToolResultData: ToolResultData{Terminate: block.Terminate}})
	}
	replay := tool.Replay
	if replay == "" && !plant.On("tool-replay-default-unrecorded") {
		replay = ReplayNever
	}
	var spent *BudgetError
	if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		// A tool call counts against the session's budget in the commit
		// that starts it, or is refused.
		var err error
		if spent, err = cfg.budget.spendToolCall(tx.Tx, rt.Now()); err != nil || spent != nil {
			return err
		}
		tx.Patch(task.ID, core.TaskPatch{Status: "running", State: toolStart{Args: args, Limits: tool.Output, Replay: replay}})
		return nil
	}); err != nil {
		return err
	}
	if spent != nil {
		return settleToolError(ctx, rt, task, st, spent, nil)
	}
	st.Args, st.Replay, st.Limits = args, replay, tool.Output
	return runTool(ctx, rt, cfg, task, st, tool)
}

// beforeTool runs the before_tool handlers, each seeing the arguments as
// the ones before it left them. It fails closed: a handler error blocks.
func beforeTool(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, call ai.Block) (json.RawMessage, *ToolBlock, error) {
	in := BeforeToolInput{ConversationID: task.ConversationID, ToolCallID: call.ID, ToolName: call.Name, Args: call.Arguments}
	var block *ToolBlock
	in, err := core.RunHookChain(ctx, rt, toolHooks, HookBeforeTool, in,
		func(in BeforeToolInput, out BeforeToolOutput, ok bool, err error) BeforeToolInput {
			switch {
			case block != nil && !plant.On("hook-block-takes-last"):
			case err != nil:
				rt.Report(&core.HookError{Kind: ToolKindName, Point: HookBeforeTool, Task: task.ID, Err: err})
				if !plant.On("before-tool-fails-open") {
					block = &ToolBlock{Reason: fmt.Sprintf("before_tool failed: %v", err)}
				}
			case ok && out.Block != nil:
				block = out.Block
			case ok && (out.Args != nil || plant.On("before-tool-empty-clears-args")):
				in.Args = out.Args
			}
			return in
		})
	return in.Args, block, err
}

var toolHooks = kindName(ToolKindName)

// runTool invokes the tool with a fresh sink and settles with its result.
func runTool(ctx context.Context, rt *core.TaskRuntime, cfg *config, task *storage.Task, st ToolState, tool Tool) error {
	progress, err := rt.Progress(ctx)
	if err != nil {
		return err
	}
	// A replay starts from a clean output: what the interrupted run wrote
	// is not the current run's.
	if rt.Method() == core.MethodRecover {
		rt.ResetPreview() // the interrupted call's output is gone from scratch, and so from the preview
		if !progress.Write(func(sc core.ScratchTx) error { sc.Clear(sinkOpsList.Address); return nil }) {
			if err := progress.Drain(); err != nil {
				return err
			}
			return ctx.Err()
		}
	}
	tr, err := rt.Preview(ctx)
	if err != nil {
		return err
	}
	out := &ToolOutput{fold: newOutputFold(st.Limits), progress: progress, preview: tr, watched: rt.PreviewWatched, Details: map[string]any{}}
	budget := time.Duration(st.BudgetMs) * time.Millisecond
	tctx, span := toolSpan(ctx, rt, st.Call.Name, st.Call.ID)
	runErr := invokeTool(tctx, tool, st.Call.ID, st.Args, out, &ToolRuntime{TaskRuntime: rt, Budget: budget, env: cfg.env})
	if runErr != nil {
		span.SetStatus(codes.Error, runErr.Error())
	}
	span.End()
	if err := progress.Drain(); err != nil {
		return err
	}
	if runErr != nil && (errors.Is(runErr, core.ErrTaskCancelled) || errors.Is(runErr, core.ErrClosed)) {
		return runErr
	}
	result := out.fold.result(out.Details, runErr)
	afterTool(ctx, rt, task, st.Call, result)
	return settleTool(ctx, rt, task, st, result, "done")
}

func invokeTool(ctx context.Context, tool Tool, callID string, args json.RawMessage, out *ToolOutput, rt *ToolRuntime) (err error) {
	defer func() {
		if p := recover(); p != nil {
			core.RethrowInvariant(p) // a tool that committed: the harness's bug
			err = fmt.Errorf("tool %s panicked: %v", tool.Definition.Name, p)
		}
	}()
	return tool.Execute(ctx, callID, args, out, rt)
}

// afterTool runs the after_tool handlers; failures are reported and skipped.
func afterTool(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, call ai.Block, result ToolOutputState) {
	in := AfterToolInput{ConversationID: task.ConversationID, ToolCallID: call.ID, Output: result}
	outs, _ := rt.RunHooks(ctx, toolHooks, HookAfterTool, in)
	for _, o := range outs {
		if o.Err != nil {
			rt.Report(&core.HookError{Kind: ToolKindName, Point: HookAfterTool, Task: task.ID, Err: o.Err})
		}
	}
}

// settleToolError settles a call that never ran with its own error result.
func settleToolError(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st ToolState, cause error, base *ToolOutputState) error {
	f := newOutputFold(OutputLimits{})
	if base != nil {
		f.state = *base
	}
	return settleTool(ctx, rt, task, st, f.result(nil, cause), "done")
}

// settleTool writes the result entry, the call's usage and the terminal
// status in one commit.
func settleTool(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st ToolState, out ToolOutputState, status string) error {
	return settleToolWith(ctx, rt, task, st, out, status, nil)
}

// settleToolWith is settleTool with also, in the same commit, whatever
// also writes.
func settleToolWith(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st ToolState, out ToolOutputState, status string, also func(tx *core.ConversationTx) error) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if out.Usage != nil && !(plant.On("tool-abort-drops-usage") && status != "done") {
			if err := recordUsage(tx.Tx, UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: ToolKindName, Outcome: status, Usage: out.Usage}); err != nil {
				return err
			}
		}
		msg := toolResultMessage(st.Call, out, rt.Now().UnixMilli())
		result := tx.Entry(core.ToolResultKind, core.EntryDraft{Key: st.Call.ID, Data: out.ToolResultData, Model: []ai.Message{msg}})
		state := toolSettlement{Output: out, Result: result}
		if out.Delegated != 0 && status == "done" {
			job, err := delegateJob(tx.Tx, task.ConversationID, out.Delegated, task.ID, st.Call.ID, rt.Now())
			if err != nil {
				return err
			}
			if job {
				// The call's own job, if it is the one delegated to, is
				// detached: the call no longer owns it.
				self, _, err := tx.GetTask(task.ID)
				if err != nil {
					return err
				}
				cur, err := decodeState[ToolState](self)
				if err != nil {
					return err
				}
				if cur.Job != nil && cur.Job.ID == out.Delegated {
					state.Job = &ToolJob{ID: cur.Job.ID, Detached: true}
				}
			}
		}
		tx.Settle(task.ID, status, state)
		return nil
	})
	return err
}

// Recover runs a call found running again when its tool declared replay
// safe; otherwise it settles with an interrupted error result built from
// what the sink made durable.
func (k toolKind) Recover(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, cfg, tool, known, err := k.call(task, rt)
	if err != nil {
		return err
	}
	if known && (st.Replay == ReplaySafe || plant.On("tool-recover-replays-never")) {
		return runTool(ctx, rt, cfg, task, st, tool)
	}
	out, err := durableOutput(ctx, rt, st.Limits)
	if err != nil {
		return err
	}
	return settleTool(ctx, rt, task, st, out.result(nil, errors.New("interrupted: the process stopped while the tool ran, and it is not safe to run again")), "done")
}

// Abort settles with an aborted error result built from the durable output
// and, in the same commit, marks the live foreground tasks of every
// conversation the call owns (a subagent it runs, §8.3): marks only, so the
// children's queues stay, and a child already idle is simply finished.
func (k toolKind) Abort(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[ToolState](task)
	if err != nil {
		return err
	}
	out, err := durableOutput(ctx, rt, st.Limits)
	if err != nil {
		return err
	}
	return settleToolWith(ctx, rt, task, st, out.result(nil, errors.New("aborted")), "aborted", func(tx *core.ConversationTx) error {
		for _, child := range task.Owns {
			if !plant.On("tool-abort-spares-children") {
				tx.MarkForeground(child)
			}
		}
		if j := st.Job; j != nil && j.CancelOnAbort && !j.Detached && !plant.On("tool-abort-spares-job") {
			return markIfLive(tx.Tx, j.ID)
		}
		return nil
	})
}

// markIfLive marks task id for cancellation in tx if it is live and not
// yet marked: on the line, so a task that ended meanwhile is simply
// finished, never an error (§6.3).
func markIfLive(tx *core.Tx, id storage.ID) error {
	t, ok, err := tx.GetTask(id)
	if err == nil && ok && t.Live() && !t.Abort {
		tx.Patch(id, core.TaskPatch{Abort: true})
	}
	return err
}

// durableOutput folds the sink operations the task's scratch holds.
func durableOutput(ctx context.Context, rt *core.TaskRuntime, limits OutputLimits) (*outputFold, error) {
	f := newOutputFold(limits)
	ops, err := readScratchList[SinkOp](ctx, rt, sinkOpsList.Address)
	for _, op := range ops {
		f.apply(op)
	}
	return f, err
}

// readScratchList reads a whole list from the task's scratch.
func readScratchList[T any](ctx context.Context, rt *core.TaskRuntime, addr storage.Address) ([]T, error) {
	var out []T
	_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
		var err error
		out, err = readScratchFrom[T](sc, addr)
		return err
	})
	return out, err
}

// readScratchFrom reads a whole scratch list through a reader.
func readScratchFrom[T any](sc core.ScratchReader, addr storage.Address) ([]T, error) {
	elems, err := storage.AllPages(func(c storage.Cursor) (storage.Page[storage.Element], error) {
		return sc.ReadList(addr, storage.ListQuery{Cursor: c})
	})
	if err != nil {
		return nil, err
	}
	out := make([]T, len(elems))
	for i, e := range elems {
		if err := json.Unmarshal(e.Value, &out[i]); err != nil {
			return nil, fmt.Errorf("agent: scratch %s element %d: %w", addr, e.ID, err)
		}
	}
	return out, nil
}

// InitPreview builds a tool's preview, its output state so far, from the
// sink operations in scratch.
func (toolKind) InitPreview(ctx context.Context, task *storage.Task, sc core.ScratchReader) (any, error) {
	ops, err := readScratchFrom[SinkOp](sc, sinkOpsList.Address)
	if err != nil || len(ops) == 0 {
		return noOutputPreview(err)
	}
	st, err := decodeState[toolLimitsView](task)
	if err != nil {
		return nil, err
	}
	return toolPreview(st.Limits, ops)
}

// noOutputJSON is the preview of no output, whatever the limits: what
// every call's preview starts from, built without decoding the call's
// limits and without encoding/json.
var noOutputJSON = func() []byte {
	raw, err := json.Marshal(newOutputFold(OutputLimits{}).result(nil, nil))
	if err != nil {
		panic(err)
	}
	return raw
}()

// noOutputValue is noOutputJSON as a preview value, parsed once.
var noOutputValue = func() any {
	v, err := delta.ParseValue(noOutputJSON)
	if err != nil {
		panic(err)
	}
	return v
}()

// noOutputPreview is a fresh preview of no output, or err when there is
// one.
func noOutputPreview(err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return delta.Clone(noOutputValue), nil
}

// toolPreview is the preview of a tool's output after ops: its output
// state so far, without the details the call records when it settles.
func toolPreview(limits OutputLimits, ops []SinkOp) (any, error) {
	f := newOutputFold(limits)
	for _, op := range ops {
		f.apply(op)
	}
	return delta.ValueOf(f.result(nil, nil))
}
