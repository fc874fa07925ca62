package storage

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pico-go/pico/internal/jsonvalue"
	"github.com/pico-go/pico/internal/plant"
)

// Lookup is the committed state CheckBatch consults. Every backend
// implements it over its own indexes, so the structural rules of a batch are
// written once, here.
type Lookup interface {
	// LookupConversation returns a conversation that exists and is not deleted.
	LookupConversation(ctx context.Context, id ID) (Conversation, bool, error)
	// LookupTask returns a task record, terminal or not. Its State may be
	// left out (SQLite's lookups do): no rule reads a stored task's state.
	LookupTask(ctx context.Context, id ID) (*Task, bool, error)
	// EntryVisible reports whether entry id is in the logical transcript of
	// the conversation.
	EntryVisible(ctx context.Context, conversationID, id ID) (bool, error)
	// StatePolicy reports whether state exists under the address's state key
	// and, if so, whether it is rewindable and whether it is a list.
	StatePolicy(ctx context.Context, addr Address) (exists, rewind, list bool, err error)
	// ListHas reports whether element is visible in the list as of at
	// (0 = now; at is only ever non-zero for rewindable conversation lists).
	ListHas(ctx context.Context, addr Address, at, element ID) (bool, error)
}

// CheckBatch validates the structure of batch against committed state and
// lastSeq: write types per batch kind, addresses and scopes, ids that match
// their sequence, references to existing records (earlier writes of the same
// batch count), task roles, and JSON payloads. It runs no kind code and knows
// no kind. A nil error means the batch can be applied without failing.
func CheckBatch(ctx context.Context, l Lookup, lastSeq ID, batch CommitBatch) error {
	return checkWith(ctx, l, lastSeq, batch, false)
}

// CheckDecodedBatch is CheckBatch for a batch decoded from JSON text (a
// replayed line): the decoder parsed every raw value in it (a write's value
// and state, an entry's data, a task's state) as JSON, so they are not
// scanned again. Every other rule is CheckBatch's.
func CheckDecodedBatch(ctx context.Context, l Lookup, lastSeq ID, batch CommitBatch) error {
	return checkWith(ctx, l, lastSeq, batch, true)
}

// checkers keeps checkers between batches: a commit would otherwise make a
// checker and the pair lists of its maps anew.
var checkers = sync.Pool{New: func() any { return new(checker) }}

func checkWith(ctx context.Context, l Lookup, lastSeq ID, batch CommitBatch, decoded bool) error {
	c := checkers.Get().(*checker)
	c.ctx, c.l, c.lastSeq, c.decoded = ctx, l, lastSeq, decoded
	err := c.check(batch)
	c.reset()
	checkers.Put(c)
	return err
}

type statePolicy struct{ rewind, list bool }

// elementRef is one element of a list.
type elementRef struct {
	list StateRef
	id   ID
}

type checker struct {
	ctx     context.Context
	l       Lookup
	lastSeq ID
	convs   batchMap[ID, bool]  // created (true) or deleted (false) in this batch
	tasks   batchMap[ID, *Task] // created or changed in this batch
	entries batchMap[ID, ID]    // entry id → conversation, created in this batch
	policy  batchMap[StateRef, statePolicy]
	elems   batchMap[elementRef, bool] // visible or not, touched in this batch
	cleared batchMap[StateRef, bool]
	created batchMap[ID, *Conversation] // conversations created in this batch
	owns    [][2]ID                     // (task, conversation) ownership claims, checked at the end
	// decoded is set for a batch whose raw values a JSON decoder parsed
	// (CheckDecodedBatch).
	decoded bool
}

// reset empties c for another batch; it keeps nothing of the last one.
func (c *checker) reset() {
	c.ctx, c.l = nil, nil
	c.convs.reset()
	c.tasks.reset()
	c.entries.reset()
	c.policy.reset()
	c.elems.reset()
	c.cleared.reset()
	c.created.reset()
	c.owns = c.owns[:0]
}

func (c *checker) check(batch CommitBatch) error {
	switch batch.Kind {
	case BatchMain:
		if batch.Task != 0 {
			return &BatchError{Index: -1, Rule: "a main batch names no task"}
		}
	case BatchScratch:
		t, ok, err := c.task(batch.Task)
		if err != nil {
			return err
		}
		if !ok {
			return &BatchError{Index: -1, Rule: fmt.Sprintf("scratch batch for unknown task %d", batch.Task)}
		}
		if !t.Live() {
			return &BatchError{Index: -1, Rule: fmt.Sprintf("scratch batch for terminal task %d: its scratch is retired", batch.Task)}
		}
	default:
		return &BatchError{Index: -1, Rule: fmt.Sprintf("unknown batch kind %q", batch.Kind)}
	}
	for i := range batch.Writes {
		w := &batch.Writes[i]
		seq := c.lastSeq + 1 + ID(i)
		if err := c.write(batch, w, seq); err != nil {
			if be, ok := err.(*BatchError); ok {
				be.Index, be.Seq, be.Type = i, seq, w.Type
				return be
			}
			return err
		}
	}
	return c.checkOwnership()
}

// checkOwnership runs after every write: a task may list a conversation
// created later in the same batch, but by the end every claimed conversation
// must exist and name the task as its owner.
func (c *checker) checkOwnership() error {
	for _, o := range c.owns {
		task, id := o[0], o[1]
		conv, ok := c.created.get(id)
		if !ok {
			rec, found, err := c.l.LookupConversation(c.ctx, id)
			if err != nil {
				return err
			}
			if !found {
				return &BatchError{Index: -1, Rule: fmt.Sprintf("task %d owns unknown conversation %d", task, id)}
			}
			conv = &rec
		}
		if conv.Owner != task {
			return &BatchError{Index: -1, Rule: fmt.Sprintf("task %d lists conversation %d in owns, but its owner is %d", task, id, conv.Owner)}
		}
	}
	return nil
}

// valid reports whether a raw value is JSON: scanned, unless the batch was
// decoded from JSON.
func (c *checker) valid(raw []byte) bool { return c.decoded || jsonvalue.Valid(raw) }

func reject(rule string, args ...any) *BatchError {
	return &BatchError{Rule: fmt.Sprintf(rule, args...)}
}

func (c *checker) write(batch CommitBatch, w *Write, seq ID) error {
	if batch.Kind == BatchScratch && !w.Type.IsState() {
		return reject("a scratch batch carries only state writes")
	}
	switch w.Type {
	case WriteValueSet, WriteValueDelete, WriteListAppend, WriteListRemove, WriteListClear:
		return c.state(batch, w, seq)
	case WriteCreateConversation:
		return c.createConversation(w, seq)
	case WriteDeleteConversation:
		ok, err := c.conv(w.ID)
		if err != nil {
			return err
		}
		if !ok {
			return reject("conversation %d does not exist", w.ID)
		}
		c.convs.set(w.ID, false)
		return nil
	case WriteEntry:
		return c.entry(w, seq)
	case WriteTask:
		return c.newTask(w, seq)
	case WritePatch, WriteSettle:
		return c.changeTask(w)
	}
	return reject("unknown write type %q", w.Type)
}

func (c *checker) state(batch CommitBatch, w *Write, seq ID) error {
	if w.Addr == nil {
		return reject("state write without an address")
	}
	a := *w.Addr
	if err := a.Validate(); err != nil {
		return &BatchError{Rule: "bad address", Err: err}
	}
	switch {
	case batch.Kind == BatchScratch && (a.Scope.Kind != ScopeScratch || a.Scope.ID != batch.Task):
		return reject("scratch batch of task %d writes %s", batch.Task, a.Scope)
	case batch.Kind == BatchMain && a.Scope.Kind == ScopeScratch:
		return reject("main batch writes scratch %s (main and scratch writes never mix)", a.Scope)
	}
	if a.Scope.Kind == ScopeConversation {
		ok, err := c.conv(a.Scope.ID)
		if err != nil {
			return err
		}
		if !ok {
			return reject("conversation %d does not exist", a.Scope.ID)
		}
	}
	isList := w.Type == WriteListAppend || w.Type == WriteListRemove || w.Type == WriteListClear
	key := a.Ref()
	p, known := c.policy.get(key)
	if !known {
		exists, rewind, list, err := c.l.StatePolicy(c.ctx, a)
		if err != nil {
			return err
		}
		known, p = exists, statePolicy{rewind: rewind, list: list}
	}
	if known {
		if p.rewind != a.Rewind && !plant.On("state-policy-change-allowed") {
			return reject("%s is stored with rewind=%v; its policy cannot change", a.StateKey(), p.rewind)
		}
		if p.list != isList {
			return reject("%s is a %s, not a %s", a.StateKey(), kindWord(p.list), kindWord(isList))
		}
	}
	c.policy.set(key, statePolicy{rewind: a.Rewind, list: isList})
	switch w.Type {
	case WriteValueSet, WriteListAppend:
		if len(w.Value) == 0 || !c.valid(w.Value) {
			return reject("value is not valid JSON")
		}
		if w.Type == WriteListAppend {
			c.elems.set(elementRef{key, seq}, true)
		}
	case WriteListRemove:
		visible, err := c.listHas(a, key, w.Element)
		if err != nil {
			return err
		}
		if !visible {
			return reject("element %d is not in list %s", w.Element, a)
		}
		if !plant.On("remove-twice-allowed") {
			c.elems.set(elementRef{key, w.Element}, false)
		}
	case WriteListClear:
		c.cleared.set(key, true)
		c.elems.deleteFunc(func(e elementRef) bool { return e.list == key })
	}
	return nil
}

func kindWord(list bool) string {
	if list {
		return "list"
	}
	return "value"
}

func (c *checker) listHas(a Address, key StateRef, element ID) (bool, error) {
	if v, ok := c.elems.get(elementRef{key, element}); ok {
		return v, nil
	}
	if cleared, _ := c.cleared.get(key); cleared || element <= 0 {
		return false, nil
	}
	// A fork created in this batch inherits its source's list as of the fork
	// point; it has no local elements yet.
	at := ID(0)
	for conv, ok := c.created.get(a.Scope.ID); ok && a.Historical(); conv, ok = c.created.get(a.Scope.ID) {
		if conv.Parent == nil {
			return false, nil
		}
		a.Scope.ID, at = conv.Parent.ConversationID, MinPos(at, conv.Parent.At)
	}
	return c.l.ListHas(c.ctx, a, at, element)
}

func (c *checker) createConversation(w *Write, seq ID) error {
	conv := w.Conversation
	if conv == nil {
		return reject("createConversation without a conversation")
	}
	if conv.ID != seq {
		return reject("conversation id %d is not its sequence %d", conv.ID, seq)
	}
	if p := conv.Parent; p != nil {
		ok, err := c.conv(p.ConversationID)
		if err != nil {
			return err
		}
		if !ok {
			return reject("parent conversation %d does not exist", p.ConversationID)
		}
		if p.At != 0 { // 0 forks at the start: nothing is inherited
			visible, err := c.entryVisible(p.ConversationID, p.At)
			if err != nil {
				return err
			}
			if !visible {
				return reject("fork point %d is not an entry of conversation %d", p.At, p.ConversationID)
			}
		}
	}
	if conv.Owner != 0 {
		if _, ok, err := c.task(conv.Owner); err != nil {
			return err
		} else if !ok {
			return reject("owner task %d does not exist", conv.Owner)
		}
	}
	c.convs.set(seq, true)
	c.created.set(seq, conv)
	return nil
}

func (c *checker) entry(w *Write, seq ID) error {
	e := w.Entry
	if e == nil {
		return reject("entry write without an entry")
	}
	if e.ID != seq {
		return reject("entry id %d is not its sequence %d", e.ID, seq)
	}
	if e.Kind == "" {
		return reject("entry %d has no kind", e.ID)
	}
	ok, err := c.conv(e.ConversationID)
	if err != nil {
		return err
	}
	if !ok {
		return reject("conversation %d does not exist", e.ConversationID)
	}
	if len(e.Data) != 0 && !c.valid(e.Data) {
		return reject("entry %d data is not valid JSON", e.ID)
	}
	for i := range e.Model {
		// Held as given, a message must be what a store reads back.
		if c.decoded {
			break
		}
		if err := e.Model[i].CheckCanonical(); err != nil {
			return reject("entry %d model message %d: %v", e.ID, i, err)
		}
	}
	if name := setButEmpty(field{"data", e.Data != nil, len(e.Data)}, field{"model", e.Model != nil, len(e.Model)}, field{"edits", e.Edits != nil, len(e.Edits)}); name != "" {
		return reject("entry %d has an empty %s; leave it out", e.ID, name)
	}
	if e.Head < 0 || e.Head > e.ID {
		return reject("entry %d head %d is not an earlier or its own entry", e.ID, e.Head)
	}
	for _, ed := range e.Edits {
		if ed.Target <= 0 || ed.Target >= e.ID {
			return reject("entry %d edits %d, which is not an earlier entry", e.ID, ed.Target)
		}
		if ed.Action != EditOmit && (ed.Action != EditReplace || plant.On("edit-replace-refused")) {
			return reject("entry %d edit of %d has unknown action %q", e.ID, ed.Target, ed.Action)
		}
		if setButEmpty(field{"messages", ed.Messages != nil, len(ed.Messages)}) != "" {
			return reject("entry %d edit of %d has empty messages; leave them out", e.ID, ed.Target)
		}
	}
	if e.ByTaskID != 0 {
		if _, ok, err := c.task(e.ByTaskID); err != nil {
			return err
		} else if !ok {
			return reject("entry %d names unknown task %d", e.ID, e.ByTaskID)
		}
	}
	c.entries.set(seq, e.ConversationID)
	return nil
}

func (c *checker) newTask(w *Write, seq ID) error {
	t := w.Task
	if t == nil {
		return reject("task write without a task")
	}
	if t.ID != seq {
		return reject("task id %d is not its sequence %d", t.ID, seq)
	}
	if t.Kind == "" || t.Status == "" {
		return reject("task %d needs a kind and a status", t.ID)
	}
	if !t.Role.Valid() {
		return reject("task %d has unknown role %q", t.ID, t.Role)
	}
	if t.Role == RoleTerminal {
		return reject("task %d is created terminal", t.ID)
	}
	if len(t.State) != 0 && !c.valid(t.State) {
		return reject("task %d state is not valid JSON", t.ID)
	}
	if name := setButEmpty(field{"state", t.State != nil, len(t.State)}, field{"after", t.After != nil, len(t.After)}, field{"owns", t.Owns != nil, len(t.Owns)}); name != "" {
		return reject("task %d has an empty %s; leave it out", t.ID, name)
	}
	ok, err := c.conv(t.ConversationID)
	if err != nil {
		return err
	}
	if !ok {
		return reject("conversation %d does not exist", t.ConversationID)
	}
	for _, dep := range t.After {
		if dep >= t.ID {
			return reject("task %d depends on %d, which is not an earlier task", t.ID, dep)
		}
		if _, ok, err := c.task(dep); err != nil {
			return err
		} else if !ok {
			return reject("task %d depends on unknown task %d", t.ID, dep)
		}
	}
	for _, owned := range t.Owns {
		c.owns = append(c.owns, [2]ID{t.ID, owned})
	}
	c.tasks.set(seq, t)
	return nil
}

func (c *checker) changeTask(w *Write) error {
	t, ok, err := c.task(w.ID)
	if err != nil {
		return err
	}
	if !ok {
		return reject("task %d does not exist", w.ID)
	}
	if !t.Live() {
		return reject("task %d is terminal; it is never changed again", w.ID)
	}
	if len(w.State) != 0 && !c.valid(w.State) {
		return reject("task %d state is not valid JSON", w.ID)
	}
	if name := setButEmpty(field{"state", w.State != nil, len(w.State)}, field{"owns", w.Owns != nil, len(w.Owns)}); name != "" {
		return reject("%s of task %d has an empty %s; leave it out", w.Type, w.ID, name)
	}
	next := *t
	if w.Type == WriteSettle {
		if w.Status == "" || w.Role != RoleTerminal {
			return reject("settle of task %d needs a terminal status", w.ID)
		}
	} else if (w.Status == "") != (w.Role == "") {
		return reject("patch of task %d must carry status and role together", w.ID)
	} else if w.Role == RoleTerminal {
		return reject("patch of task %d to a terminal role; settle it instead", w.ID)
	} else if w.Role != "" && !w.Role.Valid() {
		return reject("patch of task %d has unknown role %q", w.ID, w.Role)
	}
	for _, owned := range w.Owns {
		if !slices.Contains(t.Owns, owned) { // earlier claims were checked when made
			c.owns = append(c.owns, [2]ID{w.ID, owned})
		}
	}
	if w.Owns != nil {
		next.Owns = w.Owns
	}
	if w.Role != "" {
		next.Status, next.Role = w.Status, w.Role
	}
	c.tasks.set(w.ID, &next)
	return nil
}

// field is an optional field of a record: its name, whether it is set
// (non-nil) and its length.
type field struct {
	name string
	set  bool
	len  int
}

// setButEmpty returns the name of the first field that is set but empty.
// A batch is stored as its JSON, which leaves an empty state or list out:
// read back after a reopen it is absent, so a backend that kept it as
// empty would answer otherwise. The rule refuses what cannot round-trip.
func setButEmpty(fields ...field) string {
	for _, f := range fields {
		if f.set && f.len == 0 {
			return f.name
		}
	}
	return ""
}

func (c *checker) conv(id ID) (bool, error) {
	if v, ok := c.convs.get(id); ok {
		return v, nil
	}
	if id <= 0 {
		return false, nil
	}
	_, ok, err := c.l.LookupConversation(c.ctx, id)
	return ok, err
}

func (c *checker) task(id ID) (*Task, bool, error) {
	if t, ok := c.tasks.get(id); ok {
		return t, true, nil
	}
	if id <= 0 {
		return nil, false, nil
	}
	return c.l.LookupTask(c.ctx, id)
}

// entryVisible also accepts entries written earlier in this batch to the
// conversation itself.
func (c *checker) entryVisible(conv, id ID) (bool, error) {
	if owner, ok := c.entries.get(id); ok {
		return owner == conv, nil
	}
	if id <= 0 || id > c.lastSeq {
		return false, nil
	}
	// A fork created in this batch sees its source up to the fork point.
	for rec, ok := c.created.get(conv); ok; rec, ok = c.created.get(conv) {
		if rec.Parent == nil || id > rec.Parent.At {
			return false, nil
		}
		conv = rec.Parent.ConversationID
	}
	return c.l.EntryVisible(c.ctx, conv, id)
}

// MinPos is the smaller of two positions, where 0 means "no cap".
func MinPos(a, b ID) ID {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
