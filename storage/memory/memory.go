package memory

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/pico-go/pico/internal/plant"
	"github.com/pico-go/pico/storage"
)

type ID = storage.ID

// Store is the memory backend. The zero value is not usable; call New.
type Store struct {
	mu      sync.RWMutex
	closed  bool
	lastSeq ID

	convs     map[ID]*conv
	convOrder []ID // every conversation, ascending

	entries map[ID]*storage.Entry
	kinds   map[string]struct{}

	tasks     map[ID]*storage.Task
	taskOrder []ID            // every task, ascending
	live      map[ID]struct{} // non-terminal tasks

	states       map[storage.StateRef]*state
	namespaces   map[storage.StateRef][]string // a scope and namespace → its keys, sorted
	scratchAddrs map[ID][]storage.Address      // task → its scratch state, retired on settle

	claimed bool // a harness holds the store (Claim)

	// work counts the index probes and records reads visit (see Work);
	// reads run concurrently under the read lock, so it is atomic.
	work atomic.Int64
}

type conv struct {
	rec     storage.Conversation
	deleted bool

	entries   []*storage.Entry // local entries, ascending
	heads     []*storage.Entry // local entries with a head, ascending
	byKind    map[string][]*storage.Entry
	byKey     map[string][]*storage.Entry
	byKindKey map[[2]string][]*storage.Entry

	tasks []ID            // local tasks, ascending
	live  map[ID]struct{} // local non-terminal tasks

	forks []ID // conversations forked from this one
	owned []ID // conversations owned by tasks of this one
}

// state is one value or list at one address.
type state struct {
	rewind bool
	list   bool

	versions []version // value: full history if rewindable, else the current one

	elems   []element // list elements, ascending by id
	clears  []ID      // rewindable list clears, ascending
	removed map[ID]ID // rewindable list: element → seq of its remove written here
}

type version struct {
	seq     ID
	value   []byte
	deleted bool
}

type element struct {
	id    ID
	value []byte
}

// New returns an empty memory store.
func New() *Store {
	return &Store{
		convs:        map[ID]*conv{},
		entries:      map[ID]*storage.Entry{},
		kinds:        map[string]struct{}{},
		tasks:        map[ID]*storage.Task{},
		live:         map[ID]struct{}{},
		states:       map[storage.StateRef]*state{},
		namespaces:   map[storage.StateRef][]string{},
		scratchAddrs: map[ID][]storage.Address{},
	}
}

var _ storage.Storage = (*Store)(nil)

// Work returns a running count of the index probes and records the store's
// reads have visited. Tests use it to show that a read's cost grows with fork
// depth and result size, not with unrelated history.
func (s *Store) Work() int64 { return s.work.Load() }

// LastSeq is the last committed sequence.
func (s *Store) LastSeq() ID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastSeq
}

// Claim admits one harness at a time (storage.Claimer): two harnesses on
// one store would interleave their commits.
func (s *Store) Claim() (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		return nil, &storage.LockedError{Session: "the memory store", Holder: "another open harness in this process"}
	}
	s.claimed = true
	return func() {
		s.mu.Lock()
		s.claimed = false
		s.mu.Unlock()
	}, nil
}

// Close marks the store closed.
func (s *Store) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	s.closed = true
	return nil
}

func (s *Store) rlock() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return storage.ErrClosed
	}
	return nil
}

// Commit validates and applies one batch. Validation runs against committed
// state before anything changes, so a rejected batch leaves the store as it
// was and consumes no sequence numbers.
func (s *Store) Commit(ctx context.Context, batch storage.CommitBatch) (storage.Range, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.Range{}, storage.ErrClosed
	}
	if err := storage.CheckBatch(ctx, lookup{s}, s.lastSeq, batch); err != nil {
		return storage.Range{}, err
	}
	r := storage.Range{First: s.lastSeq + 1, Last: s.lastSeq + ID(len(batch.Writes))}
	for i := range batch.Writes {
		s.apply(&batch.Writes[i], s.lastSeq+1+ID(i))
	}
	s.lastSeq = r.Last
	return r, nil
}

// Validate checks a batch as Commit would, without applying it: a durable
// backend validates, writes its bytes, then applies (publishes).
func (s *Store) Validate(ctx context.Context, batch storage.CommitBatch) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return storage.ErrClosed
	}
	return storage.CheckBatch(ctx, lookup{s}, s.lastSeq, batch)
}

// Publish applies a batch that Validate accepted and that is numbered from
// LastSeq()+1, without validating it again: the durable backends call
// Validate, write their bytes, then Publish. The caller serializes commits.
func (s *Store) Publish(batch storage.CommitBatch) storage.Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := storage.Range{First: s.lastSeq + 1, Last: s.lastSeq + ID(len(batch.Writes))}
	for i := range batch.Writes {
		s.apply(&batch.Writes[i], s.lastSeq+1+ID(i))
	}
	s.lastSeq = r.Last
	return r
}

// Apply validates and applies a batch numbered from first. It is how a
// durable backend publishes a written batch and replays its files into
// memory. A main log's batches arrive in order; a live task's scratch file
// is replayed after the main log, so its batches may start below LastSeq
// (sequences are shared across files). LastSeq becomes the highest
// endpoint applied.
func (s *Store) Apply(ctx context.Context, batch storage.CommitBatch, first ID) error {
	return s.applyChecked(ctx, batch, first, storage.CheckBatch)
}

// ApplyDecoded is Apply for a batch decoded from JSON text, whose raw values
// the decoder parsed (storage.CheckDecodedBatch): a replay.
func (s *Store) ApplyDecoded(ctx context.Context, batch storage.CommitBatch, first ID) error {
	return s.applyChecked(ctx, batch, first, storage.CheckDecodedBatch)
}

func (s *Store) applyChecked(ctx context.Context, batch storage.CommitBatch, first ID, check func(context.Context, storage.Lookup, ID, storage.CommitBatch) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.ErrClosed
	}
	if first <= 0 {
		return &storage.BatchError{Index: -1, Rule: "batch starts at a non-positive sequence"}
	}
	if err := check(ctx, lookup{s}, first-1, batch); err != nil {
		return err
	}
	for i := range batch.Writes {
		s.apply(&batch.Writes[i], first+ID(i))
	}
	if last := first + ID(len(batch.Writes)) - 1; last > s.lastSeq {
		s.lastSeq = last
	}
	return nil
}

// TaskState returns the stored state of task id, and whether the store
// holds the task, without counting a read in Work: the JSONL backend asks
// it while it encodes a patch or settle as the difference from the task's
// state before it, and while it rebuilds that state on replay. The bytes
// are the store's own and must not be modified.
func (s *Store) TaskState(id ID) (json.RawMessage, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.tasks[id]
	if t == nil {
		return nil, false
	}
	return t.State, true
}

// SetLastSeq raises the sequence high-water mark (never lowers it).
func (s *Store) SetLastSeq(seq ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.lastSeq {
		s.lastSeq = seq
	}
}

func (s *Store) apply(w *storage.Write, seq ID) {
	switch w.Type {
	case storage.WriteValueSet, storage.WriteValueDelete, storage.WriteListAppend,
		storage.WriteListRemove, storage.WriteListClear:
		s.applyState(w, seq)
	case storage.WriteCreateConversation:
		rec := *w.Conversation
		if rec.Parent != nil {
			p := *rec.Parent
			rec.Parent = &p
			parent := s.convs[p.ConversationID]
			parent.forks = append(parent.forks, rec.ID)
		}
		if rec.Owner != 0 {
			from := s.convs[s.tasks[rec.Owner].ConversationID]
			from.owned = append(from.owned, rec.ID)
		}
		s.convs[rec.ID] = &conv{rec: rec, live: map[ID]struct{}{}}
		s.convOrder = append(s.convOrder, rec.ID)
	case storage.WriteDeleteConversation:
		s.convs[w.ID].deleted = true
	case storage.WriteEntry:
		e := w.Entry
		c := s.convs[e.ConversationID]
		c.entries = append(c.entries, e)
		if e.Head != 0 {
			c.heads = append(c.heads, e)
		}
		if c.byKind == nil {
			c.byKind = map[string][]*storage.Entry{}
			c.byKey = map[string][]*storage.Entry{}
			c.byKindKey = map[[2]string][]*storage.Entry{}
		}
		c.byKind[e.Kind] = append(c.byKind[e.Kind], e)
		if e.Key != "" {
			c.byKey[e.Key] = append(c.byKey[e.Key], e)
			k := [2]string{e.Kind, e.Key}
			c.byKindKey[k] = append(c.byKindKey[k], e)
		}
		s.entries[e.ID] = e
		s.kinds[e.Kind] = struct{}{}
	case storage.WriteTask:
		t := w.Task
		c := s.convs[t.ConversationID]
		s.tasks[t.ID] = t
		s.taskOrder = append(s.taskOrder, t.ID)
		c.tasks = append(c.tasks, t.ID)
		s.live[t.ID] = struct{}{}
		c.live[t.ID] = struct{}{}
	case storage.WritePatch, storage.WriteSettle:
		old := s.tasks[w.ID]
		t := *old
		if w.Role != "" {
			t.Status, t.Role = w.Status, w.Role
		}
		if w.State != nil {
			t.State = w.State
		}
		if w.Abort {
			t.Abort = true
		}
		if w.Owns != nil {
			t.Owns = w.Owns
		}
		s.tasks[w.ID] = &t
		if w.Type == storage.WriteSettle {
			delete(s.live, w.ID)
			delete(s.convs[t.ConversationID].live, w.ID)
			for _, a := range s.scratchAddrs[w.ID] {
				delete(s.states, a.Ref())
				delete(s.namespaces, nsKey(a.Scope, a.Namespace))
			}
			delete(s.scratchAddrs, w.ID)
		}
	}
}

func (s *Store) applyState(w *storage.Write, seq ID) {
	a := *w.Addr
	key := a.Ref()
	st := s.states[key]
	if st == nil {
		st = &state{rewind: a.Historical(), list: w.Type == storage.WriteListAppend ||
			w.Type == storage.WriteListRemove || w.Type == storage.WriteListClear}
		s.states[key] = st
		s.indexKey(a)
		if a.Scope.Kind == storage.ScopeScratch {
			s.scratchAddrs[a.Scope.ID] = append(s.scratchAddrs[a.Scope.ID], a)
		}
	}
	switch w.Type {
	case storage.WriteValueSet, storage.WriteValueDelete:
		v := version{seq: seq, value: w.Value, deleted: w.Type == storage.WriteValueDelete}
		if st.rewind {
			st.versions = append(st.versions, v)
		} else {
			st.versions = append(st.versions[:0], v)
		}
	case storage.WriteListAppend:
		st.elems = append(st.elems, element{id: seq, value: w.Value})
	case storage.WriteListRemove:
		if plant.On("memory-sticky-remove-lost") && !st.rewind && len(st.elems) > 1 {
			break
		}
		if st.rewind {
			if st.removed == nil {
				st.removed = map[ID]ID{}
			}
			st.removed[w.Element] = seq
			break
		}
		// Sticky state exposes only current contents: discard the element.
		i, found := slices.BinarySearchFunc(st.elems, w.Element, func(e element, id ID) int { return cmpID(e.id, id) })
		if found {
			st.elems = slices.Delete(st.elems, i, i+1)
		}
	case storage.WriteListClear:
		if st.rewind {
			st.clears = append(st.clears, seq)
		} else {
			st.elems = nil
		}
	}
}

// indexKey records the address's key under its scope and namespace, keeping
// the keys sorted for ScanValues.
func (s *Store) indexKey(a storage.Address) {
	ns := nsKey(a.Scope, a.Namespace)
	keys := s.namespaces[ns]
	i, found := slices.BinarySearch(keys, a.Key)
	if !found {
		s.namespaces[ns] = slices.Insert(keys, i, a.Key)
	}
}

func nsKey(scope storage.Scope, namespace string) storage.StateRef {
	return storage.StateRef{Scope: scope, Namespace: namespace}
}

func cmpID(a, b ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// lookup implements storage.Lookup over a store whose lock is held.
type lookup struct{ s *Store }

func (l lookup) LookupConversation(_ context.Context, id ID) (storage.Conversation, bool, error) {
	c := l.s.convs[id]
	if c == nil || c.deleted {
		return storage.Conversation{}, false, nil
	}
	return c.rec, true, nil
}

func (l lookup) LookupTask(_ context.Context, id ID) (*storage.Task, bool, error) {
	t, ok := l.s.tasks[id]
	return t, ok, nil
}

func (l lookup) EntryVisible(_ context.Context, conversationID, id ID) (bool, error) {
	return l.s.entryVisible(conversationID, id), nil
}

func (l lookup) StatePolicy(_ context.Context, a storage.Address) (bool, bool, bool, error) {
	st := l.s.states[a.Ref()]
	if st == nil {
		return false, false, false, nil
	}
	return true, st.rewind, st.list, nil
}

func (l lookup) ListHas(_ context.Context, a storage.Address, at, id ID) (bool, error) {
	found := false
	l.s.eachListElement(a, at, id, id, func(element) bool {
		found = true
		return false
	}, false)
	return found, nil
}
