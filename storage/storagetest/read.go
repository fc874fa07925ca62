package storagetest

import (
	"encoding/json"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pico-go/pico/storage"
)

// cmpOpts compares records the way backends may legitimately differ on:
// an absent slice and an empty one are the same record.
var cmpOpts = []cmp.Option{cmpopts.EquateEmpty()}

// all is a cursor that reads everything a test writes in one page.
var all = storage.Cursor{Limit: storage.PageLimitMax}

// scanEntries reads one page of a logical transcript.
func (s *store) scanEntries(q storage.EntryQuery) storage.Page[*storage.Entry] {
	s.t.Helper()
	p, err := s.ScanEntries(s.ctx, q)
	if err != nil {
		s.t.Fatalf("ScanEntries(%+v): %v", q, err)
	}
	return p
}

// transcript is the ids of a conversation's whole logical transcript.
func (s *store) transcript(conv ID) []ID {
	s.t.Helper()
	p := s.scanEntries(storage.EntryQuery{Cursor: all, ConversationID: conv})
	if p.Next != 0 {
		s.t.Fatalf("transcript of %d: a full page has Next = %d; want 0", conv, p.Next)
	}
	return entryIDs(p.Items)
}

func entryIDs(es []*storage.Entry) []ID {
	out := make([]ID, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// newestHead is the id of the newest visible head at or before at; 0 when
// there is none.
func (s *store) newestHead(conv, at ID) ID {
	s.t.Helper()
	e, ok, err := s.NewestHead(s.ctx, conv, at)
	if err != nil {
		s.t.Fatalf("NewestHead(%d, %d): %v", conv, at, err)
	}
	if !ok {
		if e != nil {
			s.t.Fatalf("NewestHead(%d, %d) = entry %d, false; want nil when not found", conv, at, e.ID)
		}
		return 0
	}
	if !e.IsHead() {
		s.t.Fatalf("NewestHead(%d, %d) = entry %d, which has no head", conv, at, e.ID)
	}
	return e.ID
}

// version reads a value.
func (s *store) version(a storage.Address, at ID) (storage.Version, bool) {
	s.t.Helper()
	v, ok, err := s.GetValue(s.ctx, a, at)
	if err != nil {
		s.t.Fatalf("GetValue(%s, %d): %v", a, at, err)
	}
	return v, ok
}

// str reads a string value; absent reads as "<absent>".
func (s *store) str(a storage.Address, at ID) string {
	s.t.Helper()
	v, ok := s.version(a, at)
	if !ok {
		return absent
	}
	return s.decode(v.Value)
}

const absent = "<absent>"

func (s *store) decode(raw json.RawMessage) string {
	s.t.Helper()
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		s.t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

// readList reads one page of a list.
func (s *store) readList(a storage.Address, q storage.ListQuery) storage.Page[storage.Element] {
	s.t.Helper()
	p, err := s.ReadList(s.ctx, a, q)
	if err != nil {
		s.t.Fatalf("ReadList(%s, %+v): %v", a, q, err)
	}
	return p
}

// list is the string values of a whole list as of at (0 = now).
func (s *store) list(a storage.Address, at ID) []string {
	s.t.Helper()
	p := s.readList(a, storage.ListQuery{Cursor: all, At: at})
	out := []string{}
	for _, e := range p.Items {
		out = append(out, s.decode(e.Value))
	}
	return out
}

// elementIDs is the element ids of a whole list as of at.
func (s *store) elementIDs(a storage.Address, at ID) []ID {
	s.t.Helper()
	p := s.readList(a, storage.ListQuery{Cursor: all, At: at})
	out := []ID{}
	for _, e := range p.Items {
		out = append(out, e.ID)
	}
	return out
}

func (s *store) scanTasks(q storage.TaskQuery) storage.Page[*storage.Task] {
	s.t.Helper()
	p, err := s.ScanTasks(s.ctx, q)
	if err != nil {
		s.t.Fatalf("ScanTasks(%+v): %v", q, err)
	}
	return p
}

func taskIDs(ts []*storage.Task) []ID {
	out := make([]ID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func (s *store) getTasks(ids ...ID) map[ID]*storage.Task {
	s.t.Helper()
	m, err := s.GetTasks(s.ctx, ids)
	if err != nil {
		s.t.Fatalf("GetTasks(%v): %v", ids, err)
	}
	return m
}

func (s *store) getConversations(ids ...ID) map[ID]storage.Conversation {
	s.t.Helper()
	m, err := s.GetConversations(s.ctx, ids)
	if err != nil {
		s.t.Fatalf("GetConversations(%v): %v", ids, err)
	}
	return m
}

func (s *store) scanConversations(q storage.ConversationQuery) storage.Page[storage.Conversation] {
	s.t.Helper()
	p, err := s.ScanConversations(s.ctx, q)
	if err != nil {
		s.t.Fatalf("ScanConversations(%+v): %v", q, err)
	}
	return p
}

func conversationIDs(cs []storage.Conversation) []ID {
	out := make([]ID, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func (s *store) scanValues(q storage.ValueQuery) storage.Page[storage.KeyedVersion] {
	s.t.Helper()
	p, err := s.ScanValues(s.ctx, q)
	if err != nil {
		s.t.Fatalf("ScanValues(%+v): %v", q, err)
	}
	return p
}

// snapshot is every read the rejection tests compare before and after a
// rejected batch.
type snapshot struct {
	LastSeq       ID
	Conversations map[ID]storage.Conversation
	Transcripts   map[ID][]*storage.Entry
	Entries       map[ID]*storage.Entry
	Tasks         map[ID]*storage.Task
	LiveTasks     []ID
	Kinds         []string
	Values        map[string]*storage.Version
	Lists         map[string][]storage.Element
}

// snapshot reads everything named by ids up to LastSeq+3 and the given
// value and list addresses.
func (s *store) snapshot(values, lists []storage.Address) snapshot {
	s.t.Helper()
	last := s.LastSeq()
	var ids []ID
	for id := ID(1); id <= last+3; id++ {
		ids = append(ids, id)
	}
	snap := snapshot{
		LastSeq:       last,
		Conversations: s.getConversations(ids...),
		Transcripts:   map[ID][]*storage.Entry{},
		Tasks:         s.getTasks(ids...),
		LiveTasks:     taskIDs(s.scanTasks(storage.TaskQuery{Cursor: all, Live: storage.Bool(true)}).Items),
		Values:        map[string]*storage.Version{},
		Lists:         map[string][]storage.Element{},
	}
	var err error
	if snap.Entries, err = s.GetEntries(s.ctx, ids); err != nil {
		s.t.Fatalf("GetEntries: %v", err)
	}
	if snap.Kinds, err = s.EntryKinds(s.ctx); err != nil {
		s.t.Fatalf("EntryKinds: %v", err)
	}
	for id := range snap.Conversations {
		snap.Transcripts[id] = s.scanEntries(storage.EntryQuery{Cursor: all, ConversationID: id}).Items
	}
	for _, a := range values {
		if v, ok := s.version(a, 0); ok {
			snap.Values[a.String()] = &v
		}
	}
	for _, a := range lists {
		snap.Lists[a.String()] = s.readList(a, storage.ListQuery{Cursor: all}).Items
	}
	return snap
}
