package main

import (
	"context"
	"sync/atomic"

	"github.com/pico-go/pico/storage"
)

// countingStore counts what a session asks of its storage (§10.3's query
// counts and rows decoded): every call of a read method is a query, every
// record it returns a row (a conversation, entry, task, value version or
// list element; an entry kind name), and commits with their writes are
// counted apart. It adds no optional capability: a wrapped store goes
// unclaimed (storage.Claimer), as every bench wrapper does.
//
// The harness reads from several actors at once, so the counters are
// atomic.
type countingStore struct {
	storage.Storage
	queries, rows   atomic.Int64
	commits, writes atomic.Int64
}

var _ storage.Storage = (*countingStore)(nil)

// storeCounts is a countingStore's counters at one moment.
type storeCounts struct {
	Queries int64 `json:"queries"`
	Rows    int64 `json:"rowsDecoded"`
	Commits int64 `json:"commits"`
	Writes  int64 `json:"writes"`
}

func (s *countingStore) counts() storeCounts {
	return storeCounts{Queries: s.queries.Load(), Rows: s.rows.Load(), Commits: s.commits.Load(), Writes: s.writes.Load()}
}

// read counts one query that returned n rows.
func (s *countingStore) read(n int) {
	s.queries.Add(1)
	s.rows.Add(int64(n))
}

func (s *countingStore) Commit(ctx context.Context, b storage.CommitBatch) (storage.Range, error) {
	n := len(b.Writes) // the backend owns the batch once called
	r, err := s.Storage.Commit(ctx, b)
	if err == nil {
		s.commits.Add(1)
		s.writes.Add(int64(n))
	}
	return r, err
}

func (s *countingStore) GetConversations(ctx context.Context, ids []storage.ID) (map[storage.ID]storage.Conversation, error) {
	m, err := s.Storage.GetConversations(ctx, ids)
	s.read(len(m))
	return m, err
}

func (s *countingStore) ScanConversations(ctx context.Context, q storage.ConversationQuery) (storage.Page[storage.Conversation], error) {
	p, err := s.Storage.ScanConversations(ctx, q)
	s.read(len(p.Items))
	return p, err
}

func (s *countingStore) GetEntries(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Entry, error) {
	m, err := s.Storage.GetEntries(ctx, ids)
	s.read(len(m))
	return m, err
}

func (s *countingStore) ScanEntries(ctx context.Context, q storage.EntryQuery) (storage.Page[*storage.Entry], error) {
	p, err := s.Storage.ScanEntries(ctx, q)
	s.read(len(p.Items))
	return p, err
}

func (s *countingStore) NewestHead(ctx context.Context, conversationID, at storage.ID) (*storage.Entry, bool, error) {
	e, ok, err := s.Storage.NewestHead(ctx, conversationID, at)
	s.read(one(ok))
	return e, ok, err
}

func (s *countingStore) EntryKinds(ctx context.Context) ([]string, error) {
	k, err := s.Storage.EntryKinds(ctx)
	s.read(len(k))
	return k, err
}

func (s *countingStore) GetTasks(ctx context.Context, ids []storage.ID) (map[storage.ID]*storage.Task, error) {
	m, err := s.Storage.GetTasks(ctx, ids)
	s.read(len(m))
	return m, err
}

func (s *countingStore) ScanTasks(ctx context.Context, q storage.TaskQuery) (storage.Page[*storage.Task], error) {
	p, err := s.Storage.ScanTasks(ctx, q)
	s.read(len(p.Items))
	return p, err
}

func (s *countingStore) GetValue(ctx context.Context, addr storage.Address, at storage.ID) (storage.Version, bool, error) {
	v, ok, err := s.Storage.GetValue(ctx, addr, at)
	s.read(one(ok))
	return v, ok, err
}

func (s *countingStore) ScanValues(ctx context.Context, q storage.ValueQuery) (storage.Page[storage.KeyedVersion], error) {
	p, err := s.Storage.ScanValues(ctx, q)
	s.read(len(p.Items))
	return p, err
}

func (s *countingStore) ReadList(ctx context.Context, addr storage.Address, q storage.ListQuery) (storage.Page[storage.Element], error) {
	p, err := s.Storage.ReadList(ctx, addr, q)
	s.read(len(p.Items))
	return p, err
}

func one(ok bool) int {
	if ok {
		return 1
	}
	return 0
}
