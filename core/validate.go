package core

import (
	"context"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

// ownershipDepthMax bounds the walk from a conversation to the root of its
// ownership tree; a deeper chain means corrupt links, not a real session.
const ownershipDepthMax = 10_000

// validate checks the structural rules of §7.3 that need the transcript:
// heads and edits must name visible entries and heads never move backwards;
// dependencies must be earlier tasks of the same ownership tree. Registered
// batch rules run after it (the agent's input-result machine is one); the
// storage backend separately checks ids, references and scopes.
func (tx *Tx) validate() error {
	heads := map[storage.ID]storage.ID{} // conversation → newest boundary written by this batch
	for _, w := range tx.writes {
		switch w.Type {
		case storage.WriteEntry:
			if err := tx.checkEntry(w.Entry, heads); err != nil {
				return err
			}
		case storage.WriteTask:
			if err := tx.checkDependencies(w.Task); err != nil {
				return err
			}
		}
	}
	return nil
}

func (tx *Tx) checkEntry(e *storage.Entry, heads map[storage.ID]storage.ID) error {
	if ok, err := tx.conversationExists(e.ConversationID); err != nil {
		return err
	} else if !ok {
		return Rejectf(RuleUnknownConv, e.ConversationID, "entry %d is for conversation %d, which does not exist", e.ID, e.ConversationID)
	}
	for _, ed := range e.Edits {
		ok, err := tx.visible(e.ConversationID, ed.Target)
		if err != nil {
			return err
		}
		if (!ok || ed.Target >= e.ID) && !plant.On("edit-target-unchecked") {
			return Rejectf(RuleEditTarget, ed.Target, "entry %d edits %d, which is not an earlier visible entry of conversation %d", e.ID, ed.Target, e.ConversationID)
		}
	}
	if e.Head == 0 {
		return nil
	}
	if e.Head != e.ID {
		ok, err := tx.visible(e.ConversationID, e.Head)
		if err != nil {
			return err
		}
		if !ok {
			return Rejectf(RuleHeadNotVisible, e.Head, "entry %d's head %d is not visible in conversation %d", e.ID, e.Head, e.ConversationID)
		}
	}
	prev, ok := heads[e.ConversationID]
	if !ok {
		var err error
		if prev, err = tx.committedHead(e.ConversationID); err != nil {
			return err
		}
	}
	if e.Head < prev && !plant.On("head-backwards-allowed") {
		return Rejectf(RuleHeadBackwards, e.Head, "entry %d's head %d is before the previous visible head %d", e.ID, e.Head, prev)
	}
	heads[e.ConversationID] = e.Head
	return nil
}

// committedHead is the boundary of the newest committed head visible in a
// conversation (0 when there is none). A conversation created in this batch
// sees its fork source's head at the fork point.
func (tx *Tx) committedHead(conv storage.ID) (storage.ID, error) {
	at := storage.ID(0)
	for c, ok := tx.convs[conv]; ok; c, ok = tx.convs[conv] {
		if c.Parent == nil || c.Parent.At == 0 { // at the start: no inherited head
			return 0, nil
		}
		conv, at = c.Parent.ConversationID, storage.MinPos(at, c.Parent.At)
	}
	h, ok, err := tx.store.NewestHead(tx.ctx, conv, at)
	if err != nil || !ok {
		return 0, err
	}
	return h.Head, nil
}

// visible reports whether entry id is in conv's logical transcript, counting
// entries this batch wrote to conv.
func (tx *Tx) visible(conv, id storage.ID) (bool, error) {
	if e, ok := tx.entries[id]; ok {
		return e.ConversationID == conv, nil
	}
	if id <= 0 || id > tx.base {
		return false, nil
	}
	at := storage.ID(0)
	for c, ok := tx.convs[conv]; ok; c, ok = tx.convs[conv] {
		if c.Parent == nil || c.Parent.At == 0 { // at the start: nothing inherited
			return false, nil
		}
		conv, at = c.Parent.ConversationID, storage.MinPos(at, c.Parent.At)
	}
	if at != 0 && (id > at || id == at && plant.On("fork-point-hidden-in-batch")) {
		return false, nil
	}
	p, err := tx.store.ScanEntries(tx.ctx, storage.EntryQuery{
		Cursor: storage.Cursor{Limit: 1}, ConversationID: conv, From: id, Through: id})
	if err != nil {
		return false, err
	}
	return len(p.Items) == 1, nil
}

// conversationExists reports whether conversation id exists for an entry
// this batch writes: created by the batch, known to the driver to exist,
// or else found in storage (and then known). The batch writes in any case,
// so a store that can no longer be written fails it all the same.
func (tx *Tx) conversationExists(id storage.ID) (bool, error) {
	if _, ok := tx.convs[id]; ok {
		return true, nil
	}
	if tx.h != nil && tx.h.d.existing[id] {
		return true, nil
	}
	got, err := tx.store.GetConversations(tx.ctx, []storage.ID{id})
	if err != nil {
		return false, err
	}
	_, ok := got[id]
	if ok && tx.h != nil {
		tx.h.d.existing[id] = true
	}
	return ok, nil
}

func (tx *Tx) checkDependencies(t *storage.Task) error {
	if len(t.After) == 0 {
		return nil
	}
	root, err := tx.ownershipRoot(t.ConversationID)
	if err != nil {
		return err
	}
	for _, dep := range t.After {
		if dep > t.ID || dep == t.ID && !plant.On("dependency-on-itself") {
			return Rejectf(RuleDependency, dep, "task %d depends on %d, which is not an earlier task", t.ID, dep)
		}
		d, err := tx.current(dep)
		if err != nil {
			if RuleOf(err) == RuleUnknownTask {
				return Rejectf(RuleDependency, dep, "task %d depends on %d, which does not exist", t.ID, dep)
			}
			return err
		}
		depRoot, err := tx.ownershipRoot(d.ConversationID)
		if err != nil {
			return err
		}
		if depRoot != root && !plant.On("dependency-any-tree") {
			return Rejectf(RuleDependencyTree, dep, "task %d (ownership root %d) depends on %d (ownership root %d)", t.ID, root, dep, depRoot)
		}
	}
	return nil
}

// ownershipRoot walks conversation → owner task → its conversation until a
// conversation has no owner. Fork provenance is not ownership.
func (tx *Tx) ownershipRoot(conv storage.ID) (storage.ID, error) {
	for range ownershipDepthMax {
		c, ok := tx.convs[conv]
		if !ok {
			got, err := tx.store.GetConversations(tx.ctx, []storage.ID{conv})
			if err != nil {
				return 0, err
			}
			rec, found := got[conv]
			if !found {
				return 0, Rejectf(RuleUnknownConv, conv, "conversation %d does not exist", conv)
			}
			c = &rec
		}
		if c.Owner == 0 {
			return conv, nil
		}
		owner, err := tx.current(c.Owner)
		if err != nil {
			return 0, err
		}
		conv = owner.ConversationID
	}
	panic("core: ownership chain longer than ownershipDepthMax: links form a cycle")
}

// ValidateBatch checks a main batch read back from storage against the
// rules of §7.3 that the commit line checked when it built the batch and
// that need the transcript: heads and edits name earlier visible entries and
// heads never move backwards, and dependencies are earlier tasks of the same
// ownership tree; then it runs rules, the batch rules the session was opened
// with (agent.ValidateBatch passes the agent's). store is the session as it
// stood before the batch. Tools that read a session's history, such as
// picosim check, run it on every batch; a scratch batch holds only its
// task's scratch and passes. A broken rule is a *CommitError naming it; any
// other error is the store's.
func ValidateBatch(ctx context.Context, store storage.Storage, batch storage.CommitBatch, rules ...BatchRule) error {
	if batch.Kind == storage.BatchScratch {
		return nil
	}
	tx := newTx(ctx, store, nil)
	for _, w := range batch.Writes {
		switch {
		case w.Type == storage.WriteCreateConversation && w.Conversation != nil:
			if tx.convs == nil {
				tx.convs = map[storage.ID]*storage.Conversation{}
			}
			c := *w.Conversation
			tx.convs[c.ID] = &c
		case w.Type == storage.WriteEntry && w.Entry != nil:
			if tx.entries == nil {
				tx.entries = map[storage.ID]*storage.Entry{}
			}
			tx.entries[w.Entry.ID] = w.Entry
		case w.Type == storage.WriteTask && w.Task != nil:
			tx.remember(w.Task)
		}
		tx.writes = append(tx.writes, w)
	}
	if err := tx.validate(); err != nil {
		return err
	}
	return checkRules(ctx, store, batch, rules)
}
