package storagetest

import (
	"math"
	"slices"

	"github.com/pico-go/pico/storage"
)

// history is the deliberately dumb reference model: the raw list of
// committed writes, each with its sequence, in order. Every answer is
// computed from it by brute force and recursion over fork parents, with no
// index and no cleverness, so that it is obviously the reference's
// semantics (§2.4, §4.2, §4.4, §7.2) and nothing else.
type history []op

type op struct {
	seq ID
	w   storage.Write
}

const maxSeq = ID(math.MaxInt64)

// conversation is the record written by the conversation's creation, or nil.
func (h history) conversation(id ID) *storage.Conversation {
	for _, o := range h {
		if o.w.Type == storage.WriteCreateConversation && o.w.Conversation.ID == id {
			return o.w.Conversation
		}
	}
	return nil
}

func (h history) deleted(id ID) bool {
	for _, o := range h {
		if o.w.Type == storage.WriteDeleteConversation && o.w.ID == id {
			return true
		}
	}
	return false
}

// conversations is every conversation that exists and is not deleted.
func (h history) conversations() map[ID]storage.Conversation {
	out := map[ID]storage.Conversation{}
	for _, o := range h {
		if o.w.Type == storage.WriteCreateConversation && !h.deleted(o.w.Conversation.ID) {
			out[o.w.Conversation.ID] = *o.w.Conversation
		}
	}
	return out
}

// transcript is the logical transcript of a conversation: its parent's
// logical transcript up to the fork point, then its own entries.
func (h history) transcript(conv ID) []*storage.Entry {
	var out []*storage.Entry
	c := h.conversation(conv)
	if c == nil {
		return nil
	}
	if p := c.Parent; p != nil {
		for _, e := range h.transcript(p.ConversationID) {
			if e.ID <= p.At {
				out = append(out, e)
			}
		}
	}
	for _, o := range h {
		if o.w.Type == storage.WriteEntry && o.w.Entry.ConversationID == conv {
			out = append(out, o.w.Entry)
		}
	}
	return out
}

// newestHead is the newest entry with a head in the logical transcript at or
// before at (0 = now).
func (h history) newestHead(conv, at ID) *storage.Entry {
	var head *storage.Entry
	for _, e := range h.transcript(conv) {
		if (at == 0 || e.ID <= at) && e.Head != 0 {
			head = e
		}
	}
	return head
}

func position(at ID) ID {
	if at == 0 {
		return maxSeq
	}
	return at
}

// value reads a value as of at: the newest set or delete of exactly this
// address at or before at wins; a rewindable conversation value with none
// reads its fork parent capped at the fork point. State without history
// is read now.
func (h history) value(a storage.Address, at ID) (storage.Version, bool) {
	pos := position(at)
	if !a.Historical() {
		pos = maxSeq
	}
	for i := len(h) - 1; i >= 0; i-- {
		o := h[i]
		if o.seq > pos || o.w.Addr == nil || *o.w.Addr != a {
			continue
		}
		switch o.w.Type {
		case storage.WriteValueSet:
			return storage.Version{Seq: o.seq, Value: o.w.Value}, true
		case storage.WriteValueDelete:
			return storage.Version{}, false
		}
	}
	if !a.Historical() {
		return storage.Version{}, false
	}
	c := h.conversation(a.Scope.ID)
	if c == nil || c.Parent == nil || c.Parent.At == 0 { // a fork at the start inherits nothing
		return storage.Version{}, false
	}
	parent := a
	parent.Scope.ID = c.Parent.ConversationID
	return h.value(parent, min(pos, c.Parent.At))
}

// list reads a list as of at: a rewindable conversation list without a
// clear at or before at starts from its parent's list capped at the fork
// point; then its own appends after its latest clear; then its own removes
// hide elements wherever they came from.
func (h history) list(a storage.Address, at ID) []storage.Element {
	pos := position(at)
	if !a.Historical() {
		pos = maxSeq
	}
	mine := func(o op) bool { return o.seq <= pos && o.w.Addr != nil && *o.w.Addr == a }
	var cleared ID
	for _, o := range h {
		if mine(o) && o.w.Type == storage.WriteListClear {
			cleared = o.seq
		}
	}
	out := []storage.Element{}
	if c := h.conversation(a.Scope.ID); a.Historical() && cleared == 0 && c != nil && c.Parent != nil && c.Parent.At != 0 {
		parent := a
		parent.Scope.ID = c.Parent.ConversationID
		out = h.list(parent, min(pos, c.Parent.At))
	}
	for _, o := range h {
		if mine(o) && o.w.Type == storage.WriteListAppend && o.seq > cleared {
			out = append(out, storage.Element{ID: o.seq, Value: o.w.Value})
		}
	}
	for _, o := range h {
		if mine(o) && o.w.Type == storage.WriteListRemove {
			out = slices.DeleteFunc(out, func(e storage.Element) bool { return e.ID == o.w.Element })
		}
	}
	return out
}

// stateExists reports whether any write ever touched the state key of a.
func (h history) stateExists(a storage.Address) bool {
	for _, o := range h {
		if o.w.Addr != nil && o.w.Addr.StateKey() == a.StateKey() {
			return true
		}
	}
	return false
}

// kinds is the sorted set of entry kinds written.
func (h history) kinds() []string {
	var out []string
	for _, o := range h {
		if o.w.Type == storage.WriteEntry {
			out = append(out, o.w.Entry.Kind)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// entryQuery answers a ScanEntries query by filtering the whole transcript.
func (h history) entryQuery(q storage.EntryQuery) []*storage.Entry {
	var out []*storage.Entry
	for _, e := range h.transcript(q.ConversationID) {
		switch {
		case q.Kind != "" && e.Kind != q.Kind,
			q.Key != "" && e.Key != q.Key,
			q.From != 0 && e.ID < q.From,
			q.Through != 0 && e.ID > q.Through:
			continue
		}
		out = append(out, e)
	}
	return out
}

// modelPage cuts a page out of items (ascending by id) the way Cursor says:
// exclusive After and Before; backward when only Before is set, returning
// the Limit items just before it in ascending order; Next is the id to
// continue from when more remain in the direction read.
func modelPage[T any](items []T, id func(T) ID, c storage.Cursor, readAt ID) storage.Page[T] {
	in := []T{}
	for _, x := range items {
		if (c.After != 0 && id(x) <= c.After) || (c.Before != 0 && id(x) >= c.Before) {
			continue
		}
		in = append(in, x)
	}
	p := storage.Page[T]{Items: in, ReadAt: readAt}
	if len(in) <= c.Limit {
		return p
	}
	if c.Backward() {
		p.Items = in[len(in)-c.Limit:]
		p.Next = id(p.Items[0])
	} else {
		p.Items = in[:c.Limit]
		p.Next = id(p.Items[len(p.Items)-1])
	}
	return p
}
