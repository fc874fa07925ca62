package core

import (
	"context"
	"fmt"
	"slices"

	"github.com/pico-go/pico/core/ai"
	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// ContextEntry is one entry of a derived context with the messages it
// contributes after edits.
type ContextEntry struct {
	Entry    *storage.Entry
	Messages []ai.Message
	// Replaced is true when a context edit replaced the entry's model.
	Replaced bool
}

// Context is a conversation's derived context at a target (§2.2): the newest
// visible head, then the entries of the range from its boundary with every
// head excluded and edits folded. Nothing here is stored; nothing here runs
// entry-kind code.
type Context struct {
	ConversationID storage.ID
	Through        storage.ID // the target; entries after it are not considered
	Head           *storage.Entry
	Entries        []ContextEntry
}

// DeriveContext derives the context of a conversation through an entry
// (0 = everything committed). Its storage work is one head lookup and the
// fork-aware range from the head's boundary, never unrelated history.
func DeriveContext(ctx context.Context, store storage.Storage, conversationID, through storage.ID) (*Context, error) {
	if through == 0 {
		through = store.LastSeq()
	}
	c := &Context{ConversationID: conversationID, Through: through}
	head, rng, err := deriveRange(ctx, store, conversationID, through)
	if err != nil {
		return nil, err
	}
	c.Head = head
	c.Entries = fold(head, rng)
	return c, nil
}

// deriveRange reads the newest visible head at through and the fork-aware
// candidate range from its boundary.
func deriveRange(ctx context.Context, store storage.Storage, conversationID, through storage.ID) (*storage.Entry, []*storage.Entry, error) {
	head, ok, err := store.NewestHead(ctx, conversationID, through)
	if err != nil {
		return nil, nil, err
	}
	from := storage.ID(0)
	if ok {
		from = head.Head
	} else {
		head = nil
	}
	rng, err := scanRange(ctx, store, storage.EntryQuery{ConversationID: conversationID, From: from, Through: through})
	return head, rng, err
}

// scanRange reads every page of an entry query (its cursor is the walk's).
func scanRange(ctx context.Context, store storage.Storage, q storage.EntryQuery) ([]*storage.Entry, error) {
	after := q.After
	return storage.AllPages(func(c storage.Cursor) (storage.Page[*storage.Entry], error) {
		q.Cursor = c
		q.After = max(c.After, after)
		return store.ScanEntries(ctx, q)
	})
}

// fold applies the derivation rule to a head and its range.
func fold(head *storage.Entry, rng []*storage.Entry) []ContextEntry {
	// Edits fold in transcript order; the newest edit of a target wins, and
	// a target outside the range is a no-op.
	inRange := make(map[storage.ID]bool, len(rng))
	for _, e := range rng {
		inRange[e.ID] = true
	}
	winning := map[storage.ID]storage.ContextEdit{}
	for _, e := range rng {
		for _, ed := range e.Edits {
			if _, seen := winning[ed.Target]; inRange[ed.Target] && !(seen && plant.On("context-edit-oldest-wins")) {
				winning[ed.Target] = ed
			}
		}
	}
	out := make([]ContextEntry, 0, len(rng)+1)
	add := func(e *storage.Entry) {
		ce := ContextEntry{Entry: e, Messages: e.Model}
		if ed, ok := winning[e.ID]; ok {
			if ed.Action == storage.EditOmit {
				return
			}
			ce.Messages, ce.Replaced = ed.Messages, true
		}
		out = append(out, ce)
	}
	if head != nil {
		add(head)
	}
	for _, e := range rng {
		if !e.IsHead() || plant.On("context-keeps-old-heads") && (head == nil || e.ID != head.ID) {
			add(e)
		}
	}
	return out
}

// IDs returns the context's entry ids in context order.
func (c *Context) IDs() []storage.ID {
	ids := make([]storage.ID, len(c.Entries))
	for i, ce := range c.Entries {
		ids[i] = ce.Entry.ID
	}
	return ids
}

// Messages concatenates the messages of the context's entries, as stored
// (after edits), without request normalization.
func (c *Context) Messages() []ai.Message {
	var out []ai.Message
	for _, ce := range c.Entries {
		out = append(out, ce.Messages...)
	}
	return out
}

// SystemFold is what the model has been told by system entries in a context:
// the newest baseline and the deltas after it. Deltas before the baseline
// (kept by a compaction) are subsumed.
type SystemFold struct {
	Baseline *storage.Entry
	Deltas   []*storage.Entry
	// Sections in render order, after applying the deltas.
	Sections []SystemSection
	// Tools is the folded tool set, in the order tools were first added.
	Tools []ai.Tool
}

// System folds the context's system entries. With no baseline in the
// context, the fold is empty: whoever next tells the model writes a fresh
// baseline.
func (c *Context) System() (SystemFold, error) {
	s := newSystemFolder(c.Head)
	for _, ce := range c.Entries {
		if err := s.add(ce.Entry); err != nil {
			return SystemFold{}, err
		}
	}
	return s.f, nil
}

// systemFolder folds system entries in context order: a baseline starts the
// fold over, a delta folds into it, and a delta before any baseline is
// subsumed by the baseline that will come. A head starts a new epoch
// (§8.2): the system entries a summary retained, older than the head, were
// the old epoch's and count for nothing, so the next generation writes a
// fresh baseline.
type systemFolder struct {
	f     SystemFold
	epoch storage.ID // the head's id; older system entries are skipped
}

func newSystemFolder(head *storage.Entry) systemFolder {
	if head == nil {
		return systemFolder{}
	}
	return systemFolder{epoch: head.ID}
}

func (s *systemFolder) add(e *storage.Entry) error {
	if !SystemKind.Is(e) || e.ID < s.epoch {
		return nil
	}
	d, err := systemData(e)
	if err != nil {
		return err
	}
	switch {
	case d.Baseline:
		s.f = SystemFold{Baseline: e}
	case s.f.Baseline == nil:
		return nil
	default:
		s.f.Deltas = append(s.f.Deltas, e)
	}
	s.f.Sections = FoldSections(s.f.Sections, d.Sections)
	s.f.Tools = FoldTools(s.f.Tools, d.ToolsRemoved, d.ToolsAdded)
	return nil
}

// fold returns the fold so far, sharing nothing later folding changes.
func (s *systemFolder) fold() SystemFold {
	n := len(s.f.Deltas)
	return SystemFold{Baseline: s.f.Baseline, Deltas: s.f.Deltas[:n:n], Sections: slices.Clone(s.f.Sections), Tools: slices.Clone(s.f.Tools)}
}

// FoldSections applies section changes to cur in order, as a system entry
// does: a known key is replaced in place, a new key is appended, and a nil
// Text removes the key. It may reuse cur's array; pass a copy to keep it.
func FoldSections(cur, changes []SystemSection) []SystemSection {
	for _, s := range changes {
		i := slices.IndexFunc(cur, func(c SystemSection) bool { return c.Key == s.Key })
		switch {
		case s.Text == nil && i >= 0:
			cur = slices.Delete(cur, i, i+1)
		case s.Text == nil:
		case i >= 0:
			cur[i] = s
		default:
			cur = append(cur, s)
		}
	}
	return cur
}

// FoldTools applies a system entry's tool changes to cur, removals before
// additions: a removed tool leaves by name, an added one replaces the tool
// of its name in place or is appended. It may reuse cur's array.
func FoldTools(cur []ai.Tool, removed, added []ai.Tool) []ai.Tool {
	for _, r := range removed {
		cur = slices.DeleteFunc(cur, func(t ai.Tool) bool { return t.Name == r.Name })
	}
	for _, a := range added {
		if i := slices.IndexFunc(cur, func(t ai.Tool) bool { return t.Name == a.Name }); i >= 0 {
			cur[i] = a
		} else {
			cur = append(cur, a)
		}
	}
	return cur
}

// missingResultText is the body of a tool result supplied for a request
// because the transcript has none (a fork cut an exchange, §3.2).
const missingResultText = "No result provided"

// Request projects the context for a model request:
//   - system entries before the newest baseline are dropped (subsumed) and
//     the baseline's message moves to the front, the provider's baseline slot;
//   - assistant messages that ended in error or were aborted are excluded;
//   - tool results follow their assistant message in call order, and a call
//     without a result gets an error result for this request only;
//   - a tool result whose call is not in the context is dropped.
//
// The stored transcript is never changed.
func (c *Context) Request() ([]ai.Message, error) {
	fold, err := c.System()
	if err != nil {
		return nil, err
	}
	// One pass pairs each call with its result; a second emits the
	// messages with results placed. Nothing is copied twice: a request is
	// rebuilt every turn, so its cost is the context's size and no more.
	pairs := newCallPairs()
	size := 0
	for _, ce := range c.Entries {
		size += len(ce.Messages)
		for i := range ce.Messages {
			pairs.add(&ce.Messages[i])
		}
	}
	out := make([]ai.Message, 0, size)
	inPlace := plant.On("request-baseline-in-place")
	for _, ce := range c.Entries {
		if fold.Baseline != nil && ce.Entry == fold.Baseline && !inPlace {
			out = append(out, ce.Messages...) // the baseline slot, as edited
		}
	}
	subsumed := fold.Baseline != nil
	epoch := newSystemFolder(c.Head).epoch
	for _, ce := range c.Entries {
		switch {
		case fold.Baseline != nil && ce.Entry == fold.Baseline:
			subsumed = false
			if inPlace {
				out = append(out, ce.Messages...)
			}
			continue
		case (subsumed || ce.Entry.ID < epoch) && SystemKind.Is(ce.Entry):
			continue // subsumed, or of the epoch before the head
		}
		for i := range ce.Messages {
			m := &ce.Messages[i]
			switch {
			case m.Role == ai.RoleToolResult:
				continue // placed with its call, or dropped as an orphan
			case !answers(m):
				continue
			}
			out = append(out, *m)
			if m.Role == ai.RoleAssistant {
				out = pairs.place(out, m, false)
			}
		}
	}
	return out, nil
}

// answers reports whether m is a message a request keeps: anything but an
// assistant message that ended in an error or was aborted, which never
// makes tool calls (§2.2).
func answers(m *ai.Message) bool {
	return m.Role != ai.RoleAssistant || m.StopReason != ai.StopError && m.StopReason != ai.StopAborted
}

// callSlot is one call of one assistant message: its result goes there.
type callSlot struct {
	m  *ai.Message
	id string
}

// callPairs pairs tool results with the calls they answer, in context
// order: a result answers the newest assistant message before it that
// made a call of its id and has no result for it yet. Providers may use
// a call id again in a later answer (many number their calls per answer),
// so an id names a call only together with the answer that made it. A
// call's first result is its result; a result with no such call before it
// is an orphan, dropped.
type callPairs struct {
	open    map[string]*ai.Message // call id → the answer whose call of it awaits a result
	results map[callSlot]*ai.Message
}

func newCallPairs() callPairs {
	return callPairs{open: map[string]*ai.Message{}, results: map[callSlot]*ai.Message{}}
}

// add takes the next message of the context.
func (p callPairs) add(m *ai.Message) {
	switch {
	case m.Role == ai.RoleAssistant && answers(m):
		for _, b := range m.Content.Blocks {
			if b.Type == ai.BlockToolCall && !(plant.On("call-id-answered-once") && p.answered(b.ID)) {
				p.open[b.ID] = m // a newer call of the id takes the results after it
			}
		}
	case m.Role == ai.RoleToolResult:
		if a, ok := p.open[m.ToolCallID]; ok {
			p.results[callSlot{a, m.ToolCallID}] = m
			delete(p.open, m.ToolCallID)
		}
	}
}

// answered reports whether a call of id has a result (for a planted bug:
// a session where an id names one call).
func (p callPairs) answered(id string) bool {
	for slot := range p.results {
		if slot.id == id {
			return true
		}
	}
	return false
}

// awaits reports whether a call of m may still be answered by a result
// added later: its projection is not final.
func (p callPairs) awaits(m *ai.Message) bool {
	for _, b := range m.Content.Blocks {
		if b.Type == ai.BlockToolCall && p.open[b.ID] == m {
			return true
		}
	}
	return false
}

// place appends the results of assistant message m's calls in call order,
// supplying an error result for a call without one (a fork cut its
// exchange, §3.2) unless skipMissing. An answer that names one id twice
// gets its result once, at the first call.
func (p callPairs) place(out []ai.Message, m *ai.Message, skipMissing bool) []ai.Message {
	for i, b := range m.Content.Blocks {
		if b.Type != ai.BlockToolCall {
			continue
		}
		r, ok := p.results[callSlot{m, b.ID}]
		if ok && (!slices.ContainsFunc(m.Content.Blocks[:i], func(c ai.Block) bool { return c.Type == ai.BlockToolCall && c.ID == b.ID }) ||
			plant.On("result-at-every-call-of-an-id")) {
			out = append(out, *r)
		} else if !skipMissing {
			out = append(out, ai.Message{
				Role: ai.RoleToolResult, ToolCallID: b.ID, ToolName: b.Name,
				Content: ai.Blocks(ai.Text(missingResultText)), IsError: ai.Bool(true), Timestamp: m.Timestamp,
			})
		}
	}
	return out
}

// String describes the context briefly, for logs and test failures.
func (c *Context) String() string {
	return fmt.Sprintf("context(conversation %d through %d: %v)", c.ConversationID, c.Through, c.IDs())
}
