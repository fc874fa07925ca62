package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/pico-go/pico/core"
	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// InputMode says where queued input lands and which input group it joins
// (§8.1's mode table).
type InputMode string

const (
	// ModeWrite lands at the next post_tools or final boundary and joins no
	// group; its terminal result is placed.
	ModeWrite InputMode = "write"
	// ModeSteer lands at the next post_tools boundary, joining the active
	// group, or after a final answer, starting the next one.
	ModeSteer InputMode = "steer"
	// ModeFollowUp lands after a final answer and starts the next group.
	ModeFollowUp InputMode = "followUp"
	// ModeNextRun waits for the next explicit idle acceptance and joins the
	// group it starts.
	ModeNextRun InputMode = "nextRun"
)

func (m InputMode) valid() bool {
	switch m {
	case ModeWrite, ModeSteer, ModeFollowUp, ModeNextRun:
		return true
	}
	return false
}

// AcceptedEntryDraft is the complete entry an inbox item lands as, so a UI
// renders queued text or images without another read.
type AcceptedEntryDraft struct {
	Kind string `json:"kind"`
	Key  string `json:"key,omitempty"`
	// Data is the entry's data facet, as JSON.
	Data  json.RawMessage       `json:"data,omitempty"`
	Model []ai.Message          `json:"model,omitempty"`
	Head  storage.ID            `json:"-"` // HeadSelf, an entry id, or 0
	Edits []storage.ContextEdit `json:"edits,omitempty"`
}

// MarshalJSON writes Head as the reference does: "self" or an id.
func (d AcceptedEntryDraft) MarshalJSON() ([]byte, error) {
	type plain AcceptedEntryDraft
	out := struct {
		plain
		Head any `json:"head,omitempty"`
	}{plain: plain(d)}
	switch {
	case d.Head == core.HeadSelf:
		out.Head = "self"
	case d.Head > 0:
		out.Head = d.Head
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads Head as "self" or an id.
func (d *AcceptedEntryDraft) UnmarshalJSON(data []byte) error {
	type plain AcceptedEntryDraft
	var in struct {
		plain
		Head json.RawMessage `json:"head,omitempty"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*d = AcceptedEntryDraft(in.plain)
	switch h := string(in.Head); {
	case h == "" || h == "null" || plant.On("queued-head-dropped"):
	case h == `"self"`:
		d.Head = core.HeadSelf
	default:
		if err := json.Unmarshal(in.Head, &d.Head); err != nil || d.Head <= 0 {
			return fmt.Errorf("agent: entry draft head %s is neither \"self\" nor an entry id", h)
		}
	}
	return nil
}

func (d AcceptedEntryDraft) draft() core.EntryDraft {
	e := core.EntryDraft{Key: d.Key, Model: d.Model, Head: d.Head, Edits: d.Edits}
	if len(d.Data) > 0 {
		e.Data = d.Data
	}
	return e
}

// InboxItem is one queued input: the pi.inbox element whose id is the
// input id.
type InboxItem struct {
	Mode      InputMode          `json:"mode"`
	Entry     AcceptedEntryDraft `json:"entry"`
	RequestID string             `json:"requestId,omitempty"`
}

// InputStatus is where an input is on its way: queued, then running (it
// belongs to an active group) or placed (a write), then done, failed,
// cancelled or stopped. Terminal results never change.
type InputStatus string

const (
	InputQueued    InputStatus = "queued"
	InputRunning   InputStatus = "running"
	InputPlaced    InputStatus = "placed"
	InputDone      InputStatus = "done"
	InputFailed    InputStatus = "failed"
	InputCancelled InputStatus = "cancelled"
	InputStopped   InputStatus = "stopped"
)

// Terminal reports whether the status is final.
func (s InputStatus) Terminal() bool {
	switch s {
	case InputPlaced, InputDone, InputFailed, InputCancelled, InputStopped:
		return true
	}
	return false
}

// InputResult is an input's explicit outcome, stored at
// pi.inputResult[inputId] (§8.1).
type InputResult struct {
	Status           InputStatus `json:"status"`
	RequestID        string      `json:"requestId,omitempty"`
	PlacementEntryID storage.ID  `json:"placementEntryId,omitempty"`
	ResultEntryID    storage.ID  `json:"resultEntryId,omitempty"`
	Reason           string      `json:"reason,omitempty"`
}

// The inbox addresses: a sticky conversation list and a sticky value per
// input.
var (
	InboxList        = storage.ConversationList[InboxItem]("pi.inbox", storage.Sticky)
	InputResultValue = storage.ConversationValue[InputResult]("pi.inputResult", storage.Sticky)
)

// inputResultAddr is pi.inputResult[input] in conversation conv.
func inputResultAddr(conv, input storage.ID) storage.Value[InputResult] {
	return InputResultValue.In(conv).WithKey(strconv.FormatInt(int64(input), 10))
}

// Receipt identifies an accepted input (§3.4).
type Receipt struct {
	RequestID      string     `json:"requestId"`
	ConversationID storage.ID `json:"conversationId"`
	InputID        storage.ID `json:"inputId"`
}

// RequestValue is the session value that maps a request id to its receipt.
var RequestValue = storage.SessionValue[Receipt]("pi.request")

// Acceptance looks up the receipt of an earlier acceptance by request id:
// how a caller whose accept reply was lost recovers its input id.
func (h *Harness) Acceptance(ctx context.Context, requestID string) (Receipt, bool, error) {
	v, ok, err := h.Store().GetValue(ctx, RequestValue.WithKey(requestID).Address, 0)
	if err != nil || !ok {
		return Receipt{}, false, err
	}
	var r Receipt
	if err := json.Unmarshal(v.Value, &r); err != nil {
		return Receipt{}, false, fmt.Errorf("agent: request %q: %w", requestID, err)
	}
	return r, true, nil
}

// RequestAlreadyAcceptedError rejects a second acceptance with a request id
// that was already used; First is the original receipt.
type RequestAlreadyAcceptedError struct {
	First Receipt
}

func (e *RequestAlreadyAcceptedError) Error() string {
	return fmt.Sprintf("agent: request %q was already accepted as input %d of conversation %d",
		e.First.RequestID, e.First.InputID, e.First.ConversationID)
}

// AcceptOptions configures an acceptance.
type AcceptOptions struct {
	// RequestID, if set, makes the acceptance findable with
	// Harness.Acceptance and rejects a second acceptance under the same id.
	RequestID string
}

// Accept accepts user input (§8.1). When the conversation is idle, one
// commit appends the inbox item, places it, removes it and creates the
// generation (together with queued input that was waiting for an idle
// acceptance); when it is busy, the input queues as a followUp. The input
// id is the inbox element's id either way.
func (c *Conversation) Accept(ctx context.Context, input ai.Content, opts AcceptOptions) (storage.ID, error) {
	id, _, err := c.enqueue(ctx, ModeFollowUp, true, c.userDraft(input), opts.RequestID)
	return id, err
}

// Steer queues input that joins the running group at the next post_tools
// boundary, or starts the next group after a final answer. In an idle
// conversation it starts a turn at once, like Accept (and, like Accept,
// takes queued nextRun input into its group).
func (c *Conversation) Steer(ctx context.Context, input ai.Content) (storage.ID, error) {
	id, _, err := c.enqueue(ctx, ModeSteer, true, c.userDraft(input), "")
	return id, err
}

// FollowUp queues input that starts the next group after a final answer.
func (c *Conversation) FollowUp(ctx context.Context, input ai.Content) (storage.ID, error) {
	id, _, err := c.enqueue(ctx, ModeFollowUp, true, c.userDraft(input), "")
	return id, err
}

// NextRun queues input that waits for the next explicit idle acceptance.
func (c *Conversation) NextRun(ctx context.Context, input ai.Content) (storage.ID, error) {
	id, _, err := c.enqueue(ctx, ModeNextRun, false, c.userDraft(input), "")
	return id, err
}

// Write queues an entry that lands at the next safe boundary without
// starting or joining a turn; in an idle conversation it lands at once.
// It returns the input id, and the entry's id when it landed at once (0
// while it waits: its input result's PlacementEntryID names the entry
// once it is placed).
func (c *Conversation) Write(ctx context.Context, kind storage.Kinder, d core.EntryDraft) (input, entry storage.ID, err error) {
	draft := AcceptedEntryDraft{Kind: kind.Kind(), Key: d.Key, Model: d.Model, Head: d.Head, Edits: d.Edits}
	if d.Data != nil && !plant.On("write-drops-data") {
		raw, err := core.Marshal(d.Data)
		var ce *core.CommitError
		switch {
		case errors.As(err, &ce):
			return 0, 0, ce // invalid UTF-8: its own rule
		case err != nil:
			return 0, 0, &core.CommitError{Rule: core.RuleBadPayload, Detail: "entry data", Err: err}
		}
		draft.Data = raw
	}
	return c.enqueue(ctx, ModeWrite, true, draft, "")
}

func (c *Conversation) userDraft(input ai.Content) AcceptedEntryDraft {
	return userDraft(input, c.Harness().Runtime().Now())
}

// enqueue is every acceptance: append the item and its queued result, then,
// if the conversation is idle and the mode lands when idle, place it.
func (c *Conversation) enqueue(ctx context.Context, mode InputMode, landsIdle bool, draft AcceptedEntryDraft, requestID string) (input, placed storage.ID, err error) {
	kinds := c.h.Kinds()
	if _, ok := kinds.Entry(draft.Kind); !ok {
		return 0, 0, core.Rejectf(core.RuleUnknownEntryKind, 0, "entry kind %q is not registered", draft.Kind)
	}
	if _, ok := kinds.Task(GenerationKindName); mode != ModeWrite && !ok {
		return 0, 0, fmt.Errorf("agent: no %q task kind is registered to answer input", GenerationKindName)
	}
	if inv, ok := core.InvocationOf(ctx); ok && (inv.Method == core.MethodAbort && !plant.On("abort-may-queue-input") || plant.On("input-refused-from-any-invocation")) {
		return 0, 0, core.Rejectf(core.RuleAbortCreates, inv.Task, "an abort handler cannot queue future work")
	}
	var id storage.ID
	_, err = c.Commit(ctx, func(tx *core.ConversationTx) error {
		var err error
		id, placed, err = c.h.cfg.acceptIn(tx.Tx, c.ID, mode, landsIdle, draft, requestID)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return id, placed, nil
}

// acceptIn is an acceptance in tx (§8.1): the inbox item and its queued
// result, or, when conv is idle and the mode lands when idle, the item
// placed at once (with what waited for an idle acceptance) and, unless it
// is a write, the generation that answers its group. It returns the input
// id and the placed entry (0 while queued).
func (c *config) acceptIn(tx *core.Tx, conv storage.ID, mode InputMode, landsIdle bool, draft AcceptedEntryDraft, requestID string) (id, placed storage.ID, err error) {
	if requestID != "" {
		first, ok, err := core.TxValue(tx, RequestValue.WithKey(requestID)).Get(0)
		if err != nil {
			return 0, 0, err
		}
		if ok && !(plant.On("request-id-per-conversation") && first.ConversationID != conv) {
			return 0, 0, &RequestAlreadyAcceptedError{First: first}
		}
	}
	item := InboxItem{Mode: mode, Entry: draft, RequestID: requestID}
	id = core.TxList(tx, InboxList.In(conv)).Append(item)
	if requestID != "" {
		core.TxValue(tx, RequestValue.WithKey(requestID)).Set(Receipt{RequestID: requestID, ConversationID: conv, InputID: id})
	}
	if !landsIdle || tx.Busy(conv) {
		core.TxValue(tx, inputResultAddr(conv, id)).Set(InputResult{Status: InputQueued, RequestID: requestID})
		return id, 0, nil
	}
	if mode == ModeWrite {
		// Older writes still queued (a turn that ended without a
		// boundary) land first, in admission order.
		if _, err := placeAtBoundary(tx, conv, []InputMode{ModeWrite}); err != nil {
			return 0, 0, err
		}
		placed, _ = placeItem(tx, conv, id, item)
		if plant.On("write-placed-unreturned") {
			placed = 0
		}
		return id, placed, tx.Err()
	}
	// An idle acceptance is a boundary: input that was waiting for one
	// lands first, and joins the new group.
	group, since, err := placeGroup(tx, conv, []InputMode{ModeWrite}, []InputMode{ModeSteer, ModeFollowUp, ModeNextRun})
	if err != nil {
		return 0, 0, err
	}
	placed, _ = placeItem(tx, conv, id, item)
	group = append(group, id)
	startTurn(tx, conv, group, since) // from the earliest acceptance that joins
	_, err = c.createGeneration(tx, conv, group, nil)
	return id, placed, err
}

// readInbox reads a conversation's queued items in admission order.
func readInbox(tx *core.Tx, conv storage.ID) ([]core.Elem[InboxItem], error) {
	return core.TxList(tx, InboxList.In(conv)).All()
}

// placeItem lands one inbox item: its entry, the element's removal and its
// result, in the current commit. A write is placed; anything else is
// running and joins a group, which placeItem reports.
func placeItem(tx *core.Tx, conv, input storage.ID, item InboxItem) (entry storage.ID, joins bool) {
	entry = tx.Entry(kindName(item.Entry.Kind), conv, item.Entry.draft())
	if !(plant.On("inbox-steer-stays-queued") && item.Mode == ModeSteer) {
		core.TxList(tx, InboxList.In(conv)).Remove(input)
	}
	status := InputRunning
	if item.Mode == ModeWrite {
		status = InputPlaced
	}
	core.TxValue(tx, inputResultAddr(conv, input)).Set(InputResult{Status: status, RequestID: item.RequestID, PlacementEntryID: entry})
	return entry, item.Mode != ModeWrite
}

// placeAtBoundary lands queued items at a boundary: one pass per mode set,
// each in admission order (writes first, then the input that joins a
// group). It returns the ids that join a group.
func placeAtBoundary(tx *core.Tx, conv storage.ID, passes ...[]InputMode) ([]storage.ID, error) {
	group, _, err := placeGroup(tx, conv, passes...)
	return group, err
}

// placeGroup is placeAtBoundary that also reports the earliest acceptance
// among the ids that join (zero for none), where a new group forms.
func placeGroup(tx *core.Tx, conv storage.ID, passes ...[]InputMode) (group []storage.ID, since time.Time, err error) {
	queued, err := readInbox(tx, conv)
	if err != nil || len(queued) == 0 {
		return nil, time.Time{}, err
	}
	if plant.On("inbox-lands-newest-first") {
		slices.Reverse(queued)
	}
	for _, modes := range passes {
		var landed []InputMode // by the plant inbox-lands-one-per-mode
		for _, q := range queued {
			if !slices.Contains(modes, q.Value.Mode) {
				continue
			}
			if plant.On("inbox-lands-one-per-mode") {
				if slices.Contains(landed, q.Value.Mode) {
					continue
				}
				landed = append(landed, q.Value.Mode)
			}
			if _, joins := placeItem(tx, conv, q.ID, q.Value); joins {
				group = append(group, q.ID)
				if at := acceptedAt(q.Value); !at.IsZero() && (since.IsZero() || at.Before(since)) {
					since = at
				}
			}
		}
	}
	return group, since, nil
}

// resolveInputs moves every input of a group from running to its outcome.
// An input that is not running is a broken invariant: the group's owner is
// the only writer of its results.
func resolveInputs(tx *core.Tx, conv storage.ID, inputs []storage.ID, outcome func(InputResult) InputResult) error {
	for _, id := range inputs {
		v := core.TxValue(tx, inputResultAddr(conv, id))
		cur, ok, err := v.Get(0)
		if err != nil {
			return err
		}
		if !ok || cur.Status != InputRunning {
			return fmt.Errorf("agent: input %d of conversation %d is %q, not running; its group owner cannot resolve it", id, conv, cur.Status)
		}
		res := outcome(cur)
		v.Set(res)
		if id == inputs[0] {
			defer endTurn(tx, conv, inputs, res) // once every result is set
		}
	}
	return nil
}

// Result reads an input's result: one point read, never a transcript scan.
func (c *Conversation) Result(ctx context.Context, input storage.ID) (InputResult, bool, error) {
	return readInputResult(ctx, c.h.Store(), c.ID, input)
}

// EachInputResult calls fn with every input result stored in conversation
// conv, in key order (a page of keys at a time), with its stored JSON: what
// a checker or a conformance capture reads. A key that is no input id or a
// value that does not decode is an error naming it.
func EachInputResult(ctx context.Context, store storage.Storage, conv storage.ID, fn func(input storage.ID, r InputResult, raw json.RawMessage)) error {
	for q := (storage.ValueQuery{Scope: storage.ConversationScope(conv), Namespace: InputResultValue.Namespace, Limit: storage.PageLimitMax}); ; {
		p, err := store.ScanValues(ctx, q)
		if err != nil {
			return err
		}
		for _, kv := range p.Items {
			id, err := strconv.ParseInt(kv.Key, 10, 64)
			if err != nil {
				return fmt.Errorf("agent: input result key %q is not an input id", kv.Key)
			}
			var r InputResult
			if err := json.Unmarshal(kv.Version.Value, &r); err != nil {
				return fmt.Errorf("agent: input result %s does not decode: %v", kv.Key, err)
			}
			fn(storage.ID(id), r, kv.Version.Value)
		}
		if len(p.Items) < q.Limit {
			return nil
		}
		q.After = p.Items[len(p.Items)-1].Key
	}
}

// readInputResult reads input's result in conversation conv.
func readInputResult(ctx context.Context, store storage.Storage, conv, input storage.ID) (InputResult, bool, error) {
	v, ok, err := store.GetValue(ctx, inputResultAddr(conv, input).Address, 0)
	if err != nil || !ok {
		return InputResult{}, false, err
	}
	r, err := core.Unmarshal[InputResult](v.Value)
	if err != nil {
		return InputResult{}, false, fmt.Errorf("agent: input result %d: %w", input, err)
	}
	return r, true, nil
}

// InputError is what Prompt returns when its input did not end done: the
// input and its terminal result (failed with a reason such as no model
// configured or the script exhausted, cancelled, stopped).
type InputError struct {
	Input  storage.ID
	Result InputResult
}

func (e *InputError) Error() string {
	msg := fmt.Sprintf("agent: input %d ended %s", e.Input, e.Result.Status)
	if e.Result.Reason != "" {
		msg += ": " + e.Result.Reason
	}
	return msg
}

// Prompt accepts input, drives the conversation until it is idle and
// returns the answer entry when the input's result is done. An input that
// ended otherwise (failed, cancelled, stopped) is an *InputError carrying
// its result; one still unresolved when the drive ended (the session
// closed) is an *InputError with that result too.
func (c *Conversation) Prompt(ctx context.Context, input ai.Content, opts AcceptOptions) (*storage.Entry, error) {
	// A task prompting its own foreground scope would wait for itself;
	// reject before anything is accepted (§6.2).
	if err := c.CheckDrive(ctx); err != nil {
		return nil, err
	}
	id, err := c.Accept(ctx, input, opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.Drive(ctx); err != nil {
		return nil, err
	}
	r, ok, err := c.Result(ctx, id)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, fmt.Errorf("agent: input %d has no result", id)
	case r.Status != InputDone:
		return nil, &InputError{Input: id, Result: r}
	}
	answer := r.ResultEntryID
	if plant.On("prompt-returns-placement") {
		answer = r.PlacementEntryID
	}
	e, _, err := c.h.GetEntry(ctx, answer)
	return e, err
}

// CancelResult is what CancelQueued did.
type CancelResult string

const (
	Cancelled CancelResult = "cancelled"
	NotFound  CancelResult = "not_found"
)

// CancelQueued withdraws a queued input: the element is removed and its
// result is cancelled in one commit. Input that already landed, or never
// existed, is not_found.
func (c *Conversation) CancelQueued(ctx context.Context, input storage.ID) (CancelResult, error) {
	res := NotFound
	_, err := c.Commit(ctx, func(tx *core.ConversationTx) error {
		queued, err := readInbox(tx.Tx, c.ID)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(queued, func(e core.Elem[InboxItem]) bool { return e.ID == input })
		if i < 0 && plant.On("inbox-cancel-placed") {
			v := core.TxValue(tx.Tx, inputResultAddr(c.ID, input))
			if cur, ok, err := v.Get(0); err == nil && ok {
				v.Set(InputResult{Status: InputCancelled, RequestID: cur.RequestID, Reason: ReasonCancelledByRequest})
				res = Cancelled
			}
			return nil
		}
		if i < 0 {
			return nil
		}
		cancelItem(tx.Tx, c.ID, queued[i], ReasonCancelledByRequest)
		if !plant.On("cancel-says-not-found") {
			res = Cancelled
		}
		return nil
	})
	return res, err
}

func cancelItem(tx *core.Tx, conv storage.ID, e core.Elem[InboxItem], reason string) {
	core.TxList(tx, InboxList.In(conv)).Remove(e.ID)
	if plant.On("cancel-drops-result") {
		return
	}
	core.TxValue(tx, inputResultAddr(conv, e.ID)).Set(InputResult{Status: InputCancelled, RequestID: e.Value.RequestID, Reason: reason})
}

// ReasonConversationAborted is the reason of an input a conversation abort
// cancelled while it was queued.
const ReasonConversationAborted = "conversation aborted"

// ReasonCancelledByRequest is the reason of an input CancelQueued withdrew.
const ReasonCancelledByRequest = "cancelled by request"

// cancelQueuedTurns cancels the queued steer and followUp items of conv,
// keeping write and nextRun: the explicit conversation-abort policy.
func cancelQueuedTurns(tx *core.Tx, conv storage.ID) error {
	queued, err := readInbox(tx, conv)
	if err != nil {
		return err
	}
	for _, q := range queued {
		if q.Value.Mode == ModeSteer || q.Value.Mode == ModeFollowUp && !plant.On("abort-spares-follow-up") || plant.On("abort-cancels-next-run") && q.Value.Mode == ModeNextRun {
			cancelItem(tx, conv, q, ReasonConversationAborted)
		}
	}
	return nil
}
