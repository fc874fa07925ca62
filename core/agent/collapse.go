package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// CollapseKindName is the built-in collapse kind's name (§9.5).
const CollapseKindName = "collapse"

// CollapseReason is why a collapse runs; before_collapse handlers see it.
type CollapseReason string

// The reasons (§8.7).
const (
	CollapseManual    CollapseReason = "manual"
	CollapseThreshold CollapseReason = "threshold"
	CollapseOverflow  CollapseReason = "overflow"
)

// Why a collapse settled without publishing, in its state's failure.
const (
	CollapseStale          = "stale"       // a newer head landed first
	CollapseDeclined       = "declined"    // a before_collapse handler declined
	CollapseProviderFailed = "provider"    // the summarizer failed
	CollapseInterrupted    = "interrupted" // the process stopped, retries spent
	CollapseAborted        = "aborted"
)

// The collapse settings (§8.4): rewindable conversation values, so that a
// fork takes them as they were at its point. Threshold is the fraction of
// the model's context window past which a generation collapses the context
// before its request (0, the default, turns it off); KeepRecent is how many
// tokens of the newest context a collapse keeps as they are.
var (
	CollapseThresholdValue  = storage.ConversationValue[float64]("pi.collapse.threshold", storage.Rewind)
	CollapseKeepRecentValue = storage.ConversationValue[int64]("pi.collapse.keepRecent", storage.Rewind)
)

// CollapseKeepRecentDefault is KeepRecent when the conversation sets none.
const CollapseKeepRecentDefault = 20_000

// CollapseSettings are a conversation's collapse settings as read.
type CollapseSettings struct {
	Threshold  float64
	KeepRecent int64
}

// RuleCollapseSetting is the rule a batch breaks when it writes a collapse
// setting out of range.
const RuleCollapseSetting core.Rule = "collapse-setting"

// checkCollapseSettings holds every write of a collapse setting to its
// range: a threshold from 0 to 1, a non-negative count of tokens.
func checkCollapseSettings(_ context.Context, _ storage.Storage, batch storage.CommitBatch) error {
	for _, w := range batch.Writes {
		if w.Type != storage.WriteValueSet || w.Addr == nil || w.Addr.Scope.Kind != storage.ScopeConversation {
			continue
		}
		switch w.Addr.Namespace {
		case CollapseThresholdValue.Namespace:
			var f float64
			if err := json.Unmarshal(w.Value, &f); err != nil || math.IsNaN(f) || f < 0 || f > 1 || plant.On("collapse-threshold-zero-refused") && f == 0 {
				return core.Rejectf(RuleCollapseSetting, 0, "%s = %s: want a fraction of the context window from 0 (off) to 1", w.Addr, w.Value)
			}
		case CollapseKeepRecentValue.Namespace:
			var n int64
			if err := json.Unmarshal(w.Value, &n); err != nil || n < 0 {
				return core.Rejectf(RuleCollapseSetting, 0, "%s = %s: want a count of tokens, 0 or more", w.Addr, w.Value)
			}
		}
	}
	return nil
}

// automaticKeep is the keepRecent of a collapse the generation starts:
// the conversation's, but at most half of budget, the tokens the context
// must fit in (the threshold's share of the window, or the window), so
// that what the collapse keeps leaves the turn room.
func automaticKeep(set CollapseSettings, budget float64) CollapseSettings {
	if half := int64(budget / 2); half < set.KeepRecent {
		set.KeepRecent = half
	}
	return set
}

// readCollapseSettings reads conv's settings from committed state; the
// batch rule keeps stored values in range.
func readCollapseSettings(tx *core.Tx, conv storage.ID) (CollapseSettings, error) {
	s := CollapseSettings{KeepRecent: CollapseKeepRecentDefault}
	if v, ok, err := core.TxValue(tx, CollapseThresholdValue.In(conv)).Get(0); err != nil {
		return s, err
	} else if ok {
		s.Threshold = v
	}
	if v, ok, err := core.TxValue(tx, CollapseKeepRecentValue.In(conv)).Get(0); err != nil {
		return s, err
	} else if ok {
		s.KeepRecent = v
	}
	return s, nil
}

// CollapseState is a collapse's state: what it replaces, captured when it
// was created, and how far it got.
type CollapseState struct {
	Reason CollapseReason `json:"reason"`
	// At is the sequence the context was captured at; Through is the last
	// entry summarized and FirstRetained the first one kept, which becomes
	// the summary's head. Head is the context's head then (0: none): a
	// newer one makes the summary stale.
	At            storage.ID `json:"at"`
	Through       storage.ID `json:"through"`
	FirstRetained storage.ID `json:"firstRetained"`
	Head          storage.ID `json:"head,omitempty"`
	// The summarizer: the conversation's model and thinking then, and the
	// manual collapse's instructions.
	Model        ModelRef `json:"model"`
	Thinking     string   `json:"thinking,omitempty"`
	Instructions string   `json:"instructions,omitempty"`
	Attempt      int      `json:"attempt"` // summarizer calls started
	MaxAttempts  int      `json:"maxAttempts"`
	NotBefore    int64    `json:"notBefore,omitempty"`
	// Successor is the generation an overflow collapse's settlement
	// creates: the overflowed one's input group, config and attempts. Until
	// then the collapse owns the group.
	Successor *GenerationState `json:"successor,omitempty"`
	// Set at settlement: the summary entry, or why there is none; the
	// successor generation created.
	Summary    storage.ID `json:"summary,omitempty"`
	Failure    string     `json:"failure,omitempty"`
	Detail     string     `json:"detail,omitempty"`
	Generation storage.ID `json:"generation,omitempty"`
}

// InputGroup is the input group a live task of a built-in kind carries: a
// generation's or post_tools's inputs, or the overflowed turn an overflow
// collapse holds until its settlement hands it on. Exactly one live task
// carries each running input.
func InputGroup(t *storage.Task) []storage.ID {
	switch t.Kind {
	case GenerationKindName:
		if st, err := decodeState[GenerationState](t); err == nil {
			return st.Inputs
		}
	case PostToolsKindName:
		if st, err := decodeState[PostToolsState](t); err == nil {
			return st.Inputs
		}
	case CollapseKindName:
		if st, err := decodeState[CollapseState](t); err == nil && st.Successor != nil {
			return st.Successor.Inputs
		}
	}
	return nil
}

// CollapseWait is a live task that waits on a live collapse.
type CollapseWait struct {
	Task     storage.ID
	Kind     string
	Collapse storage.ID
	Reason   CollapseReason
}

func (w CollapseWait) String() string {
	return fmt.Sprintf("task %d (%s) waits on %s collapse %d", w.Task, w.Kind, w.Reason, w.Collapse)
}

// CollapseWaits lists, among a session's live tasks, those that wait on a
// live collapse. The threshold path makes one on purpose (the turn's next
// generation waits on its collapse); the overflow chain never does, since
// the collapse's settlement hands the turn on (§8.2). It is a check of
// stored state: picosim check holds sessions to it.
func CollapseWaits(live []*storage.Task) []CollapseWait {
	collapses := map[storage.ID]CollapseReason{}
	for _, t := range live {
		if t.Kind == CollapseKindName {
			st, _ := decodeState[CollapseState](t)
			collapses[t.ID] = st.Reason
		}
	}
	var waits []CollapseWait
	for _, t := range live {
		for _, d := range t.After {
			if reason, ok := collapses[d]; ok {
				waits = append(waits, CollapseWait{Task: t.ID, Kind: t.Kind, Collapse: d, Reason: reason})
			}
		}
	}
	return waits
}

// candidate is a collapse's summary once it exists, in scratch, so that a
// crash after the summarizer answered publishes it instead of asking again.
type candidate struct {
	Summary string    `json:"summary"`
	Model   string    `json:"model,omitempty"` // "" when a handler supplied it
	Usage   *ai.Usage `json:"usage,omitempty"`
}

var candidateValue = storage.ScratchValue[candidate]("pi.collapse.candidate")

// CollapseCandidateAddress is where a collapse keeps, in its scratch, the
// summary its summarizer answered until it publishes it: a checker that
// holds a recovery to publishing it reads it there.
var CollapseCandidateAddress = candidateValue.Address

// HookBeforeCollapse is the collapse's hook point (§8.7).
const HookBeforeCollapse = "before_collapse"

// BeforeCollapseInput is what a before_collapse handler sees: why the
// collapse runs, the entries it replaces (the old head first, if any), and
// what the handlers before it decided.
type BeforeCollapseInput struct {
	ConversationID storage.ID
	Reason         CollapseReason
	Entries        []*storage.Entry
	Instructions   string
	Summary        string
	Declined       bool
}

// BeforeCollapseOutput is a handler's answer: decline the collapse, add
// instructions for the summarizer (replacing earlier ones), or supply the
// summary itself, which skips the summarizer. A decline is final.
type BeforeCollapseOutput struct {
	Decline      bool
	Instructions string
	Summary      string
}

// collapseHooks names the collapse kind for hook routing.
var collapseHooks = kindName(CollapseKindName)

// CollapseKind is the built-in collapse kind (§8.4): it replaces a prefix
// of a conversation's context with a summary head, while the conversation
// goes on. Nothing of it holds the line while the summarizer runs.
var CollapseKind core.TaskKind = collapseKind{core.Statuses{Name: CollapseKindName, Initial: "pending", Roles: map[string]storage.TaskRole{
	"pending": storage.RoleStart, "retry_wait": storage.RoleStart,
	"summarizing": storage.RoleInflight,
	"done":        storage.RoleTerminal, "failed": storage.RoleTerminal, "aborted": storage.RoleTerminal,
}}}

type collapseKind struct{ core.Statuses }

// Config declares the collapse settings (§5.2).
func (collapseKind) Config() map[string]storage.Address {
	return map[string]storage.Address{"threshold": CollapseThresholdValue.Address, "keepRecent": CollapseKeepRecentValue.Address}
}

// ErrCollapseInProgress is what Collapse returns while the conversation has
// a live collapse (one at a time, §8.4), wrapped in a *CollapseError.
var ErrCollapseInProgress = errors.New("a collapse is already running")

// ErrNothingToCollapse is what Collapse returns when no prefix of the
// context can be summarized while keeping the newest part.
var ErrNothingToCollapse = errors.New("nothing to collapse")

// CollapseError is a collapse Collapse could not create.
type CollapseError struct {
	ConversationID storage.ID
	Task           storage.ID // the live collapse, for ErrCollapseInProgress
	Err            error
}

func (e *CollapseError) Error() string {
	if e.Task != 0 {
		return fmt.Sprintf("agent: collapse of conversation %d: %v (task %d)", e.ConversationID, e.Err, e.Task)
	}
	return fmt.Sprintf("agent: collapse of conversation %d: %v", e.ConversationID, e.Err)
}

func (e *CollapseError) Unwrap() error { return e.Err }

// CollapseOptions configures a manual collapse.
type CollapseOptions struct {
	// Instructions are added to the summarizer's prompt.
	Instructions string
	// KeepRecent, when set, replaces the conversation's keepRecent for
	// this collapse: how many tokens of the newest context stay as they
	// are (the newest exchange always does).
	KeepRecent *int64
}

// Collapse starts a manual collapse (§9.1): a background task that
// summarizes the context's prefix while appends, inputs and turns go on,
// so that a conversation abort does not reach it (AbortTask does). It
// returns the task's id at once.
func (c *Conversation) Collapse(ctx context.Context, opts CollapseOptions) (storage.ID, error) {
	if opts.KeepRecent != nil && *opts.KeepRecent < 0 {
		return 0, fmt.Errorf("agent: collapse of conversation %d: keepRecent %d: want 0 or more", c.ID, *opts.KeepRecent)
	}
	var id storage.ID
	_, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
		set, err := readCollapseSettings(tx.Tx, c.ID)
		if err != nil {
			return err
		}
		if opts.KeepRecent != nil {
			set.KeepRecent = *opts.KeepRecent
		}
		if plant.On("collapse-manual-keeps-default") {
			set.KeepRecent = CollapseKeepRecentDefault
		}
		var ok bool
		id, ok, err = c.h.cfg.startCollapse(tx.Tx, c.ID, CollapseManual, set, opts.Instructions, nil)
		switch {
		case err != nil:
			return err
		case !ok:
			return &CollapseError{ConversationID: c.ID, Err: ErrNothingToCollapse}
		}
		if plant.On("collapse-returns-no-task") {
			id = 0
		}
		return nil
	})
	return id, err
}

// Reset starts a new context (§9.1): with a handoff, a handoff head whose
// message begins it; without, a reset head and an empty context. The
// transcript keeps everything and nothing is cancelled or requested. A head
// must not land inside a tool exchange, so on a busy conversation the head
// waits in the inbox, as a write, for the next boundary. It returns the
// write's input and, once placed, the head entry.
func (c *Conversation) Reset(ctx context.Context, handoff string) (input, entry storage.ID, err error) {
	if handoff == "" {
		return c.Write(ctx, core.ResetKind, core.EntryDraft{Head: core.HeadSelf})
	}
	msg := ai.UserText(handoff, c.Harness().Runtime().Now().UnixMilli())
	return c.Write(ctx, core.HandoffKind, core.EntryDraft{Data: core.HandoffData{Text: handoff}, Model: []ai.Message{msg}, Head: core.HeadSelf})
}

// startCollapse creates a collapse of conv in tx, unless one is live or no
// prefix can be cut: ok is false when there is nothing to collapse. The
// summarizer runs with the conversation's model as of now. An overflow
// collapse carries the successor generation's state.
func (c *config) startCollapse(tx *core.Tx, conv storage.ID, reason CollapseReason, set CollapseSettings, instructions string, successor *GenerationState) (id storage.ID, ok bool, err error) {
	live, err := tx.LiveTasks(conv, CollapseKindName)
	if err != nil {
		return 0, false, err
	}
	if len(live) > 0 {
		if plant.On("collapse-busy-names-nothing") {
			live[0] = 0
		}
		return 0, false, &CollapseError{ConversationID: conv, Task: live[0], Err: ErrCollapseInProgress}
	}
	cx, err := tx.DerivedContext(conv)
	if err != nil {
		return 0, false, err
	}
	cut, ok := planCut(cx, set.KeepRecent)
	if !ok {
		return 0, false, nil
	}
	gen, err := readConfig(tx, conv)
	if err != nil {
		return 0, false, err
	}
	st := CollapseState{Reason: reason, At: cx.Through, Through: cut.through, FirstRetained: cut.firstRetained,
		Model: gen.Model, Thinking: gen.Thinking, Instructions: instructions, MaxAttempts: c.retry.attempts(), Successor: successor}
	if plant.On("collapse-on-default-model") {
		st.Model = ModelRef{}
	}
	if cx.Head != nil {
		st.Head = cx.Head.ID
	}
	return tx.Task(kindName(CollapseKindName), core.TaskSpec{ConversationID: conv, State: st, Background: reason == CollapseManual}), true, nil
}

// cut is where a collapse divides a context: the prefix through an entry is
// summarized, the rest kept from an entry on.
type cut struct{ through, firstRetained storage.ID }

// cutUnit is a run of context entries no cut divides: an input with the
// answer to it, or an answer that continues a turn, each with the results
// of its calls and the system entries just before it (a system entry goes
// with what it governs), or any other entry.
type cutUnit struct {
	first, last int      // indexes into the range entries
	answered    bool     // it holds an assistant entry
	calls       []string // the assistant's call ids
	resultAt    []int    // per call, the index of its result, -1 for none
	tokens      int64
}

func callIDs(m ai.Message) []string {
	var ids []string
	for _, b := range m.ToolCalls() {
		ids = append(ids, b.ID)
	}
	return ids
}

// planCut chooses the cut of a context (§2.3) that keeps the newest units
// worth keepRecent tokens, and at least the newest one. The summarized
// prefix ends on a complete exchange and takes the old head with it (the
// new summary carries what the old one said); ok is false when nothing but
// the head would be summarized.
func planCut(cx *core.Context, keepRecent int64) (cut, bool) {
	entries := cx.Entries
	if cx.Head != nil && len(entries) > 0 {
		entries = entries[1:]
	}
	units := cutUnits(entries)
	if len(units) < 2 {
		return cut{}, false
	}
	// The newest unit with calls is the only exchange whose results may
	// still land; an older one's tools are over.
	lastExchange := -1
	for i, u := range units {
		if len(u.calls) > 0 {
			lastExchange = i
		}
	}
	keep, kept := len(units)-1, units[len(units)-1].tokens
	for keep > 0 && kept+units[keep-1].tokens <= keepRecent {
		keep--
		kept += units[keep].tokens
	}
	if keep == 0 {
		return cut{}, false // everything fits in keepRecent
	}
	if plant.On("collapse-keeps-a-unit-more") && keep > 1 {
		keep--
	}
	// Cut at the first valid boundary at or after keep: summarizing more
	// is safe, splitting an exchange is not.
	for i := keep; i < len(units); i++ {
		if cutValid(units, i, lastExchange) {
			return cut{through: entries[units[i-1].last].Entry.ID, firstRetained: entries[units[i].first].Entry.ID}, true
		}
	}
	return cut{}, false
}

// cutUnits groups range entries into units and finds each call's result:
// the first result of its id after it and before a newer call of the id (a
// provider may use an id again in a later answer).
func cutUnits(entries []core.ContextEntry) []cutUnit {
	var units []cutUnit
	type callAt struct{ unit, call int }
	open := map[string]callAt{} // call id → the newest call of it still without a result
	answer := func(u int, m ai.Message) {
		// An answer that names an id twice has one call of it, as its
		// context has: the first takes the result, the others an error.
		units[u].calls = nil
		for _, id := range callIDs(m) {
			if !slices.Contains(units[u].calls, id) || plant.On("cut-id-twice-unanswered") {
				units[u].calls = append(units[u].calls, id)
			}
		}
		units[u].resultAt = make([]int, len(units[u].calls))
		for j, id := range units[u].calls {
			units[u].resultAt[j] = -1
			open[id] = callAt{u, j}
		}
	}
	system := -1 // the first system entry waiting for its unit
	for i, ce := range entries {
		e := ce.Entry
		switch {
		case e.Kind == core.SystemKind.Kind():
			if system < 0 {
				system = i
			}
			continue
		case e.Kind == core.ToolResultKind.Kind():
			if c, ok := open[e.Key]; ok {
				units[c.unit].resultAt[c.call] = i
				delete(open, e.Key)
			}
			if plant.On("cut-result-by-id-alone") {
				for u := range units { // every call of the id takes the newest result
					for j, id := range units[u].calls {
						if id == e.Key {
							units[u].resultAt[j] = i
						}
					}
				}
			}
			if len(units) > 0 && system < 0 {
				units[len(units)-1].last = i
				continue
			}
		}
		assistant := len(ce.Messages) > 0 && ce.Messages[0].Role == ai.RoleAssistant
		if assistant && len(units) > 0 && !units[len(units)-1].answered {
			// An answer stays with what it answers: the input before it.
			u := &units[len(units)-1]
			u.last, u.answered, system = i, true, -1
			answer(len(units)-1, ce.Messages[0])
			continue
		}
		u := cutUnit{first: i, last: i, answered: assistant}
		if system >= 0 {
			u.first, system = system, -1
		}
		units = append(units, u)
		if assistant {
			answer(len(units)-1, ce.Messages[0])
		}
	}
	if system >= 0 && len(units) > 0 {
		units[len(units)-1].last = len(entries) - 1 // trailing system entries go with the newest unit
	}
	for i := range units {
		for _, ce := range entries[units[i].first : units[i].last+1] {
			units[i].tokens += EstimateTokens(ce.Messages...)
		}
	}
	return units
}

// cutValid reports whether the units before keep can be summarized: every
// call in them has its result in them (or, in an exchange that is not the
// newest, never got one: the turn went on without it). Edits need no
// check: an edit targets an earlier entry (§7.3), so one in the prefix
// edits the prefix, which the summarizer reads as edited, and one kept
// that targets the prefix is a no-op once the summary heads the context.
func cutValid(units []cutUnit, keep int, lastExchange int) bool {
	end := units[keep-1].last
	for i, u := range units[:keep] {
		for _, at := range u.resultAt {
			if ok := at >= 0; (ok && at > end) || (!ok && i == lastExchange) {
				return false
			}
		}
	}
	return true
}

// summarizerPrompt is the summarizer's system prompt.
const summarizerPrompt = "You write the checkpoint summary of a conversation between a user and an AI assistant " +
	"that is working on a task. Another model will carry on from your summary alone, so keep what it needs: " +
	"the user's goals and constraints, the decisions taken and why, what is done and what is left, and exact " +
	"file paths, names, commands and error messages. Do not answer or continue the conversation: write the summary only."

// summaryLead begins a summary's message, so that the model reading it knows
// what it is.
const summaryLead = "Summary of the earlier conversation:\n\n"

// summarizerRequest is the summarizer's last message: what to write, how
// to treat an earlier summary, and the instructions of the collapse.
func summarizerRequest(previous bool, instructions string) string {
	var b strings.Builder
	b.WriteString("Summarize the conversation above as a checkpoint for continuing the work.")
	if previous {
		b.WriteString(" It begins with the summary of earlier work: carry into yours everything of it that still matters.")
	}
	if instructions != "" {
		b.WriteString("\n\nAlso: ")
		b.WriteString(instructions)
	}
	return b.String()
}

func (k collapseKind) Execute(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[CollapseState](task)
	if err != nil {
		return err
	}
	if st.NotBefore > 0 {
		if err := rt.Sleep(ctx, time.UnixMilli(st.NotBefore)); err != nil {
			return err
		}
	}
	if task.Status != "pending" {
		// A retry: what is in scratch is always the current attempt's.
		if _, err := rt.Scratch(ctx, func(sc core.ScratchTx) error { sc.DeleteValue(candidateValue.Address); return nil }); err != nil {
			return err
		}
	}
	stale := false
	if _, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if stale, err = headMoved(tx.Tx, task.ConversationID, st); err != nil || stale {
			return err
		}
		tx.Patch(task.ID, core.TaskPatch{Status: "summarizing", State: attemptStart{Attempt: st.Attempt + 1}})
		return nil
	}); err != nil {
		return err
	}
	if stale {
		return k.settleWithout(ctx, rt, task, st, CollapseStale, "a newer head landed before the summarizer ran", nil)
	}
	st.Attempt++
	prefix, err := collapsePrefix(ctx, rt, task.ConversationID, st)
	if err != nil {
		return err
	}
	decision, err := k.beforeCollapse(ctx, rt, task, st, prefix)
	if err != nil {
		return err
	}
	if decision.Declined {
		return k.settleWithout(ctx, rt, task, st, CollapseDeclined, "declined by before_collapse", nil)
	}
	cand := candidate{Summary: decision.Summary}
	if cand.Summary == "" {
		if st.Instructions != "" && (decision.Instructions == "" || plant.On("collapse-host-instructions-override")) {
			decision.Instructions = st.Instructions
		}
		var done bool
		if cand, done, err = k.summarize(ctx, rt, task, st, prefix, decision.Instructions); err != nil || done {
			return err
		}
	}
	if _, err := rt.Scratch(ctx, func(sc core.ScratchTx) error { sc.SetValue(candidateValue.Address, cand); return nil }); err != nil {
		return err
	}
	return k.publish(ctx, rt, task, st, cand)
}

// headMoved reports whether a head newer than the captured one is in
// force: the summary would replace a context that is gone.
func headMoved(tx *core.Tx, conv storage.ID, st CollapseState) (bool, error) {
	cx, err := tx.DerivedContext(conv)
	if err != nil {
		return false, err
	}
	now := storage.ID(0)
	if cx.Head != nil && !(plant.On("collapse-stale-ignores-handoff") && cx.Head.Kind == core.HandoffKind.Kind()) {
		now = cx.Head.ID
	}
	return now != st.Head, nil
}

// collapsePrefix is the part of the context a collapse replaces, derived
// again as it was captured: entries are immutable and the derivation is a
// fixed rule, so the context at At is the one the collapse was planned on.
func collapsePrefix(ctx context.Context, rt *core.TaskRuntime, conv storage.ID, st CollapseState) (*core.Context, error) {
	cx, err := core.DeriveContext(ctx, rt.Harness().Store(), conv, st.At)
	if err != nil {
		return nil, err
	}
	for i, ce := range cx.Entries {
		if ce.Entry.ID == st.Through && (cx.Head == nil || i > 0) {
			n := i + 1
			return &core.Context{ConversationID: conv, Through: st.At, Head: cx.Head, Entries: cx.Entries[:n:n]}, nil
		}
	}
	return nil, fmt.Errorf("agent: collapse of conversation %d: entry %d is not in its context at %d", conv, st.Through, st.At)
}

// beforeCollapse runs the before_collapse handlers, each seeing what the
// ones before it decided; failures are reported and skipped.
func (k collapseKind) beforeCollapse(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st CollapseState, prefix *core.Context) (BeforeCollapseInput, error) {
	entries := make([]*storage.Entry, len(prefix.Entries))
	for i, ce := range prefix.Entries {
		entries[i] = ce.Entry
	}
	in := BeforeCollapseInput{ConversationID: task.ConversationID, Reason: st.Reason, Entries: entries}
	return core.RunHookChain(ctx, rt, collapseHooks, HookBeforeCollapse, in,
		func(in BeforeCollapseInput, out BeforeCollapseOutput, ok bool, err error) BeforeCollapseInput {
			switch {
			case err != nil:
				rt.Report(&core.HookError{Kind: CollapseKindName, Point: HookBeforeCollapse, Task: task.ID, Err: err})
			case ok:
				in.Declined = in.Declined && !plant.On("collapse-decline-overridden") || out.Decline
				if out.Instructions != "" && (in.Instructions == "" || !plant.On("collapse-instructions-first-wins")) {
					in.Instructions = out.Instructions
				}
				if out.Summary != "" {
					in.Summary = out.Summary
				}
			}
			return in
		})
}

// summarize asks the summarizer. An answer is the candidate; a retryable
// failure waits within the budget and another settles the collapse, both
// committed here (done is true).
func (k collapseKind) summarize(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st CollapseState, prefix *core.Context, instructions string) (cand candidate, done bool, err error) {
	cfg, err := configOf(rt.Harness())
	if err != nil {
		return cand, false, err
	}
	model, provider, err := cfg.models.Resolve(st.Model)
	if err != nil {
		return cand, true, k.settleWithout(ctx, rt, task, st, CollapseProviderFailed, err.Error(), nil)
	}
	msgs, err := prefix.Request()
	if err != nil {
		return cand, false, err
	}
	if plant.On("summarizer-misses-newest") && len(msgs) > 1 {
		msgs = msgs[:len(msgs)-1]
	}
	if plant.On("summarizer-drops-instructions") {
		instructions = ""
	}
	// The conversation's own instructions are not the summarizer's: the
	// summary never describes the prompt (§8.2), and a head starts a new
	// epoch of it anyway.
	req := ai.Request{Model: model, ThinkingLevel: st.Thinking, Messages: make([]ai.Message, 0, len(msgs)+2)}
	req.Messages = append(req.Messages, ai.Message{Role: ai.RoleSystem, Content: ai.PlainText(summarizerPrompt)})
	for _, m := range msgs {
		if m.Role != ai.RoleSystem {
			req.Messages = append(req.Messages, m)
		}
	}
	previous := prefix.Head != nil && prefix.Head.Kind == core.SummaryKind.Kind()
	req.Messages = append(req.Messages, ai.UserText(summarizerRequest(previous, instructions), rt.Now().UnixMilli()))
	m := finalMessage(ctx, provider.Stream(ctx, req))
	row := UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: CollapseKindName, Model: model.ID, Attempt: st.Attempt, Usage: m.Usage}
	text := strings.TrimSpace(m.Content.TextOf())
	switch {
	case m.StopReason == ai.StopError || m.StopReason == ai.StopAborted:
		if (m.RawStopReason == ai.RawRateLimited || plant.On("collapse-retries-any-failure")) && st.Attempt < st.MaxAttempts {
			row.Outcome = "retry"
			_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
				if err := recordUsage(tx.Tx, row); err != nil {
					return err
				}
				tx.Patch(task.ID, core.TaskPatch{Status: "retry_wait", State: map[string]any{"notBefore": rt.Now().Add(cfg.retry.delay(st.Attempt)).UnixMilli()}})
				return nil
			})
			return cand, true, err
		}
		detail := m.ErrorMessage
		if detail == "" {
			detail = string(m.StopReason)
		}
		return cand, true, k.settleWithout(ctx, rt, task, st, CollapseProviderFailed, detail, &row)
	case len(m.ToolCalls()) > 0:
		return cand, true, k.settleWithout(ctx, rt, task, st, CollapseProviderFailed, "the summarizer called tools", &row)
	case text == "":
		return cand, true, k.settleWithout(ctx, rt, task, st, CollapseProviderFailed, "the summarizer wrote nothing", &row)
	}
	return candidate{Summary: text, Model: model.ID, Usage: m.Usage}, false, nil
}

// finalMessage reads a stream to its end and returns its final message; a
// stream that ends without one ends as an error.
func finalMessage(ctx context.Context, stream ai.Stream) *ai.Message {
	for {
		ev, ok := stream.Next(ctx)
		switch {
		case !ok:
			return &ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: "the stream ended without a final event"}
		case ev.Terminal() && ev.Message != nil:
			m := *ev.Message
			return &m
		case ev.Terminal():
			return &ai.Message{Role: ai.RoleAssistant, StopReason: ai.StopError, ErrorMessage: "the final event carries no message"}
		}
	}
}

// candidateRow is the usage row of a settled summarizer call, or nil when
// a handler supplied the summary.
func candidateRow(task *storage.Task, st CollapseState, cand candidate, outcome string) *UsageRow {
	if cand.Model == "" {
		return nil
	}
	return &UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: CollapseKindName, Model: cand.Model,
		Attempt: st.Attempt, Outcome: outcome, Usage: cand.Usage}
}

// publish lands the candidate (§8.4): in one commit, if no head newer than
// the captured one is in force, the summary entry, headed at the first
// retained entry, and done; otherwise failed(stale). Entries and edits
// that landed meanwhile do not stale it: they are after the cut.
func (k collapseKind) publish(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st CollapseState, cand candidate) error {
	conv := task.ConversationID
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		stale, err := headMoved(tx.Tx, conv, st)
		if err != nil {
			return err
		}
		stale = stale && !plant.On("collapse-publishes-stale")
		outcome := "done"
		if stale {
			outcome = CollapseStale
		}
		if row := candidateRow(task, st, cand, outcome); row != nil {
			if err := recordUsage(tx.Tx, *row); err != nil {
				return err
			}
		}
		state := map[string]any{}
		if stale {
			state["failure"], state["detail"] = CollapseStale, "a newer head landed before the summary"
		} else {
			msg := ai.UserText(summaryLead+cand.Summary, rt.Now().UnixMilli())
			keepFrom := st.FirstRetained
			if plant.On("summary-keeps-from-through") {
				keepFrom = st.Through
			}
			state["summary"] = core.AppendSummary(tx.Tx, conv, core.SummaryData{SummarizedThrough: st.Through}, msg, keepFrom)
		}
		if err := createSuccessor(tx.Tx, task, st, state); err != nil {
			return err
		}
		status := "done"
		if stale {
			status = "failed"
		}
		tx.Settle(task.ID, status, state)
		return nil
	})
	return err
}

// settleWithout settles a collapse that publishes nothing: failed with why,
// the summarizer's usage when it was called, and an overflow collapse's
// successor all the same, which tries the turn once more.
func (k collapseKind) settleWithout(ctx context.Context, rt *core.TaskRuntime, task *storage.Task, st CollapseState, failure, detail string, row *UsageRow) error {
	_, err := rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if row != nil {
			row.Outcome = "failed"
			if err := recordUsage(tx.Tx, *row); err != nil {
				return err
			}
		}
		state := map[string]any{"failure": failure, "detail": detail}
		if err := createSuccessor(tx.Tx, task, st, state); err != nil {
			return err
		}
		tx.Settle(task.ID, "failed", state)
		return nil
	})
	return err
}

// createSuccessor creates an overflow collapse's successor generation in
// its settlement commit (§8.2), handing it the input group: it retries the
// turn once, with the attempts already spent.
func createSuccessor(tx *core.Tx, task *storage.Task, st CollapseState, state map[string]any) error {
	if st.Successor == nil {
		return nil
	}
	next := *st.Successor
	next.AfterCollapse, next.OverflowRetried = task.ID, true
	state["generation"] = tx.Task(kindName(GenerationKindName), core.TaskSpec{ConversationID: task.ConversationID, State: next})
	return nil
}

// Recover handles a collapse found summarizing: a candidate in scratch is
// published (the summarizer answered before the crash); without one the
// attempt is retried within budget.
func (k collapseKind) Recover(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[CollapseState](task)
	if err != nil {
		return err
	}
	cand, ok, err := readCandidate(ctx, rt)
	if err != nil {
		return err
	}
	if ok {
		return k.publish(ctx, rt, task, st, cand)
	}
	model, _ := resolvedCollapseModel(rt, st)
	row := &UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: CollapseKindName, Model: model, Attempt: st.Attempt}
	const interrupted = "interrupted: the process stopped while the summarizer ran"
	if st.Attempt >= st.MaxAttempts {
		return k.settleWithout(ctx, rt, task, st, CollapseInterrupted, interrupted+"; retry budget exhausted", row)
	}
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		// The interrupted call may have cost something nobody reported:
		// unknown, never zero.
		row.Outcome = "interrupted"
		if err := recordUsage(tx.Tx, *row); err != nil {
			return err
		}
		tx.Patch(task.ID, core.TaskPatch{Status: "retry_wait", State: map[string]any{"notBefore": rt.Now().UnixMilli()}})
		return nil
	})
	return err
}

func readCandidate(ctx context.Context, rt *core.TaskRuntime) (candidate, bool, error) {
	var cand candidate
	var ok bool
	_, err := rt.Scratch(ctx, func(sc core.ScratchTx) error {
		v, found, err := sc.GetValue(candidateValue.Address)
		if err != nil || !found || plant.On("collapse-candidate-unread") {
			return err
		}
		ok = true
		return json.Unmarshal(v.Value, &cand)
	})
	return cand, ok, err
}

// resolvedCollapseModel is the id of the summarizer's model.
func resolvedCollapseModel(rt *core.TaskRuntime, st CollapseState) (string, error) {
	return resolvedModel(rt, GenerationState{Config: GenerationConfig{Model: st.Model}})
}

// Abort settles a marked collapse without publishing (§8.4): the
// summarizer's known usage if it was called, and an overflow collapse's
// input group cancelled, since an abort creates no successor.
func (k collapseKind) Abort(ctx context.Context, task *storage.Task, rt *core.TaskRuntime) error {
	st, err := decodeState[CollapseState](task)
	if err != nil {
		return err
	}
	var row *UsageRow
	if task.Status == "summarizing" {
		cand, ok, err := readCandidate(ctx, rt)
		if err != nil {
			return err
		}
		switch {
		case ok:
			row = candidateRow(task, st, cand, "aborted")
		default:
			model, _ := resolvedCollapseModel(rt, st)
			row = &UsageRow{ConversationID: task.ConversationID, TaskID: task.ID, Kind: CollapseKindName, Model: model, Attempt: st.Attempt, Outcome: "aborted"}
		}
	}
	_, err = rt.Commit(ctx, func(tx *core.ConversationTx) error {
		if row != nil {
			if err := recordUsage(tx.Tx, *row); err != nil {
				return err
			}
		}
		if st.Successor != nil {
			if err := resolveInputs(tx.Tx, task.ConversationID, st.Successor.Inputs, func(r InputResult) InputResult {
				r.Status, r.Reason = InputCancelled, "aborted"
				return r
			}); err != nil {
				return err
			}
		}
		tx.Settle(task.ID, "aborted", map[string]any{"failure": CollapseAborted})
		return nil
	})
	return err
}
