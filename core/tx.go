package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"unicode/utf8"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// HeadSelf, as an EntryDraft's Head, stores the new entry's own id as its
// boundary (reset and handoff).
const HeadSelf storage.ID = -1

// EntryDraft is what a writer supplies for a new entry; the line mints the
// id and fills in the conversation and kind.
type EntryDraft struct {
	Key string
	// Data is marshalled to JSON; a json.RawMessage is taken as is. Nil means
	// the entry has no data facet.
	Data  any
	Model []ai.Message
	// Head is the inclusive first retained entry, HeadSelf, or 0 for none.
	Head  storage.ID
	Edits []storage.ContextEdit
}

// TaskSpec is what a writer supplies for a new task.
type TaskSpec struct {
	ConversationID storage.ID
	State          any
	After          []storage.ID
	Background     bool
	Owns           []storage.ID
}

// TaskPatch changes a live task. State is merged into the current state
// (top-level object keys; a non-object replaces it).
type TaskPatch struct {
	Status string
	State  any
	Abort  bool
}

// ConversationSpec describes a new conversation: a fork (Parent) and/or an
// owned child (Owner).
type ConversationSpec struct {
	Parent *storage.ParentRef
	Owner  storage.ID
}

// Tx builds one main commit. Writes are synchronous and buffered; every
// builder returns the final id of what it creates. Reads see committed state
// only — never this transaction's own writes — and may block without
// releasing the line. The first rule a builder breaks is remembered: later
// builders do nothing and the commit returns that error.
type Tx struct {
	ctx   context.Context
	store storage.Storage
	kinds *Kinds
	base  storage.ID // lastSeq when the transaction started
	h     *Harness   // the session on whose line the plan runs; nil for a bare line

	scratchTask storage.ID // non-zero for a scratch transaction
	writes      []storage.Write
	sawEntry    bool
	err         error

	tasks   map[storage.ID]*storage.Task         // records as this batch leaves them
	taskAt  map[storage.ID]int                   // task id → index of its creating write
	convs   map[storage.ID]*storage.Conversation // created in this batch
	entries map[storage.ID]*storage.Entry        // created in this batch
	traces  *tracePlan                           // telemetry asked of this commit, nil for none
	held    *heldStarts                          // where its starts are held back (handon.go), nil to start them
}

func newTx(ctx context.Context, store storage.Storage, kinds *Kinds) *Tx {
	return &Tx{ctx: ctx, store: store, kinds: kinds, base: store.LastSeq()}
}

// Err returns the first rule a builder broke, if any.
func (tx *Tx) Err() error { return tx.err }

func (tx *Tx) next() storage.ID { return tx.base + storage.ID(len(tx.writes)) + 1 }

func (tx *Tx) fail(err error) storage.ID {
	if tx.err == nil {
		tx.err = err
	}
	return 0
}

func (tx *Tx) push(w storage.Write) storage.ID {
	id := tx.next()
	tx.writes = append(tx.writes, w)
	return id
}

// batch is what the plan built, its writes in a slice of their own of just
// their number: tx.writes is the line's buffer, which the next plan reuses.
func (tx *Tx) batch() storage.CommitBatch {
	writes := make([]storage.Write, len(tx.writes))
	copy(writes, tx.writes)
	if tx.scratchTask != 0 {
		return storage.CommitBatch{Kind: storage.BatchScratch, Task: tx.scratchTask, Writes: writes}
	}
	return storage.CommitBatch{Kind: storage.BatchMain, Writes: writes}
}

// JSONAppender is a payload that writes its own JSON: AppendJSON appends to
// buf exactly the bytes json.Marshal writes of the value (compact, with
// encoding/json's escapes) and returns buf grown, never memory it keeps,
// or fails where json.Marshal fails. Marshal calls it instead of
// json.Marshal, sparing the payloads a kind commits most often (a stream's
// frames) encoding/json's reflection and its second pass over what a
// MarshalJSON method returns; on a failure it asks json.Marshal, whose
// error it returns. Marshal does not check the bytes beyond their UTF-8:
// an implementation is held to json.Marshal by its own tests. A struct
// that embeds an implementation gets its method, which would write only the
// embedded part: it must have its own (as agent.ToolOutputState does).
type JSONAppender interface {
	AppendJSON(buf []byte) ([]byte, error)
}

// JSONDecoder is a payload type that can read its own JSON, the
// counterpart of JSONAppender: DecodeJSON reads data into the zero value it
// is called on, as json.Unmarshal would, and reports whether it took the
// text whole; on false the value is to be thrown away, and json.Unmarshal
// decides, value and error. An implementation reads by hand the texts it
// knows (the ones its kind writes) and gives up on anything else, and is
// held to json.Unmarshal by its own tests. Unmarshal, and through it the
// typed values' and lists' reads, use it. As with JSONAppender, a struct
// that embeds an implementation must have its own.
type JSONDecoder interface {
	DecodeJSON(data []byte) bool
}

// Unmarshal decodes data into a new T as json.Unmarshal does, value and
// error, by *T's DecodeJSON when it has one (JSONDecoder) and it takes the
// text.
func Unmarshal[T any](data []byte) (T, error) {
	var x T
	if d, ok := any(&x).(JSONDecoder); ok {
		if d.DecodeJSON(data) {
			if jsonvalue.Checking() {
				checkDecoded(data, &x)
			}
			return x, nil
		}
		x = *new(T) // what it read before it gave up
	}
	err := json.Unmarshal(data, &x)
	return x, err
}

// Marshal is the canonical JSON encoding of the payloads a commit carries
// (entry data, task state, values): a json.RawMessage must be valid JSON and
// is compacted as it is; a JSONAppender writes itself; anything else goes
// through encoding/json. Kinds that store a payload inside another one
// (the agent's inbox drafts) encode it with Marshal so it reads back as an
// entry's data would.
//
// Text must be valid UTF-8: Marshal refuses anything else with a
// *CommitError for RuleInvalidUTF8 rather than let encoding/json turn it
// into U+FFFD, since the memory backend would then disagree with the
// durable ones about what was written.
func Marshal(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !jsonvalue.Valid(raw) {
			return nil, &json.SyntaxError{}
		}
		if !utf8.Valid(raw) {
			return nil, Rejectf(RuleInvalidUTF8, 0, "raw JSON payload is not valid UTF-8")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	raw, err := marshalJSON(v)
	if err != nil {
		return nil, err
	}
	if ce := marshalledUTF8(v, raw); ce != nil {
		return nil, ce
	}
	return raw, nil
}

// marshalJSON is json.Marshal(v), by v's AppendJSON when it has one. A
// nil pointer is encoding/json's (null), and so is a failure: its error is
// the one json.Marshal gives.
func marshalJSON(v any) ([]byte, error) {
	if a, ok := v.(JSONAppender); ok && !isNilPointer(v) {
		if raw, err := jsonvalue.Appended(a.AppendJSON); err == nil {
			if jsonvalue.Checking() {
				checkAppended(v, raw)
			}
			return raw, nil
		}
	}
	return json.Marshal(v)
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// payloadError is the rejection of a payload Marshal refused: its own
// rule when it named one (invalid UTF-8), RuleBadPayload otherwise.
func payloadError(err error, id storage.ID, what string) *CommitError {
	var ce *CommitError
	if errors.As(err, &ce) {
		return &CommitError{Rule: ce.Rule, ID: id, Detail: what + ": " + ce.Detail}
	}
	return &CommitError{Rule: RuleBadPayload, ID: id, Detail: what, Err: err}
}

// --- state ---

func (tx *Tx) state(w storage.Write, payload any, hasPayload bool) storage.ID {
	if tx.err != nil {
		return 0
	}
	a := *w.Addr
	if tx.scratchTask != 0 && a.Scope.Kind == storage.ScopeScratch && a.Scope.ID == 0 {
		a.Scope.ID = tx.scratchTask
		w.Addr = &a
	}
	if err := a.Validate(); err != nil {
		return tx.fail(&CommitError{Rule: RuleBadAddress, Detail: err.Error()})
	}
	switch {
	case tx.scratchTask == 0 && a.Scope.Kind == storage.ScopeScratch:
		return tx.fail(Rejectf(RuleScratchInMain, a.Scope.ID, "%s is scratch; write it with a scratch commit", a))
	case tx.scratchTask != 0 && (a.Scope.Kind != storage.ScopeScratch || a.Scope.ID != tx.scratchTask):
		return tx.fail(Rejectf(RuleMainInScratch, tx.scratchTask, "scratch commit of task %d writes %s", tx.scratchTask, a))
	case a.Historical() && tx.sawEntry && !plant.On("state-after-entry-allowed"):
		return tx.fail(Rejectf(RuleStateAfterEntry, 0, "%s written after an entry in the same commit (§3.2)", a))
	}
	if hasPayload {
		raw, err := Marshal(payload)
		if err != nil {
			return tx.fail(payloadError(err, 0, a.String()))
		}
		w.Value = raw
	}
	return tx.push(w)
}

// SetValue sets the value at addr.
func (tx *Tx) SetValue(addr storage.Address, v any) {
	tx.state(storage.Write{Type: storage.WriteValueSet, Addr: &addr}, v, true)
}

// DeleteValue deletes the value at addr (for rewindable state: records absence).
func (tx *Tx) DeleteValue(addr storage.Address) {
	tx.state(storage.Write{Type: storage.WriteValueDelete, Addr: &addr}, nil, false)
}

// Append appends v to the list at addr and returns the element id.
func (tx *Tx) Append(addr storage.Address, v any) storage.ID {
	return tx.state(storage.Write{Type: storage.WriteListAppend, Addr: &addr}, v, true)
}

// Remove hides one element of the list at addr.
func (tx *Tx) Remove(addr storage.Address, element storage.ID) {
	tx.state(storage.Write{Type: storage.WriteListRemove, Addr: &addr, Element: element}, nil, false)
}

// Clear hides every element of the list at addr.
func (tx *Tx) Clear(addr storage.Address) {
	tx.state(storage.Write{Type: storage.WriteListClear, Addr: &addr}, nil, false)
}

// GetValue reads committed state (at = 0 for current).
func (tx *Tx) GetValue(addr storage.Address, at storage.ID) (storage.Version, bool, error) {
	return tx.store.GetValue(tx.ctx, tx.bind(addr), at)
}

// ValueAsWritten reads the value at addr as this commit leaves it so far:
// the commit's own last write there (absent after a delete), else the
// committed current value. A plan that writes state and then reads it back
// reads with this (a spawn sets its child's configuration, then the child's
// first generation captures it); GetValue reads committed state only.
func (tx *Tx) ValueAsWritten(addr storage.Address) (json.RawMessage, bool, error) {
	addr = tx.bind(addr)
	ref := addr.Ref()
	for i := len(tx.writes) - 1; i >= 0; i-- {
		w := &tx.writes[i]
		if (w.Type == storage.WriteValueSet || w.Type == storage.WriteValueDelete) && w.Addr.Ref() == ref {
			return w.Value, w.Type == storage.WriteValueSet, nil
		}
	}
	v, ok, err := tx.store.GetValue(tx.ctx, addr, 0)
	return v.Value, ok, err
}

// ReadList reads a committed list.
func (tx *Tx) ReadList(addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	return tx.store.ReadList(tx.ctx, tx.bind(addr), q)
}

func (tx *Tx) bind(a storage.Address) storage.Address {
	if tx.scratchTask != 0 && a.Scope.Kind == storage.ScopeScratch && a.Scope.ID == 0 {
		a.Scope.ID = tx.scratchTask
	}
	return a
}

// --- records ---

// Entry appends an entry of a registered kind and returns its id.
func (tx *Tx) Entry(kind storage.Kinder, conversationID storage.ID, d EntryDraft) storage.ID {
	if tx.err != nil {
		return 0
	}
	if tx.scratchTask != 0 {
		return tx.fail(Rejectf(RuleMainInScratch, tx.scratchTask, "entry in a scratch commit"))
	}
	if _, ok := tx.kinds.Entry(kind.Kind()); !ok {
		return tx.fail(Rejectf(RuleUnknownEntryKind, 0, "entry kind %q is not registered", kind.Kind()))
	}
	id := tx.next()
	e := &storage.Entry{ID: id, ConversationID: conversationID, Kind: kind.Kind(), Key: d.Key,
		Model: cloneOrNil(d.Model), Edits: cloneEdits(d.Edits), Head: d.Head}
	if inv := invocationOf(tx.ctx); inv != nil && tx.h != nil && tx.h.d.running[inv.task] == inv {
		e.ByTaskID = inv.task // which task wrote it (§2.1); the host's entries name none
	}
	if d.Head == HeadSelf {
		e.Head = id
	} else if d.Head < 0 {
		return tx.fail(Rejectf(RuleHeadNotVisible, id, "head %d is not an entry id", d.Head))
	}
	if d.Data != nil {
		raw, err := Marshal(d.Data)
		if err != nil {
			return tx.fail(payloadError(err, id, "entry data"))
		}
		e.Data = raw
	}
	if ce := invalidUTF8("entry model", d.Model); ce != nil && !plant.On("entry-model-utf8-unchecked") {
		ce.ID = id
		return tx.fail(ce)
	}
	for i := range e.Model {
		if plant.On("entry-model-kept-as-given") {
			break
		}
		// As every store reads it back, or refused when it could not.
		m, err := e.Model[i].Canonical()
		if err != nil {
			return tx.fail(&CommitError{Rule: RuleBadPayload, ID: id, Detail: fmt.Sprintf("entry model message %d", i), Err: err})
		}
		e.Model[i] = m
	}
	tx.sawEntry = true
	if tx.entries == nil {
		tx.entries = map[storage.ID]*storage.Entry{}
	}
	tx.entries[id] = e
	return tx.push(storage.Write{Type: storage.WriteEntry, Entry: e})
}

// Task creates a task of a registered kind in its initial status.
func (tx *Tx) Task(kind storage.Kinder, spec TaskSpec) storage.ID {
	if tx.err != nil {
		return 0
	}
	if tx.scratchTask != 0 {
		return tx.fail(Rejectf(RuleMainInScratch, tx.scratchTask, "task in a scratch commit"))
	}
	k, ok := tx.kinds.Task(kind.Kind())
	if !ok {
		return tx.fail(Rejectf(RuleUnknownTaskKind, 0, "task kind %q is not registered", kind.Kind()))
	}
	id := tx.next()
	status := k.InitialStatus()
	role, _ := k.Role(status)
	t := &storage.Task{ID: id, ConversationID: spec.ConversationID, Kind: k.Kind(), Status: status, Role: role,
		After: cloneOrNil(spec.After), Background: spec.Background, Owns: cloneOrNil(spec.Owns)}
	if spec.State != nil {
		raw, err := Marshal(spec.State)
		if err != nil {
			return tx.fail(payloadError(err, id, "task state"))
		}
		t.State = raw
	}
	tx.remember(t)
	if tx.taskAt == nil {
		tx.taskAt = map[storage.ID]int{}
	}
	tx.taskAt[id] = len(tx.writes)
	return tx.push(storage.Write{Type: storage.WriteTask, Task: t})
}

func (tx *Tx) remember(t *storage.Task) {
	if tx.tasks == nil {
		tx.tasks = map[storage.ID]*storage.Task{}
	}
	tx.tasks[t.ID] = t
}

// current returns a task as this batch leaves it, reading committed state
// for tasks the batch has not touched: a live task's is the driver's record,
// which every commit keeps as the store has it (afterCommit; checked after
// every commit under Options.CheckInvariants), so only a terminal or
// unknown task is read from storage. The record is shared: callers never
// change it (a write copies it first). A caller that may end up writing
// nothing uses stored instead, so that a store that can no longer be read
// fails it as before.
func (tx *Tx) current(id storage.ID) (*storage.Task, error) {
	if t, ok := tx.tasks[id]; ok {
		return t, nil
	}
	if tx.h != nil {
		if lt, ok := tx.h.d.live[id]; ok {
			return lt.task, nil
		}
	}
	return tx.stored(id)
}

// stored returns a task as this batch leaves it, reading committed state
// from storage for tasks the batch has not touched.
func (tx *Tx) stored(id storage.ID) (*storage.Task, error) {
	if t, ok := tx.tasks[id]; ok {
		return t, nil
	}
	got, err := tx.store.GetTasks(tx.ctx, []storage.ID{id})
	if err != nil {
		return nil, err
	}
	t, ok := got[id]
	if !ok {
		return nil, Rejectf(RuleUnknownTask, id, "task %d does not exist", id)
	}
	return t, nil
}

// change looks up a live task and the kind that owns its statuses.
func (tx *Tx) change(id storage.ID) (*storage.Task, TaskKind, bool) {
	if tx.err != nil {
		return nil, nil, false
	}
	if tx.scratchTask != 0 {
		tx.fail(Rejectf(RuleMainInScratch, tx.scratchTask, "task write in a scratch commit"))
		return nil, nil, false
	}
	t, err := tx.current(id)
	if err != nil {
		tx.fail(err)
		return nil, nil, false
	}
	if !t.Live() {
		tx.fail(Rejectf(RuleTaskTerminal, id, "task %d is %s; terminal tasks never change", id, t.Status))
		return nil, nil, false
	}
	k, ok := tx.kinds.Task(t.Kind)
	if !ok {
		tx.fail(Rejectf(RuleUnknownTaskKind, id, "task kind %q is not registered", t.Kind))
		return nil, nil, false
	}
	return t, k, true
}

// Patch changes a live task's status (role derived from its kind), state or
// abort mark.
func (tx *Tx) Patch(id storage.ID, p TaskPatch) {
	t, k, ok := tx.change(id)
	if !ok {
		return
	}
	w := storage.Write{Type: storage.WritePatch, ID: id, Abort: p.Abort}
	next := *t
	if p.Status != "" {
		role, ok := k.Role(p.Status)
		switch {
		case !ok:
			tx.fail(Rejectf(RuleUnknownStatus, id, "kind %q has no status %q", t.Kind, p.Status))
			return
		case role == storage.RoleTerminal && !plant.On("patch-may-end-a-task"):
			tx.fail(Rejectf(RulePatchTerminal, id, "status %q is terminal; settle the task instead", p.Status))
			return
		}
		w.Status, w.Role = p.Status, role
		next.Status, next.Role = p.Status, role
	}
	if p.State != nil {
		merged, err := mergeState(t.State, p.State)
		if err != nil {
			tx.fail(payloadError(err, id, "task state"))
			return
		}
		w.State, next.State = merged, merged
	}
	if p.Status == "" && p.State == nil && !p.Abort {
		tx.fail(Rejectf(RuleBadPayload, id, "patch of task %d changes nothing", id))
		return
	}
	next.Abort = next.Abort || p.Abort
	tx.remember(&next)
	tx.push(w)
}

// Settle makes a live task terminal with status (which its kind must map to
// the terminal role), merging state into its current state. It retires the
// task's scratch in the same commit.
func (tx *Tx) Settle(id storage.ID, status string, state any) {
	t, k, ok := tx.change(id)
	if !ok {
		return
	}
	role, known := k.Role(status)
	switch {
	case !known:
		tx.fail(Rejectf(RuleUnknownStatus, id, "kind %q has no status %q", t.Kind, status))
		return
	case role != storage.RoleTerminal:
		tx.fail(Rejectf(RuleSettleNotTerminal, id, "status %q of kind %q is %s, not terminal", status, t.Kind, role))
		return
	}
	merged := t.State
	if state != nil {
		var err error
		if merged, err = mergeState(t.State, state); err != nil {
			tx.fail(payloadError(err, id, "task state"))
			return
		}
	}
	next := *t
	next.Status, next.Role, next.State = status, role, merged
	tx.remember(&next)
	tx.push(storage.Write{Type: storage.WriteSettle, ID: id, Status: status, Role: role, State: merged})
}

// cloneOrNil copies s, and gives nil for an empty one: a record is stored
// as its JSON, which cannot tell an empty list from none, so storage
// refuses the empty one and the kernel writes none.
func cloneOrNil[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// cloneEdits is cloneOrNil of context edits and of each edit's messages.
func cloneEdits(eds []storage.ContextEdit) []storage.ContextEdit {
	eds = cloneOrNil(eds)
	for i := range eds {
		eds[i].Messages = cloneOrNil(eds[i].Messages)
	}
	return eds
}

// mergeState merges a patch into a task state: object keys of the patch
// replace the state's keys; any other patch replaces the state whole.
func mergeState(old json.RawMessage, patch any) (json.RawMessage, error) {
	raw, err := Marshal(patch)
	if err != nil {
		return nil, err
	}
	if merged, ok := mergeObjects(old, raw); ok {
		if jsonvalue.Checking() {
			checkMerged(old, raw, merged)
		}
		return merged, nil
	}
	return mergeMaps(old, raw), nil
}

// mergeMaps is mergeState by way of maps: what mergeObjects's splice gives
// whenever it applies, and the answer for everything else.
func mergeMaps(old, raw json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return raw
	}
	var base map[string]json.RawMessage
	if len(old) == 0 || json.Unmarshal(old, &base) != nil || base == nil {
		return raw
	}
	for k, v := range top {
		base[k] = v
	}
	merged, err := json.Marshal(base)
	if err != nil { // both parts are valid JSON objects: it cannot fail
		panic("core: merging two task states: " + err.Error())
	}
	return merged
}

// CreateConversation creates a conversation and returns its id. With an
// Owner, the owner task records the new conversation in its owns in the same
// commit.
func (tx *Tx) CreateConversation(spec ConversationSpec) storage.ID {
	if tx.err != nil {
		return 0
	}
	if tx.scratchTask != 0 {
		return tx.fail(Rejectf(RuleMainInScratch, tx.scratchTask, "conversation in a scratch commit"))
	}
	id := tx.next()
	c := &storage.Conversation{ID: id, Owner: spec.Owner}
	if spec.Parent != nil {
		p := *spec.Parent
		c.Parent = &p
	}
	if spec.Owner != 0 {
		owner, err := tx.current(spec.Owner)
		if err != nil {
			return tx.fail(err)
		}
		if !owner.Live() {
			return tx.fail(Rejectf(RuleTaskTerminal, spec.Owner, "terminal task %d cannot own a new conversation", spec.Owner))
		}
	}
	if tx.convs == nil {
		tx.convs = map[storage.ID]*storage.Conversation{}
	}
	tx.convs[id] = c
	tx.push(storage.Write{Type: storage.WriteCreateConversation, Conversation: c})
	if spec.Owner != 0 {
		tx.addOwned(spec.Owner, id)
	}
	return id
}

// addOwned records conversation id in the owner's owns: in the creating
// write when the owner was created in this batch, else with a patch.
func (tx *Tx) addOwned(owner, id storage.ID) {
	t := tx.tasks[owner]
	if i, ok := tx.taskAt[owner]; ok {
		// Created in this batch: the creating write carries the owns. Only
		// its owns change; a later patch in the batch keeps its own record.
		created := *tx.writes[i].Task
		created.Owns = append(slices.Clone(created.Owns), id)
		tx.writes[i].Task = &created
		current := *t
		current.Owns = append(slices.Clone(t.Owns), id)
		tx.remember(&current)
		return
	}
	if t == nil {
		t, _ = tx.current(owner) // exists: CreateConversation checked it
	}
	next := *t
	next.Owns = append(slices.Clone(t.Owns), id)
	tx.remember(&next)
	tx.push(storage.Write{Type: storage.WritePatch, ID: owner, Owns: next.Owns})
}

// Fork creates a conversation whose transcript starts as source's logical
// transcript through entry at, shared by reference.
func (tx *Tx) Fork(source, at storage.ID) storage.ID {
	return tx.CreateConversation(ConversationSpec{Parent: &storage.ParentRef{ConversationID: source, At: at}})
}

// DeleteConversation deletes a conversation. Entries inherited by forks stay
// readable through them.
func (tx *Tx) DeleteConversation(id storage.ID) {
	if tx.err != nil {
		return
	}
	tx.push(storage.Write{Type: storage.WriteDeleteConversation, ID: id})
}

// PendingEntry returns an entry this transaction appended, as it will be
// committed; reads (GetEntry) see committed state only.
func (tx *Tx) PendingEntry(id storage.ID) (*storage.Entry, bool) {
	e, ok := tx.entries[id]
	return e, ok
}

// Busy reports whether conversation conv has live foreground tasks as
// committed: the driver's count, read on the line. A transaction of a bare
// line (no harness, no driver) sees no live work.
func (tx *Tx) Busy(conv storage.ID) bool {
	return tx.h != nil && tx.h.d.fg[conv] > 0
}

// LiveTasks returns the ids of conversation conv's live tasks of a kind as
// committed, ascending: the driver's index of live work, read on the line,
// never a scan of history. It is how a kind keeps "one live task of this
// kind per conversation" (a collapse) or finds the task to wait on. A
// transaction of a bare line asks the store.
func (tx *Tx) LiveTasks(conv storage.ID, kind string) ([]storage.ID, error) {
	if tx.h == nil {
		live := true
		tasks, err := storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Task], error) {
			return tx.store.ScanTasks(tx.ctx, storage.TaskQuery{Cursor: c, ConversationIDs: []storage.ID{conv}, Live: &live, Kind: kind})
		})
		ids := make([]storage.ID, len(tasks))
		for i, t := range tasks {
			ids[i] = t.ID
		}
		return ids, err
	}
	return tx.h.d.liveOfKind(conv, kind), nil
}

// MarkForeground adds an abort mark, in this commit, to every unmarked
// live foreground task of conv's foreground set: its own and, through live
// foreground owners, those of the conversations they own (§6.3). It
// returns the conversations of that set, conv first. It is how Abort, Fork
// with Abort, and a kind that stops another's work mark it; a transaction
// of a bare line marks nothing.
func (tx *Tx) MarkForeground(conv storage.ID) []storage.ID {
	if tx.h == nil {
		return []storage.ID{conv}
	}
	return tx.h.d.markForeground(tx, conv)
}

// --- committed reads ---

// GetEntries reads committed entries by id.
func (tx *Tx) GetEntries(ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	return tx.store.GetEntries(tx.ctx, ids)
}

// GetEntry reads one committed entry.
func (tx *Tx) GetEntry(id storage.ID) (*storage.Entry, bool, error) {
	m, err := tx.store.GetEntries(tx.ctx, []storage.ID{id})
	e, ok := m[id]
	return e, ok, err
}

// Entries reads a page of conversation conv's committed transcript (fork
// aware, as Harness.Entries), on the line, so that what a plan decides
// from it still holds when its batch commits.
func (tx *Tx) Entries(conv storage.ID, c storage.Cursor) (storage.Page[*storage.Entry], error) {
	return tx.store.ScanEntries(tx.ctx, storage.EntryQuery{Cursor: c, ConversationID: conv})
}

// GetTasks reads committed tasks by id, terminal ones included.
func (tx *Tx) GetTasks(ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	return tx.store.GetTasks(tx.ctx, ids)
}

// GetTask reads one committed task.
func (tx *Tx) GetTask(id storage.ID) (*storage.Task, bool, error) {
	m, err := tx.store.GetTasks(tx.ctx, []storage.ID{id})
	t, ok := m[id]
	return t, ok, err
}

// ScratchTx builds one task's scratch commit: state writes to that task's
// scratch scope only. Unbound scratch addresses are bound to the task.
type ScratchTx struct{ tx *Tx }

// SetValue sets a scratch value.
func (s ScratchTx) SetValue(addr storage.Address, v any) { s.tx.SetValue(addr, v) }

// DeleteValue deletes a scratch value.
func (s ScratchTx) DeleteValue(addr storage.Address) { s.tx.DeleteValue(addr) }

// Append appends to a scratch list.
func (s ScratchTx) Append(addr storage.Address, v any) storage.ID { return s.tx.Append(addr, v) }

// Remove removes a scratch list element.
func (s ScratchTx) Remove(addr storage.Address, element storage.ID) { s.tx.Remove(addr, element) }

// Clear clears a scratch list.
func (s ScratchTx) Clear(addr storage.Address) { s.tx.Clear(addr) }

// GetValue reads committed scratch.
func (s ScratchTx) GetValue(addr storage.Address) (storage.Version, bool, error) {
	return s.tx.GetValue(addr, 0)
}

// ReadList reads a committed scratch list.
func (s ScratchTx) ReadList(addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	return s.tx.ReadList(addr, q)
}

// Err returns the first rule a builder broke, if any.
func (s ScratchTx) Err() error { return s.tx.err }
