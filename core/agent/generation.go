package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/core/delta"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// GenerationState is a generation's state: its input group, the config it
// captured at creation, and where it is in its attempts.
type GenerationState struct {
	Inputs      []storage.ID     `json:"inputs"`
	Config      GenerationConfig `json:"config"`
	Attempt     int              `json:"attempt"` // attempts started
	MaxAttempts int              `json:"maxAttempts"`
	// NotBefore (ms) is when a retry or a deferred poll may go out.
	NotBefore int64        `json:"notBefore,omitempty"`
	Deferred  *ai.Deferred `json:"deferred,omitempty"`
	// AfterCollapse is the collapse whose settlement this generation
	// follows (threshold: it waits on it; overflow: it was created by it):
	// it does not collapse again before its request. OverflowRetried marks
	// the one retry an overflow gets.
	AfterCollapse   storage.ID `json:"afterCollapse,omitempty"`
	OverflowRetried bool       `json:"overflowRetried,omitempty"`
	// Set at settlement.
	Assistant storage.ID `json:"assistant,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	Collapse  storage.ID `json:"collapse,omitempty"` // the collapse it handed its turn to
}

// FramesList is where a generation streams its compact frames (§4.6): the
// current attempt's, cleared when the next begins; a reader of the
// session's batches replays the stream from it.
var FramesList = storage.ScratchList[ai.Frame]("pi.frames")

// DeferredPollDefault is how long a deferred response waits between polls
// when the provider does not say.
const DeferredPollDefault = time.Second

// GenerationKind is the built-in generation kind (§8.2): one stable task
// per turn, through retries and deferral.
var GenerationKind core.TaskKind = generationKind{core.Statuses{Name: GenerationKindName, Initial: "pending", Roles: map[string]storage.TaskRole{
	"pending": storage.RoleStart, "retry_wait": storage.RoleStart, "deferred": storage.RoleStart,
	"streaming": storage.RoleInflight,
	"done":      storage.RoleTerminal, "failed": storage.RoleTerminal, "aborted": storage.RoleTerminal,
}}}

type generationKind struct{ core.Statuses }

// Config declares the values the generation reads (§5.2).
func (generationKind) Config() map[string]storage.Address {
	return map[string]storage.Address{
		"model": ModelValue.Address, "thinking": ThinkingValue.Address, "selectedTools": SelectedToolsValue.Address,
		"profile": ProfileValue.Address, "budgetMs": ToolBudgetValue.Address,
	}
}

// createGeneration creates the generation that answers an input group,
// capturing the conversation's config now; adjust changes what this commit
// changes before the write lands.
func (c *config) createGeneration(tx *core.Tx, conv storage.ID, inputs []storage.ID, adjust func(*GenerationConfig)) (storage.ID, error) {
	cfg, err := readConfig(tx, conv)
	if err != nil {
		return 0, err
	}
	if adjust != nil {
		adjust(&cfg)
	}
	st := GenerationState{Inputs: inputs, Config: cfg, MaxAttempts: c.retry.attempts()}
	id := tx.Task(kindName(GenerationKindName), core.TaskSpec{ConversationID: conv, State: st})
	if len(inputs) > 0 && tx.Tracing() {
		startTurn(tx, conv, inputs, time.Time{})
		tx.HomeTask(id, turnKey(conv, inputs[0]))
	}
	return id, nil
}

// BeforeRequestInput is what a before_request handler sees: the request as
// the handlers before it left it. Its messages share memory with the
// session's entries and cached context: a handler that changes them returns
// a new request with a new Messages slice and never writes into this one.
type BeforeRequestInput struct {
	ConversationID storage.ID
	Request        ai.Request
}

// BeforeRequestOutput replaces the request when Request is set.
type BeforeRequestOutput struct {
	Request *ai.Request
}

// AfterResponseInput is what an after_response handler sees.
type AfterResponseInput struct {
	ConversationID storage.ID
	Response       ai.Message
	Usage          *ai.Usage
}

// OnYieldInput is what an on_yield handler sees: the final answer about to
// settle the turn.
type OnYieldInput struct {
	ConversationID storage.ID
	Answer         ai.Message
}

// OnYieldOutput asks for an explicit continuation that keeps the input
// group; Continue is the text the model gets.
type OnYieldOutput struct {
	Continue string
}

func (k generationKind) Execute(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[GenerationState](task)
	if err != nil {
		return err
	}
	if st.NotBefore > 0 {
		if err := rt.Sleep(ctx, time.UnixMilli(st.NotBefore)); err != nil {
			return err
		}
	}
	return k.attempt(ctx, task, rt, st)
}

// attempt runs one attempt: bring the model's instructions up to date,
// record the intent, stream, and commit the outcome.
func (k generationKind) attempt(ctx context.Context, task *storage.Task, rt *core.TaskRuntime, st GenerationState) error {
	cfg, err := configOf(rt.Harness())
	if err != nil {
		return err
	}
	conv := task.ConversationID
	model, provider, err := cfg.models.Resolve(st.Config.Model)
	if err != nil {
		return k.fail(ctx, rt, task, st, nil, err.Error(), nil)
	}
	var deferred ai.DeferredProvider
	if st.Deferred != nil {
		var ok bool
		if deferred, ok = provider.(ai.DeferredProvider); !ok {
			return k.fail(ctx, rt, task, st, nil, fmt.Sprintf("provider of model %q cannot fetch deferred responses", model.ID), nil)
		}
	}
	want, err := cfg.systemInstructions(ctx, rt, st.Config)
	if err != nil {
		return err
	}
	if task.Status != "pending" {
		// What is on disk is always the current attempt's (§4.6), and so is
		// the preview: no frames, no partial answer (InitPreview).
		rt.ResetPreview()
		if _, err := rt.Scratch(ctx, func(sc core.ScratchTx) error { sc.Clear(FramesList.Address); return nil }); err != nil {
			return err
		}
	}
	var msgs []ai.Message
	var tools []ai.Tool
	collapsed := false
	var spent *BudgetError
	if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if collapsed, err = k.collapseFirst(tx.Tx, cfg, task, st, model); err != nil || collapsed {
			return err
		}
		// A query (and, on the first attempt, a turn) counts against the
		// session's budget in the commit that starts it, or is refused.
		if st.Deferred == nil {
			if spent, err = cfg.budget.spendQuery(tx.Tx, rt.Now(), st.Attempt == 0); err != nil || spent != nil {
				return err
			}
		}
		fold, err := tx.SystemFold(conv)
		if err != nil {
			return err
		}
		var pending []core.ContextEntry
		tools = fold.Tools
		if change, ok := systemChange(fold, want); ok {
			id := core.AppendSystem(tx.Tx, conv, change, systemMessage(change, rt.Now().UnixMilli()))
			if e, ok := tx.PendingEntry(id); ok {
				pending = append(pending, core.ContextEntry{Entry: e, Messages: e.Model})
			}
			tools = foldedTools(fold, change)
		}
		if msgs, err = tx.RequestMessages(conv, pending); err != nil {
			return err
		}
		tx.Patch(task.ID, core.TaskPatch{Status: "streaming", State: attemptStart{Attempt: st.Attempt + 1}})
		return nil
	}); err != nil || collapsed {
		return err
	}
	if spent != nil {
		return k.fail(ctx, rt, task, st, nil, spent.Error(), nil)
	}
	st.Attempt++
	req := ai.Request{Model: model, Messages: msgs, Tools: tools, ThinkingLevel: st.Config.Thinking,
		SessionID: "conversation-" + strconv.FormatInt(int64(conv), 10)}
	if req, err = k.beforeRequest(ctx, rt, task, req); err != nil {
		return err
	}
	var stream ai.Stream
	pctx, span := providerSpan(ctx, rt, model, st.Attempt, deferred != nil)
	if deferred != nil {
		stream = deferred.FetchDeferred(pctx, *st.Deferred)
	} else {
		stream = provider.Stream(pctx, req)
	}
	final, err := streamFrames(pctx, rt, stream)
	endProviderSpan(span, final, err)
	if err != nil {
		return err
	}
	k.afterResponse(ctx, rt, task, final)
	return k.settle(ctx, rt, cfg, task, st, req, model, final)
}

// beforeRequest runs the before_request handlers, each seeing the request
// as the ones before it left it; failures are reported and skipped.
func (k generationKind) beforeRequest(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, req ai.Request) (ai.Request, error) {
	in := BeforeRequestInput{ConversationID: task.ConversationID, Request: req}
	var last *ai.Request
	in, err := core.RunHookChain(ctx, rt, generationHooks, HookBeforeRequest, in,
		func(in BeforeRequestInput, out BeforeRequestOutput, ok bool, err error) BeforeRequestInput {
			if err != nil {
				rt.Report(&core.HookError{Kind: GenerationKindName, Point: HookBeforeRequest, Task: task.ID, Err: err})
			} else if ok && out.Request != nil && plant.On("request-hooks-see-original") {
				last = out.Request
			} else if ok && out.Request != nil {
				in.Request = *out.Request
			}
			return in
		})
	if last != nil {
		return *last, err
	}
	return in.Request, err
}

func (k generationKind) afterResponse(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, m *ai.Message) {
	if plant.On("after-response-skips-calls") && len(m.ToolCalls()) > 0 {
		return
	}
	in := AfterResponseInput{ConversationID: task.ConversationID, Response: *m, Usage: m.Usage}
	if plant.On("after-response-no-usage") {
		in.Usage = nil
	}
	outs, _ := rt.RunHooks(ctx, generationHooks, HookAfterResponse, in)
	for _, o := range outs {
		if o.Err != nil {
			rt.Report(&core.HookError{Kind: GenerationKindName, Point: HookAfterResponse, Task: task.ID, Err: o.Err})
		}
	}
}

// streamFrames reads a stream to its end, writing each event's compact
// frame to scratch, and returns the final message. A stream that breaks
// the event protocol ends as an error message: a provider failure, not a
// session fault.
func streamFrames(ctx context.Context, rt *core.TaskRuntime, stream ai.Stream) (*ai.Message, error) {
	progress, err := rt.Progress(ctx)
	if err != nil {
		return nil, err
	}
	tr, err := rt.Preview(ctx)
	if err != nil {
		return nil, err
	}
	preview := &streamPreview{tr: tr, watched: rt.PreviewWatched}
	var enc ai.FrameEncoder
	var final *ai.Message
	for final == nil {
		ev, ok := stream.Next(ctx)
		if !ok {
			final = &ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: "the stream ended without a final event"}
			break
		}
		if ev.Terminal() {
			final = ev.Message
			if final == nil {
				final = &ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: "the final event carries no message"}
			}
			break
		}
		frame, emit, err := enc.Encode(ev)
		if err != nil {
			final = &ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: err.Error()}
			break
		}
		if emit {
			if err := preview.apply(frame); err != nil {
				return nil, err
			}
			progress.Write(func(sc core.ScratchTx) error { sc.Append(FramesList.Address, frame); return nil })
		}
	}
	if err := progress.Drain(); err != nil {
		return nil, err
	}
	if _, err := final.Canonical(); err != nil {
		// One no store could read back (arguments that are not JSON, a
		// call without an id): the provider failed.
		final = &ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: "the final message is malformed: " + err.Error()}
	}
	m := *final
	return &m, nil
}

// settle commits an attempt's outcome (§8.2).
func (k generationKind) settle(ctx context.Context, rt *core.TaskRuntime, cfg *config, task *storage.Task, st GenerationState, req ai.Request, model ai.Model, m *ai.Message) error {
	row := UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: GenerationKindName, Model: model.ID, Attempt: st.Attempt, Usage: m.Usage}
	if plant.On("usage-row-attempt-from-zero") {
		row.Attempt--
	}
	switch m.StopReason {
	case ai.StopDeferred:
		if m.Deferred == nil {
			return k.fail(ctx, rt, task, st, m, "a deferred response without a handle", &row)
		}
		wait := time.Duration(m.Deferred.PollAfterMs) * time.Millisecond
		if wait <= 0 && !plant.On("generation-poll-no-interval") {
			wait = DeferredPollDefault
		}
		row.Outcome = "deferred"
		return k.wait(ctx, rt, task, "deferred", rt.Now().Add(wait), m.Deferred, row)
	case ai.StopError, ai.StopAborted:
		if m.RawStopReason == ai.RawRateLimited && (st.Attempt < st.MaxAttempts || plant.On("generation-retry-past-budget") && st.Attempt == st.MaxAttempts) {
			row.Outcome = "retry"
			n := st.Attempt
			if plant.On("retry-backoff-one-behind") {
				n--
			}
			return k.wait(ctx, rt, task, "retry_wait", rt.Now().Add(cfg.retry.delay(n)), nil, row)
		}
		if m.RawStopReason == ai.RawContextOverflow && !st.OverflowRetried {
			return k.overflow(ctx, rt, cfg, task, st, model, m, row)
		}
		reason := m.ErrorMessage
		switch {
		case m.RawStopReason == ai.RawRateLimited:
			reason = fmt.Sprintf("retry budget of %d attempts exhausted: %s", st.MaxAttempts, m.ErrorMessage)
		case m.RawStopReason == ai.RawContextOverflow:
			reason = "context overflow: " + m.ErrorMessage
		case reason == "":
			reason = string(m.StopReason)
		}
		return k.fail(ctx, rt, task, st, m, reason, &row)
	}
	row.Outcome = "done"
	if calls := m.ToolCalls(); len(calls) > 0 {
		return k.settleCalls(ctx, rt, task, st, req, m, calls, row)
	}
	return k.settleFinal(ctx, rt, cfg, task, st, m, row)
}

// collapseFirst is the threshold check at the top of a turn's first attempt
// (§8.2): when the context would fill more of the model's window than the
// conversation's threshold allows, the commit creates a collapse and a
// generation after it that carries the turn, and settles this one. It does
// nothing for a generation that follows a collapse (so a declined or stale
// one cannot loop), while another collapse runs, or when nothing can be
// cut; the request then goes out as it is.
func (k generationKind) collapseFirst(tx *core.Tx, cfg *config, task *storage.Task, st GenerationState, model ai.Model) (bool, error) {
	conv := task.ConversationID
	if task.Status != "pending" || st.Attempt > 0 || st.AfterCollapse != 0 || model.ContextWindow <= 0 {
		return false, nil
	}
	set, err := readCollapseSettings(tx, conv)
	if err != nil || set.Threshold <= 0 {
		return false, err
	}
	cx, err := tx.DerivedContext(conv)
	if err != nil {
		return false, err
	}
	budget := set.Threshold * float64(model.ContextWindow)
	if est := float64(estimateContext(cx, nil, nil)); est <= budget || plant.On("threshold-twice-the-budget") && est <= 2*budget {
		return false, nil
	}
	collapse, ok, err := cfg.startCollapse(tx, conv, CollapseThreshold, automaticKeep(set, budget), "", nil)
	var busy *CollapseError
	switch {
	case errors.As(err, &busy):
		return false, nil
	case err != nil || !ok:
		return false, err
	}
	next := st
	next.AfterCollapse = collapse
	tx.Task(kindName(GenerationKindName), core.TaskSpec{ConversationID: conv, State: next, After: []storage.ID{collapse}})
	tx.Settle(task.ID, "done", map[string]any{"collapse": collapse, "reason": "threshold: the context was collapsed first"})
	return true, nil
}

// overflow hands an overflowed turn to a collapse (§8.2): the generation
// settles failed(overflow) and the collapse, foreground, owns the input
// group until its settlement creates the one retry. Nothing live waits on
// the collapse. While another collapse runs, the retry waits on that one
// instead; with nothing to cut the turn fails as any error does.
func (k generationKind) overflow(ctx context.Context, rt *core.TaskRuntime, cfg *config, task *storage.Task, st GenerationState, model ai.Model, m *ai.Message, row UsageRow) error {
	conv := task.ConversationID
	handed := false
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		set, err := readCollapseSettings(tx.Tx, conv)
		if err != nil {
			return err
		}
		next := st
		next.OverflowRetried = true
		if model.ContextWindow > 0 {
			set = automaticKeep(set, float64(model.ContextWindow))
		}
		collapse, ok, err := cfg.startCollapse(tx.Tx, conv, CollapseOverflow, set, "", &next)
		var busy *CollapseError
		switch {
		case errors.As(err, &busy):
			next.AfterCollapse = busy.Task
			tx.Task(kindName(GenerationKindName), core.TaskSpec{ConversationID: conv, State: next, After: []storage.ID{busy.Task}})
			collapse = busy.Task
		case err != nil || !ok:
			return err
		}
		row.Outcome = "overflow"
		if err := recordUsage(tx.Tx, row); err != nil {
			return err
		}
		handed = true
		tx.Settle(task.ID, "failed", map[string]any{"reason": "overflow: " + m.ErrorMessage, "collapse": collapse})
		return nil
	})
	if err != nil || handed || plant.On("overflow-unsettled") {
		return err
	}
	return k.fail(ctx, rt, task, st, m, "context overflow: "+m.ErrorMessage+"; nothing to collapse", &row)
}

// wait records a retry or a deferred response: the status that makes the
// driver execute the task again, and when.
func (k generationKind) wait(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, status string, notBefore time.Time, handle *ai.Deferred, row UsageRow) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if err := recordUsage(tx.Tx, row); err != nil {
			return err
		}
		tx.Patch(task.ID, core.TaskPatch{Status: status, State: map[string]any{"notBefore": notBefore.UnixMilli(), "deferred": handle}})
		return nil
	})
	return err
}

// settleCalls publishes an exchange: the assistant, one tool task per call
// and exactly one post_tools carrying the input group (§5.5).
func (k generationKind) settleCalls(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st GenerationState, req ai.Request, m *ai.Message, calls []ai.Block, row UsageRow) error {
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Name] = true
	}
	if plant.On("tool-offered-by-selection") {
		cfg, _ := configOf(rt.Harness())
		clear(offered)
		for _, t := range cfg.tools.definitions(st.Config.SelectedTools) {
			offered[t.Name] = true
		}
	}
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if err := recordUsage(tx.Tx, row); err != nil {
			return err
		}
		assistant := core.AppendAssistant(tx.Tx, task.ConversationID, *m)
		tools := make([]storage.ID, len(calls))
		for i, call := range calls {
			tools[i] = tx.Task(kindName(ToolKindName), core.TaskSpec{State: ToolState{
				Call: call, Assistant: assistant, Offered: offered[call.Name], BudgetMs: st.Config.BudgetMs}})
		}
		tx.Task(kindName(PostToolsKindName), core.TaskSpec{After: tools, State: PostToolsState{
			Assistant: assistant, Tools: tools, Inputs: st.Inputs}})
		tx.Settle(task.ID, "done", answeredWith{assistant})
		return nil
	})
	return err
}

// settleFinal settles a final answer. Without a continuation it resolves
// every input of the group to the answer, places queued writes, then
// starts the next group from queued steer and followUp input. An on_yield
// continuation keeps the group instead.
func (k generationKind) settleFinal(ctx context.Context, rt *core.TaskRuntime, cfg *config, task *storage.Task, st GenerationState, m *ai.Message, row UsageRow) error {
	conv := task.ConversationID
	cont, err := k.onYield(ctx, rt, task, m)
	if err != nil {
		return err
	}
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if err := recordUsage(tx.Tx, row); err != nil {
			return err
		}
		answer := core.AppendAssistant(tx.Tx, conv, *m)
		if cont != "" {
			core.AppendUser(tx.Tx, conv, ai.UserText(cont, rt.Now().UnixMilli()))
			joins := []InputMode{ModeSteer}
			if plant.On("continuation-joins-followup") {
				joins = append(joins, ModeFollowUp)
			}
			joined, err := placeAtBoundary(tx.Tx, conv, []InputMode{ModeWrite}, joins)
			if err != nil {
				return err
			}
			if _, err := cfg.createGeneration(tx.Tx, conv, append(st.Inputs, joined...), nil); err != nil {
				return err
			}
		} else {
			if err := resolveInputs(tx.Tx, conv, st.Inputs, func(r InputResult) InputResult {
				r.Status, r.ResultEntryID = InputDone, answer
				if plant.On("input-done-names-placement") {
					r.ResultEntryID = r.PlacementEntryID
				}
				return r
			}); err != nil {
				return err
			}
			next, since, err := placeGroup(tx.Tx, conv, []InputMode{ModeWrite}, []InputMode{ModeSteer, ModeFollowUp})
			if err != nil {
				return err
			}
			if len(next) > 0 {
				startTurn(tx.Tx, conv, next, since)
				if _, err := cfg.createGeneration(tx.Tx, conv, next, nil); err != nil {
					return err
				}
			}
		}
		tx.Settle(task.ID, "done", answeredWith{answer})
		return nil
	})
	return err
}

// onYield asks the on_yield handlers whether the turn should continue; the
// first continuation wins, failures are reported and skipped.
func (k generationKind) onYield(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, m *ai.Message) (string, error) {
	outs, err := rt.RunHooks(ctx, generationHooks, HookOnYield, OnYieldInput{ConversationID: task.ConversationID, Answer: *m})
	if err != nil {
		return "", err
	}
	for _, o := range outs {
		out, ok, err := core.HookResult[OnYieldOutput](o)
		if err != nil {
			rt.Report(&core.HookError{Kind: GenerationKindName, Point: HookOnYield, Task: task.ID, Err: err})
			continue
		}
		if ok && out.Continue != "" {
			return out.Continue, nil
		}
	}
	return "", nil
}

// fail settles a failed generation: the failed response is kept for
// display (requests exclude it), every input of the group fails, queued
// writes are placed, and nothing else starts.
func (k generationKind) fail(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st GenerationState, m *ai.Message, reason string, row *UsageRow) error {
	conv := task.ConversationID
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if row != nil {
			row.Outcome = "failed"
			if err := recordUsage(tx.Tx, *row); err != nil {
				return err
			}
		}
		state := map[string]any{"reason": reason}
		if m != nil && !plant.On("generation-fail-drops-answer") {
			state["assistant"] = core.AppendAssistant(tx.Tx, conv, *m)
		}
		inputs := st.Inputs
		if plant.On("generation-fail-forgets-inputs") {
			inputs = nil
		}
		if err := resolveInputs(tx.Tx, conv, inputs, func(r InputResult) InputResult {
			r.Status, r.Reason = InputFailed, reason
			return r
		}); err != nil {
			return err
		}
		if !plant.On("generation-fail-keeps-writes") {
			if _, err := placeAtBoundary(tx.Tx, conv, []InputMode{ModeWrite}); err != nil {
				return err
			}
		}
		tx.Settle(task.ID, "failed", state)
		return nil
	})
	return err
}

// Recover handles a generation found streaming: frames in scratch are
// published as the partial answer and the turn settles failed, without
// tools or results; with no frames the attempt is retried within budget.
func (k generationKind) Recover(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[GenerationState](task)
	if err != nil {
		return err
	}
	partial, err := durablePartial(ctx, rt)
	if err != nil {
		return err
	}
	model, err := resolvedModel(rt, st)
	if err != nil {
		return err
	}
	const interrupted = "interrupted: the process stopped while the response streamed"
	if partial == nil || len(partial.Content.Blocks) == 0 {
		// Nothing of the answer streamed (at most the start event): there is
		// no partial to publish, so the attempt is retried.
		if st.Attempt < st.MaxAttempts || plant.On("recover-retries-past-budget") && st.Attempt == st.MaxAttempts {
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				// The interrupted attempt may have cost something nobody
				// reported: unknown, never zero.
				row := k.attemptRow(task, st, model, partial)
				row.Outcome = "interrupted"
				if plant.On("recover-row-says-retry") {
					row.Outcome = "retry"
				}
				if err := recordUsage(tx.Tx, *row); err != nil {
					return err
				}
				tx.Patch(task.ID, core.TaskPatch{Status: "retry_wait", State: map[string]any{"notBefore": rt.Now().UnixMilli()}})
				return nil
			})
			return err
		}
		return k.fail(ctx, rt, task, st, nil, interrupted+"; retry budget exhausted", k.attemptRow(task, st, model, partial))
	}
	partial.StopReason, partial.ErrorMessage = ai.StopError, interrupted
	return k.fail(ctx, rt, task, st, partial, interrupted, k.attemptRow(task, st, model, partial))
}

// resolvedModel is the id of the model an attempt used: the config's, or
// the default model when the config names none (a reference the session
// no longer serves keeps its recorded id).
func resolvedModel(rt *core.TaskRuntime, st GenerationState) (string, error) {
	cfg, err := configOf(rt.Harness())
	if err != nil {
		return "", err
	}
	if m, _, err := cfg.models.Resolve(st.Config.Model); err == nil {
		return m.ID, nil
	}
	return st.Config.Model.ModelID, nil
}

// attemptRow is the usage row of an attempt cut short: its usage is what
// the frames reported, if anything, and otherwise unknown.
func (k generationKind) attemptRow(task *storage.Task, st GenerationState, model string, partial *ai.Message) *UsageRow {
	row := &UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: GenerationKindName,
		Model: model, Attempt: st.Attempt}
	if partial != nil && partial.Usage != nil && partial.Usage.TotalTokens > 0 {
		u := *partial.Usage
		row.Usage = &u
	}
	return row
}

// Abort settles a marked generation in one commit: the partial answer (if
// any) for display, cancelled input results, the attempt's known usage.
func (k generationKind) Abort(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[GenerationState](task)
	if err != nil {
		return err
	}
	model, err := resolvedModel(rt, st)
	if err != nil {
		return err
	}
	var partial *ai.Message
	if task.Status == "streaming" {
		if partial, err = durablePartial(ctx, rt); err != nil {
			return err
		}
	}
	conv := task.ConversationID
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if task.Status == "streaming" {
			row := k.attemptRow(task, st, model, partial)
			row.Outcome = "aborted"
			if err := recordUsage(tx.Tx, *row); err != nil {
				return err
			}
		}
		state := map[string]any{"reason": "aborted"}
		if partial != nil && len(partial.Content.Blocks) > 0 {
			partial.StopReason, partial.ErrorMessage = ai.StopAborted, "aborted"
			state["assistant"] = core.AppendAssistant(tx.Tx, conv, *partial)
		}
		if err := resolveInputs(tx.Tx, conv, st.Inputs, func(r InputResult) InputResult {
			r.Status, r.Reason = InputCancelled, "aborted"
			return r
		}); err != nil {
			return err
		}
		tx.Settle(task.ID, "aborted", state)
		return nil
	})
	return err
}

// InitPreview builds a generation's preview, its partial answer, from the
// frames in scratch (null before the stream starts).
func (generationKind) InitPreview(ctx context.Context, task *storage.Task, sc core.ScratchReader) (any, error) {
	frames, err := readScratchFrom[ai.Frame](sc, FramesList.Address)
	if err != nil {
		return nil, err
	}
	m, err := ai.ReduceFrames(frames)
	if err != nil || m == nil {
		return nil, err
	}
	return delta.ValueOf(m)
}

// durablePartial rebuilds the partial answer from the frames in scratch;
// nil when the stream had not started.
func durablePartial(ctx context.Context, rt *core.TaskRuntime) (*ai.Message, error) {
	frames, err := readScratchList[ai.Frame](ctx, rt, FramesList.Address)
	if err != nil {
		return nil, err
	}
	m, err := ai.ReduceFrames(frames)
	if err != nil {
		return nil, fmt.Errorf("agent: task %d frames: %w", rt.TaskID(), err)
	}
	return publishable(m), nil
}

// publishable is the partial m less the blocks no store could read back
// (a tool call the stream never gave an id), which an entry may not hold
// (ai.Message.Canonical); nil when nothing of it could be published.
func publishable(m *ai.Message) *ai.Message {
	if m == nil {
		return nil
	}
	if _, err := m.Canonical(); err == nil {
		return m
	}
	out := *m
	out.Content.Blocks = slices.DeleteFunc(slices.Clone(m.Content.Blocks), func(b ai.Block) bool {
		_, err := ai.Message{Role: ai.RoleAssistant, Content: ai.Blocks(b)}.Canonical()
		return err != nil
	})
	if _, err := out.Canonical(); err != nil {
		return nil
	}
	return &out
}
