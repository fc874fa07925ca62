package memory

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

const maxID = ID(math.MaxInt64)

// level is one conversation of a fork chain and the last position of it that
// is visible from the conversation the chain started at.
type level struct {
	c   *conv
	cap ID
}

// chain walks from a conversation up through its fork sources, capping each
// source at the fork point (and at every earlier cap). It returns levels
// newest first. Its cost is the fork depth.
func (s *Store) chain(id, at ID) []level {
	if at <= 0 {
		at = maxID
	}
	var levels []level
	for c := s.convs[id]; c != nil; {
		s.work.Add(1)
		levels = append(levels, level{c, at})
		p := c.rec.Parent
		if p == nil {
			break
		}
		at = min(at, p.At)
		if plant.On("memory-fork-cap-ignores-reader") {
			at = p.At
		}
		c = s.convs[p.ConversationID]
	}
	return levels
}

func (s *Store) entryVisible(convID, id ID) bool {
	e := s.entries[id]
	if e == nil {
		return false
	}
	for _, l := range s.chain(convID, 0) {
		if l.c.rec.ID == e.ConversationID {
			return id <= l.cap
		}
	}
	return false
}

// span walks the ids of sorted slices that make up a logical sequence — one
// slice per fork level, oldest level first — within [lo, hi], forward or
// backward, until fn returns false.
func span[T any](segs []segment[T], idOf func(T) ID, lo, hi ID, backward bool, work *atomic.Int64, fn func(T) bool) {
	if !backward {
		for _, sg := range segs {
			top := min(hi, sg.cap)
			if plant.On("memory-window-ignores-before") {
				top = sg.cap
			}
			i := sort.Search(len(sg.items), func(i int) bool { return idOf(sg.items[i]) >= max(lo, sg.lo) })
			work.Add(1)
			for ; i < len(sg.items) && idOf(sg.items[i]) <= top; i++ {
				work.Add(1)
				if !fn(sg.items[i]) {
					return
				}
			}
		}
		return
	}
	for k := len(segs) - 1; k >= 0; k-- {
		sg := segs[k]
		bottom := max(lo, sg.lo)
		i := sort.Search(len(sg.items), func(i int) bool { return idOf(sg.items[i]) > min(hi, sg.cap) }) - 1
		work.Add(1)
		for ; i >= 0 && idOf(sg.items[i]) >= bottom; i-- {
			work.Add(1)
			if !fn(sg.items[i]) {
				return
			}
		}
	}
}

type segment[T any] struct {
	items   []T
	lo, cap ID // inclusive bounds of what this level contributes
}

// page collects a page from a span walk: limit+1 items decide Next. Most
// reads return a handful (an inbox, a task's frames), so the slice starts
// small and grows as a long page needs.
func page[T any](c storage.Cursor, readAt ID, walk func(fn func(T) bool), idOf func(T) ID) storage.Page[T] {
	var items []T // an empty page allocates nothing (NewPage)
	walk(func(x T) bool {
		if items == nil {
			items = make([]T, 0, min(c.Limit+1, 8))
		}
		items = append(items, x)
		return len(items) <= c.Limit
	})
	return storage.NewPage(c, readAt, items, idOf)
}

func entryID(e *storage.Entry) ID { return e.ID }

func (s *Store) conversation(id ID) (*conv, error) {
	c := s.convs[id]
	if c == nil || c.deleted {
		return nil, fmt.Errorf("%w: conversation %d does not exist", storage.ErrBadQuery, id)
	}
	return c, nil
}

// GetConversations returns the named conversations that exist.
func (s *Store) GetConversations(_ context.Context, ids []ID) (map[ID]storage.Conversation, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make(map[ID]storage.Conversation, len(ids))
	for _, id := range ids {
		if c := s.convs[id]; c != nil && !c.deleted {
			out[id] = c.rec
		}
	}
	return out, nil
}

// ScanConversations pages through conversations, optionally only the forks
// of one conversation or those owned by its tasks.
func (s *Store) ScanConversations(_ context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckCursor(q.Cursor); err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[storage.Conversation]{}, err
	}
	defer s.mu.RUnlock()
	ids := s.convOrder
	switch {
	case q.Parent != 0 && q.OwnedFrom != 0:
		ids = intersect(s.convIDs(q.Parent, func(c *conv) []ID { return c.forks }), s.convIDs(q.OwnedFrom, func(c *conv) []ID { return c.owned }))
	case q.Parent != 0:
		ids = s.convIDs(q.Parent, func(c *conv) []ID { return c.forks })
	case q.OwnedFrom != 0:
		ids = s.convIDs(q.OwnedFrom, func(c *conv) []ID { return c.owned })
	}
	lo, hi := q.Cursor.Bounds(0, 0)
	segs := []segment[ID]{{items: ids, lo: 1, cap: maxID}}
	p := page(q.Cursor, s.lastSeq, func(fn func(ID) bool) {
		span(segs, func(id ID) ID { return id }, lo, hi, q.Backward(), &s.work, func(id ID) bool {
			if s.convs[id].deleted && !(q.Parent != 0 && plant.On("memory-forks-list-deleted")) {
				return true
			}
			return fn(id)
		})
	}, func(id ID) ID { return id })
	out := storage.Page[storage.Conversation]{Items: make([]storage.Conversation, len(p.Items)), Next: p.Next, ReadAt: p.ReadAt}
	for i, id := range p.Items {
		out.Items[i] = s.convs[id].rec
	}
	return out, nil
}

func (s *Store) convIDs(id ID, pick func(*conv) []ID) []ID {
	if c := s.convs[id]; c != nil {
		return pick(c)
	}
	return nil
}

func intersect(a, b []ID) []ID {
	var out []ID
	for _, id := range a {
		if _, ok := slices.BinarySearch(b, id); ok {
			out = append(out, id)
		}
	}
	return out
}

// GetEntries returns full entries by id.
func (s *Store) GetEntries(_ context.Context, ids []ID) (map[ID]*storage.Entry, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make(map[ID]*storage.Entry, len(ids))
	for _, id := range ids {
		s.work.Add(1)
		if e := s.entries[id]; e != nil {
			out[id] = e
		}
	}
	return out, nil
}

// ScanEntries reads a page of the logical transcript: each fork source's
// capped prefix, then local entries. Kind and key filters use per-level
// indexes, so they apply before the limit without visiting other entries.
func (s *Store) ScanEntries(_ context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckCursor(q.Cursor); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	defer s.mu.RUnlock()
	if _, err := s.conversation(q.ConversationID); err != nil {
		return storage.Page[*storage.Entry]{}, err
	}
	levels := s.chain(q.ConversationID, 0)
	segs := make([]segment[*storage.Entry], len(levels))
	for i, l := range levels {
		var items []*storage.Entry
		switch {
		case q.Kind != "" && q.Key != "":
			items = l.c.byKindKey[[2]string{q.Kind, q.Key}]
		case q.Kind != "":
			items = l.c.byKind[q.Kind]
		case q.Key != "":
			items = l.c.byKey[q.Key]
		default:
			items = l.c.entries
		}
		if i > 0 && q.Kind != "" && plant.On("memory-kind-filter-own-level-only") {
			items = nil
		}
		cap := l.cap
		if i > 0 && plant.On("memory-fork-scan-past-fork-point") {
			cap = maxID
		}
		segs[len(levels)-1-i] = segment[*storage.Entry]{items: items, lo: 1, cap: cap}
	}
	lo, hi := q.Cursor.Bounds(q.From, q.Through)
	return page(q.Cursor, s.lastSeq, func(fn func(*storage.Entry) bool) {
		span(segs, entryID, lo, hi, q.Backward(), &s.work, fn)
	}, entryID), nil
}

// NewestHead returns the newest visible head at or before at. Local heads
// are newer than anything inherited, so the first level with one wins.
func (s *Store) NewestHead(_ context.Context, conversationID, at ID) (*storage.Entry, bool, error) {
	if err := s.rlock(); err != nil {
		return nil, false, err
	}
	defer s.mu.RUnlock()
	if at < 0 {
		return nil, false, fmt.Errorf("%w: negative position %d", storage.ErrBadQuery, at)
	}
	if _, err := s.conversation(conversationID); err != nil {
		return nil, false, err
	}
	for k, l := range s.chain(conversationID, at) {
		if k > 0 && plant.On("memory-head-inherited-uncapped") {
			l.cap = maxID
		}
		i := sort.Search(len(l.c.heads), func(i int) bool { return l.c.heads[i].ID > l.cap })
		s.work.Add(1)
		if i > 0 {
			return l.c.heads[i-1], true, nil
		}
	}
	return nil, false, nil
}

// EntryKinds returns the distinct entry kinds written, sorted.
func (s *Store) EntryKinds(context.Context) ([]string, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.kinds))
	for k := range s.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// GetTasks returns the named tasks, terminal ones included.
func (s *Store) GetTasks(_ context.Context, ids []ID) (map[ID]*storage.Task, error) {
	if err := s.rlock(); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	out := make(map[ID]*storage.Task, len(ids))
	for _, id := range ids {
		s.work.Add(1)
		if t := s.tasks[id]; t != nil {
			out[id] = t
		}
	}
	return out, nil
}

// ScanTasks pages through tasks. A live (or non-terminal role) query walks
// only the live index; it never visits a terminal row.
func (s *Store) ScanTasks(_ context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckTaskQuery(q); err != nil {
		return storage.Page[*storage.Task]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[*storage.Task]{}, err
	}
	defer s.mu.RUnlock()
	liveOnly := (q.Live != nil && *q.Live) || q.Role == storage.RoleStart || q.Role == storage.RoleInflight
	var ids []ID
	switch {
	case liveOnly && len(q.ConversationIDs) == 0:
		ids = sortedKeys(s.live)
	case liveOnly:
		for _, cid := range q.ConversationIDs {
			if c := s.convs[cid]; c != nil {
				ids = append(ids, sortedKeys(c.live)...)
			}
		}
		slices.Sort(ids)
	case len(q.ConversationIDs) == 0:
		ids = s.taskOrder
	default:
		for _, cid := range q.ConversationIDs {
			if c := s.convs[cid]; c != nil {
				ids = append(ids, c.tasks...)
			}
		}
		slices.Sort(ids)
	}
	ids = slices.Compact(ids)
	lo, hi := q.Cursor.Bounds(0, 0)
	segs := []segment[ID]{{items: ids, lo: 1, cap: maxID}}
	p := page(q.Cursor, s.lastSeq, func(fn func(*storage.Task) bool) {
		span(segs, func(id ID) ID { return id }, lo, hi, q.Backward(), &s.work, func(id ID) bool {
			t := s.tasks[id]
			switch {
			case q.Live != nil && *q.Live != t.Live(),
				q.Role != "" && q.Role != t.Role,
				q.Kind != "" && q.Kind != t.Kind,
				q.Abort != nil && *q.Abort != t.Abort:
				return true
			}
			return fn(t)
		})
	}, func(t *storage.Task) ID { return t.ID })
	return p, nil
}

func sortedKeys(m map[ID]struct{}) []ID {
	out := make([]ID, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func checkRead(a storage.Address, at ID) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if at != 0 && !a.Historical() {
		return fmt.Errorf("%w: %s at %d", storage.ErrHistoricalRead, a, at)
	}
	if at < 0 {
		return fmt.Errorf("%w: negative position %d", storage.ErrBadQuery, at)
	}
	return nil
}

// storedPolicy reads conversation state under the rewind policy it was
// written with, whatever policy the reading address claims: a rewindable
// history read through a sticky address still honours deletes, removes and
// clears. (A historical read through a sticky address was rejected before.)
func (s *Store) storedPolicy(a storage.Address) storage.Address {
	if a.Scope.Kind == storage.ScopeConversation {
		if st := s.states[a.Ref()]; st != nil {
			a.Rewind = st.rewind
		}
	}
	return a
}

// GetValue reads a value now or, for rewindable conversation state, as of an
// entry. A fork with no local version reads its source capped at the fork
// point; a delete records absence and stops the lookup.
func (s *Store) GetValue(_ context.Context, a storage.Address, at ID) (storage.Version, bool, error) {
	if err := checkRead(a, at); err != nil {
		return storage.Version{}, false, err
	}
	if err := s.rlock(); err != nil {
		return storage.Version{}, false, err
	}
	defer s.mu.RUnlock()
	v, ok := s.value(a, at)
	if !ok {
		return storage.Version{}, false, nil
	}
	return storage.Version{Seq: v.seq, Value: bytes.Clone(v.value)}, true, nil
}

func (s *Store) value(a storage.Address, at ID) (version, bool) {
	a = s.storedPolicy(a)
	if !a.Historical() {
		s.work.Add(1)
		st := s.states[a.Ref()]
		if st == nil || st.list || len(st.versions) == 0 || st.versions[len(st.versions)-1].deleted {
			return version{}, false
		}
		return st.versions[len(st.versions)-1], true
	}
	for _, l := range s.chain(a.Scope.ID, at) {
		b := a
		b.Scope.ID = l.c.rec.ID
		st := s.states[b.Ref()]
		s.work.Add(1)
		if st == nil || st.list || !st.rewind {
			continue
		}
		i := sort.Search(len(st.versions), func(i int) bool { return st.versions[i].seq > l.cap })
		if plant.On("memory-version-at-cap-hidden") {
			i = sort.Search(len(st.versions), func(i int) bool { return st.versions[i].seq >= l.cap })
		}
		if i > 0 {
			v := st.versions[i-1]
			return v, !v.deleted
		}
	}
	return version{}, false
}

// ScanValues pages through the current values of one namespace, by key. For
// a conversation it includes rewindable values inherited from fork sources.
func (s *Store) ScanValues(_ context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	if q.Limit == 0 {
		q.Limit = storage.PageLimitDefault // as a zero Cursor
	}
	if q.Limit < 1 || q.Limit > storage.PageLimitMax {
		return storage.Page[storage.KeyedVersion]{}, fmt.Errorf("%w: limit %d outside 1..%d", storage.ErrBadQuery, q.Limit, storage.PageLimitMax)
	}
	if err := (storage.Address{Scope: q.Scope, Namespace: q.Namespace}).Validate(); err != nil {
		return storage.Page[storage.KeyedVersion]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[storage.KeyedVersion]{}, err
	}
	defer s.mu.RUnlock()
	var keys []string
	levels := []level{{cap: maxID}}
	if q.Scope.Kind == storage.ScopeConversation {
		levels = s.chain(q.Scope.ID, 0)
	}
	for _, l := range levels {
		scope := q.Scope
		if l.c != nil {
			scope.ID = l.c.rec.ID
		}
		keys = append(keys, s.namespaces[nsKey(scope, q.Namespace)]...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	i, _ := slices.BinarySearch(keys, q.After)
	out := storage.Page[storage.KeyedVersion]{Items: []storage.KeyedVersion{}, ReadAt: s.lastSeq}
	for ; i < len(keys); i++ {
		key := keys[i]
		if key == "" || key <= q.After {
			continue // the namespace's keyless value is a point read, never a scan row
		}
		v, ok := s.currentValue(q.Scope, q.Namespace, key)
		if !ok {
			continue
		}
		if len(out.Items) == q.Limit {
			out.Next = 1 // more remain; continue after the last key
			break
		}
		out.Items = append(out.Items, storage.KeyedVersion{Key: key, Version: storage.Version{Seq: v.seq, Value: bytes.Clone(v.value)}})
	}
	return out, nil
}

// currentValue resolves a key found by a namespace scan under the policy it
// is stored with: local state first, then rewindable state of fork sources.
func (s *Store) currentValue(scope storage.Scope, namespace, key string) (version, bool) {
	a := storage.Address{Scope: scope, Namespace: namespace, Key: key}
	if st := s.states[a.Ref()]; st != nil {
		a.Rewind = st.rewind
	} else {
		a.Rewind = scope.Kind == storage.ScopeConversation
	}
	return s.value(a, 0)
}

// ReadList reads a page of a list, now or as of an entry.
func (s *Store) ReadList(_ context.Context, a storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	q.Cursor = q.Cursor.Defaulted()
	if err := storage.CheckCursor(q.Cursor); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	if err := checkRead(a, q.At); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	if err := s.rlock(); err != nil {
		return storage.Page[storage.Element]{}, err
	}
	defer s.mu.RUnlock()
	lo, hi := q.Cursor.Bounds(0, 0)
	p := page(q.Cursor, s.lastSeq, func(fn func(element) bool) {
		s.eachListElement(a, q.At, lo, hi, fn, q.Backward())
	}, func(e element) ID { return e.id })
	out := storage.Page[storage.Element]{Items: make([]storage.Element, len(p.Items)), Next: p.Next, ReadAt: p.ReadAt}
	for i, e := range p.Items {
		out.Items[i] = storage.Element{ID: e.id, Value: bytes.Clone(e.value)}
	}
	return out, nil
}

// eachListElement walks the visible elements of a list within [lo, hi].
// For a rewindable conversation list it combines fork levels: each level
// contributes elements up to its cap, a clear at or below the cap hides
// everything older (inherited elements too), and a remove written at any
// level between the reader and the element's level hides that element.
func (s *Store) eachListElement(a storage.Address, at, lo, hi ID, fn func(element) bool, backward bool) {
	a = s.storedPolicy(a)
	if !a.Historical() {
		s.work.Add(1)
		st := s.states[a.Ref()]
		if st == nil || !st.list {
			return
		}
		span([]segment[element]{{items: st.elems, lo: 1, cap: maxID}}, func(e element) ID { return e.id }, lo, hi, backward, &s.work, fn)
		return
	}
	type removal struct {
		removed map[ID]ID
		cap     ID
	}
	var (
		segs     []segment[element]
		removals []removal
	)
	for _, l := range s.chain(a.Scope.ID, at) {
		b := a
		b.Scope.ID = l.c.rec.ID
		st := s.states[b.Ref()]
		s.work.Add(1)
		if st == nil || !st.list || !st.rewind {
			continue
		}
		if len(removals) == 0 || !plant.On("memory-remove-own-level-only") {
			removals = append(removals, removal{st.removed, l.cap})
		}
		floor := ID(1)
		if i := sort.Search(len(st.clears), func(i int) bool { return st.clears[i] > l.cap }); i > 0 {
			floor = st.clears[i-1] + 1
		}
		segs = append(segs, segment[element]{items: st.elems, lo: floor, cap: l.cap})
		if floor > 1 {
			break // a clear hides everything older, inherited elements included
		}
	}
	slices.Reverse(segs)
	span(segs, func(e element) ID { return e.id }, lo, hi, backward, &s.work, func(e element) bool {
		for _, r := range removals {
			if seq, ok := r.removed[e.id]; ok && seq <= r.cap {
				return true
			}
		}
		return fn(e)
	})
}
